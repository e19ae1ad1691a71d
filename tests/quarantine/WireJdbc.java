// pgjdbc (Debian's libpostgresql-jdbc-java, Java's single-file source launcher) for test_wire_jdbc.py:
//   java -cp postgresql.jar WireJdbc.java HOST PORT DATABASE
// The same steps on whatever server it is given; prints one line per thing the client saw: an update
// count, a warning (a notice) or an error with every field of the server's message. pgjdbc speaks the
// extended protocol only; prepareThreshold=1 makes a PreparedStatement a named server statement from
// its first execution, and a batch is one pipeline (one Sync).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.Properties;
import org.postgresql.util.PSQLException;
import org.postgresql.util.PSQLWarning;
import org.postgresql.util.ServerErrorMessage;

public class WireJdbc {
  static String fields(ServerErrorMessage m) {
    if (m == null) return "(no server message)";
    return String.join(" | ", "severity=" + m.getSeverity(), "sqlstate=" + m.getSQLState(), "message=" + m.getMessage(),
        "detail=" + m.getDetail(), "hint=" + m.getHint(), "position=" + m.getPosition(), "where=" + m.getWhere(),
        "internal=" + m.getInternalQuery() + "@" + m.getInternalPosition(), "schema=" + m.getSchema(),
        "table=" + m.getTable(), "file=" + m.getFile(), "line=" + m.getLine(), "routine=" + m.getRoutine());
  }

  static void warnings(SQLWarning w) {
    for (; w != null; w = w.getNextWarning()) {
      if (w instanceof PSQLWarning) System.out.println("  warning: " + fields(((PSQLWarning) w).getServerErrorMessage()));
      else System.out.println("  warning: " + w.getSQLState() + " " + w.getMessage());
    }
  }

  static void error(SQLException e) {
    for (SQLException x = e; x != null; x = x.getNextException()) {
      if (x instanceof PSQLException) System.out.println("  error: " + fields(((PSQLException) x).getServerErrorMessage()));
      else System.out.println("  error: " + x.getSQLState() + " " + x.getMessage().replaceAll("\\s+", " "));
    }
  }

  static void run(Statement s, String label, SqlStep step) {
    System.out.println(label);
    try {
      step.run();
    } catch (SQLException e) {
      error(e);
    }
    try {
      warnings(s.getWarnings());
      s.clearWarnings();
    } catch (SQLException e) {
      System.out.println("  getWarnings: " + e.getMessage());
    }
  }

  interface SqlStep { void run() throws SQLException; }

  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", "postgres");
    p.setProperty("connectTimeout", "10");
    p.setProperty("socketTimeout", "60");
    p.setProperty("sslmode", "disable");
    p.setProperty("prepareThreshold", "1");
    p.setProperty("ApplicationName", "wire_jdbc");
    try (Connection c = DriverManager.getConnection("jdbc:postgresql://" + args[0] + ":" + args[1] + "/" + args[2], p);
         Statement s = c.createStatement();
         PreparedStatement drop = c.prepareStatement("DROP TABLE jd");
         PreparedStatement casc = c.prepareStatement("DROP TABLE jd_casc CASCADE")) {
      c.setAutoCommit(true);
      for (int i = 0; i < 3; i++) {
        run(s, "CREATE TABLE jd #" + i, () -> System.out.println("  count " + s.executeUpdate("CREATE TABLE jd (a int)")));
        run(drop, "prepared DROP TABLE jd #" + i, () -> System.out.println("  count " + drop.executeUpdate()));
      }
      run(drop, "prepared DROP TABLE jd, no table", () -> System.out.println("  count " + drop.executeUpdate()));
      run(casc, "prepared DROP TABLE jd_casc CASCADE", () -> System.out.println("  count " + casc.executeUpdate()));
      run(s, "DROP TABLE IF EXISTS missing", () -> System.out.println("  count " + s.executeUpdate("DROP TABLE IF EXISTS jd_missing")));
      run(s, "DROP TABLE with dependents", () -> System.out.println("  count " + s.executeUpdate("DROP TABLE jd_dep")));
      run(s, "DROP TABLE of a view", () -> System.out.println("  count " + s.executeUpdate("DROP TABLE jd_dep_v")));
      run(s, "batch: DROP TABLE jb1; DROP TABLE jb2, jb3", () -> {
        s.addBatch("DROP TABLE jb1");
        s.addBatch("DROP TABLE jb2, jb3");
        for (int n : s.executeBatch()) System.out.println("  count " + n);
      });
      run(s, "batch: DROP TABLE jb4; DROP TABLE jb_missing", () -> {
        s.addBatch("DROP TABLE jb4");
        s.addBatch("DROP TABLE jb_missing");
        for (int n : s.executeBatch()) System.out.println("  count " + n);
      });
      s.clearBatch();
      // One pipeline holding two DROPs of one table, the second IF EXISTS: two holds of the same OID,
      // the second finding nothing to move (what the server says to it: a NOTICE, then DROP TABLE).
      run(s, "batch: DROP TABLE jb5; DROP TABLE IF EXISTS jb5", () -> {
        s.addBatch("DROP TABLE jb5");
        s.addBatch("DROP TABLE IF EXISTS jb5");
        for (int n : s.executeBatch()) System.out.println("  count " + n);
      });
      s.clearBatch();
      c.setAutoCommit(false);
      run(s, "transaction: DROP TABLE jd_rb then rollback", () -> {
        System.out.println("  count " + s.executeUpdate("DROP TABLE jd_rb"));
        c.rollback();
      });
      c.setAutoCommit(true);
      run(s, "jd_rb and jb4 are back", () -> {
        try (ResultSet r = s.executeQuery("SELECT to_regclass('jd_rb') IS NOT NULL, to_regclass('jb4') IS NOT NULL")) {
          while (r.next()) System.out.println("  row " + r.getBoolean(1) + " " + r.getBoolean(2));
        }
      });
    }
  }
}
