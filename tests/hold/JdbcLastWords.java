// pgjdbc (Debian's libpostgresql-jdbc-java, Java's single-file source launcher) when the server ends
// the session:  java -cp postgresql.jar JdbcLastWords.java HOST PORT ADMIN_PORT DATABASE
// PORT is the server direct or predrop; ADMIN_PORT the server direct, for pg_terminate_backend.
// Scenarios: idle when terminated (then a query), busy in pg_sleep when terminated, ended by
// idle_session_timeout. Prints the exception each raises (class, SQLState, message) and what the
// connection says of itself afterwards, for comparison direct vs through predrop.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class JdbcLastWords {
  static String host, db;

  static Connection connect(int port) throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", "postgres");
    p.setProperty("connectTimeout", "10");
    p.setProperty("socketTimeout", "60");
    p.setProperty("sslmode", "disable");   // as predrop's client leg is here
    return DriverManager.getConnection("jdbc:postgresql://" + host + ":" + port + "/" + db, p);
  }

  static int scalar(Connection c, String sql, int arg) throws SQLException {
    try (PreparedStatement s = c.prepareStatement(sql)) {
      if (arg >= 0) s.setInt(1, arg);
      try (ResultSet r = s.executeQuery()) {
        r.next();
        return r.getInt(1);
      }
    }
  }

  static String describe(Throwable e) {
    if (e == null) return "no exception";
    String state = e instanceof SQLException ? ((SQLException) e).getSQLState() : "-";
    return e.getClass().getName() + " " + state + " " + e.getMessage().replace("\n", " | ");
  }

  static void scenario(String name, int port, int adminPort) throws Exception {
    Connection c = connect(port);
    Connection admin = connect(adminPort);
    int pid = scalar(c, "SELECT pg_backend_pid()", -1);
    Throwable[] thrown = new Throwable[1];
    if (name.equals("busy")) {
      Thread t = new Thread(() -> {
        try (Statement s = c.createStatement()) {
          s.execute("SELECT pg_sleep(30)");
        } catch (Throwable e) {
          thrown[0] = e;
        }
      });
      t.start();
      for (int i = 0; i < 100; i++) {
        if (scalar(admin, "SELECT count(*)::int FROM pg_stat_activity WHERE pid = ? AND state = 'active'", pid) == 1) break;
        Thread.sleep(50);
      }
      scalar(admin, "SELECT pg_terminate_backend(?)::int", pid);
      t.join(20000);
    } else {
      if (name.equals("idle")) scalar(admin, "SELECT pg_terminate_backend(?)::int", pid);
      else try (Statement s = c.createStatement()) { s.execute("SET idle_session_timeout = '300ms'"); }
      Thread.sleep(1200);
      try (Statement s = c.createStatement()) {
        s.execute("SELECT 1");
      } catch (Throwable e) {
        thrown[0] = e;
      }
    }
    System.out.println(name + ": " + describe(thrown[0]));
    Throwable cause = thrown[0] == null ? null : thrown[0].getCause();
    System.out.println(name + ": cause " + describe(cause));
    System.out.println(name + ": closed " + c.isClosed() + ", valid " + c.isValid(2));
    c.close();
    admin.close();
  }

  public static void main(String[] args) throws Exception {
    host = args[0];
    db = args[3];
    for (String name : new String[] {"idle", "busy", "idle_session_timeout"})
      scenario(name, Integer.parseInt(args[1]), Integer.parseInt(args[2]));
  }
}
