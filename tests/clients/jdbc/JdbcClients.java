// pgjdbc (Debian's libpostgresql-jdbc-java) against one port: prints a transcript of what the
// driver saw (results, SQLSTATEs, server error fields, warnings, notifications; no PIDs, no
// timings). tests/clients/test_jdbc.sh runs it direct and through predrop and compares the two.
// What pgjdbc does that the other clients do not: it pipelines a whole executeBatch (Parse/Bind/
// Execute per row, one Sync), turns a statement into a named server-side one after prepareThreshold
// (5) executions, reads a ResultSet with a fetch size through Execute with a row limit and
// PortalSuspended, speaks COPY through CopyManager, cancels with Statement.cancel() from another
// thread, and does SCRAM and md5 in Java.
//
//   java -cp /usr/share/java/postgresql.jar JdbcClients.java HOST PORT USER   (database cl_jdbc, fresh)
// Exit 0 when every check held, 1 otherwise (the transcript says which).
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.postgresql.PGStatement;
import org.postgresql.copy.CopyManager;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

public class JdbcClients {
  static final String DB = "cl_jdbc";
  static String host, user;
  static final List<String> out = new ArrayList<>();
  static int failed = 0;

  static void log(Object... parts) {
    StringBuilder sb = new StringBuilder();
    for (Object p : parts) sb.append(sb.length() == 0 ? "" : " | ").append(p);
    out.add(sb.toString());
  }

  static void check(boolean ok, String what) {
    log(ok ? "check ok" : "CHECK FAILED", what);
    if (!ok) failed++;
  }

  static String err(SQLException e) {
    StringBuilder sb = new StringBuilder(e.getSQLState() + " " + e.getMessage());
    if (e instanceof PSQLException pe && pe.getServerErrorMessage() != null) {
      ServerErrorMessage m = pe.getServerErrorMessage();
      sb.append(" [severity=").append(m.getSeverity()).append(" detail=").append(m.getDetail())
          .append(" hint=").append(m.getHint()).append(" position=").append(m.getPosition())
          .append(" table=").append(m.getTable()).append(" constraint=").append(m.getConstraint()).append(']');
    }
    return sb.toString();
  }

  static String md5(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("MD5").digest(b));
  }

  static String rows(ResultSet rs) throws SQLException {
    ResultSetMetaData md = rs.getMetaData();
    StringBuilder sb = new StringBuilder();
    for (int i = 1; i <= md.getColumnCount(); i++) sb.append(md.getColumnLabel(i)).append(':').append(md.getColumnTypeName(i)).append(' ');
    while (rs.next()) {
      sb.append("\n  ");
      for (int i = 1; i <= md.getColumnCount(); i++) {
        Object o = rs.getObject(i);
        sb.append(o instanceof byte[] b ? HexFormat.of().formatHex(b) : String.valueOf(o)).append(" ; ");
      }
    }
    return sb.toString();
  }

  static Connection connect(int port, String db, String as, String password) throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", as);
    if (password != null) p.setProperty("password", password);
    p.setProperty("ApplicationName", "pgjdbc");
    p.setProperty("connectTimeout", "10");
    p.setProperty("socketTimeout", "60");
    return DriverManager.getConnection("jdbc:postgresql://" + host + ":" + port + "/" + db, p);
  }

  static Connection connect(int port) throws SQLException { return connect(port, DB, user, null); }

  static void scenario(int port) throws Exception {
    try (Connection c = connect(port)) {
      int pid = c.unwrap(PGConnection.class).getBackendPID();
      try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
        rs.next();
        check(rs.getInt(1) == pid, "getBackendPID() (BackendKeyData) equals pg_backend_pid()");
      }
      try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
               "SELECT 1::int AS i, 2::bigint AS big, 1.50::numeric AS n, 'ünï ☃'::text AS s, "
               + "'2024-02-29 12:34:56.789+00'::timestamptz AS ts, '{\"a\":[1,null]}'::jsonb AS j, '\\x00ff'::bytea AS b, "
               + "ARRAY[1,2,NULL]::int[] AS arr, true AS flag, NULL::text AS nothing, interval '1 day 2 hours' AS iv, "
               + "'a1b2c3d4-0000-0000-0000-000000000001'::uuid AS u")) {
        log("types", rows(rs));
      }

      // Several statements in one execute: pgjdbc sends them as one pipeline, one result each.
      try (Statement s = c.createStatement()) {
        s.execute("CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int CHECK (qty >= 0))");
        boolean isResult = s.execute("SELECT 1 AS a; SELECT 2 AS b; UPDATE items SET qty = 0 WHERE false");
        StringBuilder sb = new StringBuilder();
        while (true) {
          if (isResult) {
            try (ResultSet rs = s.getResultSet()) { sb.append(rows(rs)).append(" / "); }
          } else {
            int n = s.getUpdateCount();
            if (n == -1) break;
            sb.append("update ").append(n).append(" / ");
          }
          isResult = s.getMoreResults();
        }
        log("multi", sb);
      }

      // Past prepareThreshold the statement becomes a named server-side one (Parse once, Bind after).
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO items (name, qty) VALUES (?, ?)")) {
        for (int i = 0; i < 20; i++) {
          ps.setString(1, "item " + i);
          ps.setInt(2, i);
          ps.executeUpdate();
        }
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT id, name, qty FROM items WHERE qty > ? ORDER BY id")) {
        for (int v : new int[] {15, 16, 17, 18, 19, 10, 5}) {
          ps.setInt(1, v);
          try (ResultSet rs = ps.executeQuery()) { log("prepared", v, rows(rs)); }
        }
        check(ps.unwrap(PGStatement.class).isUseServerPrepare(), "a statement run 7 times is server-prepared");
      }

      // executeBatch: every row's Parse/Bind/Execute in one pipeline before a single Sync.
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO items (name, qty) VALUES (?, ?)")) {
        for (int i = 100; i < 400; i++) {
          ps.setString(1, "batch " + i);
          ps.setInt(2, i);
          ps.addBatch();
        }
        log("batch", Arrays.stream(ps.executeBatch()).sum());
      }
      // An error in the middle of a pipelined batch: the server skips to the Sync, the batch rolls back.
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO items (name, qty) VALUES (?, ?)")) {
        for (String n : new String[] {"b1", "b2", "item 3", "b4"}) {
          ps.setString(1, n);
          ps.setInt(2, 1);
          ps.addBatch();
        }
        try {
          ps.executeBatch();
          log("batch with error: no error?");
        } catch (BatchUpdateException e) {
          log("batch with error", Arrays.toString(e.getUpdateCounts()), err(e.getNextException() != null ? e.getNextException() : e));
        }
      }
      try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT count(*), sum(qty) FROM items")) {
        log("after batches", rows(rs));
      }

      // Transactions, a savepoint, and a fetch-size cursor (Execute with a row limit, PortalSuspended).
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.executeUpdate("INSERT INTO items (name, qty) VALUES ('in tx', 1)");
        c.rollback();
        Savepoint sp = c.setSavepoint("s");
        try {
          s.executeUpdate("INSERT INTO items (name, qty) VALUES ('neg', -1)");
        } catch (SQLException e) {
          log("check violation", err(e));
          c.rollback(sp);
        }
        s.executeUpdate("INSERT INTO items (name, qty) VALUES ('after savepoint', 5)");
        c.commit();
        s.setFetchSize(7);
        try (ResultSet rs = s.executeQuery("SELECT g, md5(g::text) FROM generate_series(1, 100) g")) {
          int n = 0;
          StringBuilder h = new StringBuilder();
          while (rs.next()) {
            n++;
            h.append(rs.getString(2));
          }
          log("fetch size 7", n, md5(h.toString().getBytes(StandardCharsets.UTF_8)));
        }
        c.commit();
      }
      c.setAutoCommit(true);
      try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT name FROM items WHERE name IN ('in tx', 'neg', 'after savepoint')")) {
        log("after transactions", rows(rs));
      }

      // Errors outside a transaction; the connection stays usable.
      for (String sql : new String[] {"SELEC 1", "SELECT * FROM nope", "SELECT 1/0", "SELECT 'x'::int"}) {
        try (Statement s = c.createStatement()) {
          s.execute(sql);
          log("no error?", sql);
        } catch (SQLException e) {
          log("error", sql, err(e));
        }
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT ?::int")) {
        ps.setString(1, "x");
        ps.executeQuery();
        log("no error? bad parameter");
      } catch (SQLException e) {
        log("parameter error", err(e));
      }
      try (Statement s = c.createStatement()) {
        s.execute("DO $$ BEGIN RAISE NOTICE 'jdbc notice %', 1; RAISE WARNING 'jdbc warning'; END $$");
        StringBuilder w = new StringBuilder();
        for (SQLWarning x = s.getWarnings(); x != null; x = x.getNextWarning()) w.append(x.getSQLState()).append(' ').append(x.getMessage()).append(" / ");
        log("warnings", w);
      }

      // The catalog queries behind DatabaseMetaData.
      DatabaseMetaData md = c.getMetaData();
      try (ResultSet rs = md.getColumns(null, "public", "items", null)) {
        StringBuilder sb = new StringBuilder();
        while (rs.next()) sb.append(rs.getString("COLUMN_NAME")).append(' ').append(rs.getString("TYPE_NAME")).append(' ').append(rs.getString("IS_NULLABLE")).append(" / ");
        log("metadata columns", sb);
      }
      try (ResultSet rs = md.getPrimaryKeys(null, "public", "items")) {
        while (rs.next()) log("metadata primary key", rs.getString("COLUMN_NAME"), rs.getString("PK_NAME"));
      }

      // COPY both ways through CopyManager, then a COPY IN the server rejects.
      CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
      ByteArrayOutputStream bo = new ByteArrayOutputStream();
      long outRows = cm.copyOut("COPY (SELECT g, md5(g::text), repeat('x', g % 50) FROM generate_series(1, 200000) g) TO STDOUT", bo);
      byte[] data = bo.toByteArray();
      log("copy out", outRows, data.length, md5(data));
      try (Statement s = c.createStatement()) { s.execute("CREATE TABLE copied (g int, h text, pad text)"); }
      log("copy in", cm.copyIn("COPY copied FROM STDIN", new ByteArrayInputStream(data)));
      try {
        cm.copyIn("COPY copied FROM STDIN", new ByteArrayInputStream("1\tx\n".getBytes(StandardCharsets.UTF_8)));
        log("no error? short row");
      } catch (SQLException e) {
        log("copy in error", err(e));
      }
      try (Statement s = c.createStatement();
           ResultSet rs = s.executeQuery("SELECT count(*), md5(string_agg(g || h || pad, ',' ORDER BY g)) FROM copied")) {
        log("copied", rows(rs));
      }
    }

    // LISTEN/NOTIFY between two connections.
    try (Connection a = connect(port); Connection b = connect(port)) {
      try (Statement s = a.createStatement()) {
        s.execute("LISTEN jdbc_chan");
        s.execute("LISTEN \"Other Chan\"");
      }
      int sender = b.unwrap(PGConnection.class).getBackendPID();
      try (Statement s = b.createStatement()) {
        s.execute("NOTIFY jdbc_chan, 'hello jdbc'");
        s.execute("SELECT pg_notify('Other Chan', 'payload ☃')");
      }
      List<String> got = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 10000;
      while (got.size() < 2 && System.currentTimeMillis() < deadline) {
        PGNotification[] ns = a.unwrap(PGConnection.class).getNotifications(500);
        if (ns == null) continue;
        for (PGNotification n : ns) {
          got.add(n.getName() + "=" + n.getParameter());
          check(n.getPID() == sender, "notification carries the sender's backend PID");
        }
      }
      log("notifications", got);
    }

    // Statement.cancel() from another thread: a CancelRequest on a new connection to the same port.
    try (Connection x = connect(port); Statement s = x.createStatement()) {
      ScheduledExecutorService ex = Executors.newSingleThreadScheduledExecutor();
      ex.schedule(() -> {
        try {
          s.cancel();
        } catch (SQLException e) {
          log("cancel() failed", err(e));
        }
      }, 500, TimeUnit.MILLISECONDS);
      long t0 = System.nanoTime();
      try {
        s.execute("SELECT pg_sleep(30)");
        log("cancel: no error?");
      } catch (SQLException e) {
        log("cancelled", err(e));
      }
      check((System.nanoTime() - t0) / 1e9 < 20, "the cancelled pg_sleep(30) returned long before its end");
      ex.shutdown();
      try (ResultSet rs = s.executeQuery("SELECT 1")) {
        rs.next();
        log("after cancel", rs.getInt(1));
      }
    }

    // SCRAM-SHA-256 and md5 as pgjdbc implements them, right and wrong passwords.
    for (String[] up : new String[][] {{"scram_user", "scram-secret"}, {"scram_user", "bad"}, {"md5_user", "md5-secret"}, {"md5_user", "bad"}}) {
      try (Connection x = connect(port, DB, up[0], up[1]); Statement s = x.createStatement();
           ResultSet rs = s.executeQuery("SELECT current_user")) {
        rs.next();
        log("auth", up[0], "ok", rs.getString(1));
      } catch (SQLException e) {
        log("auth", up[0], "failed", err(e));
      }
    }
  }

  public static void main(String[] args) throws Exception {
    host = args[0];
    int port = Integer.parseInt(args[1]);
    user = args[2];
    scenario(port);
    for (String l : out) System.out.println(l);
    System.exit(failed == 0 ? 0 : 1);
  }
}
