// pgjdbc (Debian's libpostgresql-jdbc-java, Java's single-file source launcher) running statements
// through predrop:  java -cp postgresql.jar JdbcStatements.java HOST PORT DATABASE SQL...
// Each SQL runs in autocommit as a Statement on the extended protocol (pgjdbc's only one), one
// statement per Parse/Bind/Execute/Sync. Prints "ok: SQL" or "error: SQLSTATE message"; exit 1 on
// the first error.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class JdbcStatements {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", "postgres");
    p.setProperty("connectTimeout", "10");
    p.setProperty("socketTimeout", "60");
    p.setProperty("sslmode", "disable");
    try (Connection c = DriverManager.getConnection("jdbc:postgresql://" + args[0] + ":" + args[1] + "/" + args[2], p)) {
      c.setAutoCommit(true);
      for (int i = 3; i < args.length; i++) {
        try (Statement s = c.createStatement()) {
          s.execute(args[i]);
          System.out.println("ok: " + args[i]);
        } catch (SQLException e) {
          System.out.println("error: " + e.getSQLState() + " " + e.getMessage().replace("\n", " | "));
          System.exit(1);
        }
      }
    }
  }
}
