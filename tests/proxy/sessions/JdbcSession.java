// One pgjdbc session for the decoder's recorded fixtures (jdbc_batch.bin), small enough to keep in
// the repository: a pipelined executeBatch with and without an error in the middle, a statement
// past prepareThreshold (named, server-side), a fetch-size cursor (PortalSuspended), a savepoint,
// COPY both ways and a rejected COPY IN through CopyManager, SET search_path and a DROP.
//   java -cp /usr/share/java/postgresql.jar JdbcSession.java HOST PORT USER DATABASE
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.sql.*;
import java.util.Properties;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public class JdbcSession {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", args[2]);
    p.setProperty("sslmode", "disable");
    try (Connection c = DriverManager.getConnection("jdbc:postgresql://" + args[0] + ":" + args[1] + "/" + args[3], p)) {
      try (Statement s = c.createStatement()) {
        s.execute("DROP TABLE IF EXISTS jitems");
        s.execute("CREATE TABLE jitems (id serial PRIMARY KEY, name text UNIQUE, qty int CHECK (qty >= 0))");
        s.execute("SELECT 1 AS a; SELECT 2 AS b; UPDATE jitems SET qty = 0 WHERE false");
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT id, name FROM jitems WHERE qty > ?")) {
        for (int v = 0; v < 7; v++) {
          ps.setInt(1, v);
          try (ResultSet rs = ps.executeQuery()) { while (rs.next()) { } }
        }
      }
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO jitems (name, qty) VALUES (?, ?)")) {
        for (int i = 0; i < 50; i++) {
          ps.setString(1, "batch " + i);
          ps.setInt(2, i);
          ps.addBatch();
        }
        ps.executeBatch();
      }
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO jitems (name, qty) VALUES (?, ?)")) {
        for (String n : new String[] {"b1", "b2", "batch 3", "b4"}) {
          ps.setString(1, n);
          ps.setInt(2, 1);
          ps.addBatch();
        }
        try {
          ps.executeBatch();
        } catch (BatchUpdateException e) {
          System.out.println("batch with error: " + e.getNextException().getSQLState());
        }
      }
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.executeUpdate("INSERT INTO jitems (name, qty) VALUES ('in tx', 1)");
        c.rollback();
        Savepoint sp = c.setSavepoint("s");
        try {
          s.executeUpdate("INSERT INTO jitems (name, qty) VALUES ('neg', -1)");
        } catch (SQLException e) {
          c.rollback(sp);
        }
        s.execute("SET LOCAL search_path = pg_catalog, public");
        c.commit();
        s.setFetchSize(7);
        try (ResultSet rs = s.executeQuery("SELECT g, md5(g::text) FROM generate_series(1, 30) g")) { while (rs.next()) { } }
        c.commit();
      }
      c.setAutoCommit(true);
      CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
      ByteArrayOutputStream bo = new ByteArrayOutputStream();
      cm.copyOut("COPY (SELECT g, md5(g::text) FROM generate_series(1, 100) g) TO STDOUT", bo);
      try (Statement s = c.createStatement()) { s.execute("CREATE TABLE jcopied (g int, h text)"); }
      cm.copyIn("COPY jcopied FROM STDIN", new ByteArrayInputStream(bo.toByteArray()));
      try {
        cm.copyIn("COPY jcopied FROM STDIN", new ByteArrayInputStream("1\n".getBytes(StandardCharsets.UTF_8)));
      } catch (SQLException e) {
        System.out.println("copy in error: " + e.getSQLState());
      }
      try (Statement s = c.createStatement()) {
        s.execute("SET search_path = public");
        try { s.execute("SELECT 1/0"); } catch (SQLException e) { System.out.println("error: " + e.getSQLState()); }
        s.execute("DROP TABLE jcopied");
        s.execute("DROP TABLE jitems");
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT ?::int")) {
        ps.setString(1, "x");
        ps.executeQuery();
      } catch (SQLException e) {
        System.out.println("parameter error: " + e.getSQLState());
      }
    }
    System.out.println("done");
  }
}
