// Differential tests: the same byte sequences played to PostgreSQL directly and through predrop.
// The server's replies must be byte-identical after normalising what legitimately differs
// between two connections (BackendKeyData, the notifying backend's pid).
//
// PTEST_DIFFERENTIAL_HELD=1 (ctest's proxy.held.* run of the same tests): predrop has capture and a
// store, so every DROP of a scenario is really held while its snapshot is taken, and the replies must
// still be the server's own. After each test the ledger must show the holds (and none for scenarios
// without a destructive statement), so this run cannot quietly degrade into the plain one.
#include <cstdlib>
#include <thread>

#include "proxy_test_util.hpp"

namespace ptest {
namespace {

bool held_run() {
  const char* v = std::getenv("PTEST_DIFFERENTIAL_HELD");
  return v != nullptr && std::string_view(v) == "1";
}

class Differential : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!held_run()) {
      PTEST_START(proxy_);
      return;
    }
    PTEST_REQUIRE_ENV();
    ASSERT_TRUE(store_.create(per_process("ptest_diff_store"))) << store_.error();
    PTEST_START(proxy_, PredropOptions::with_capture_and_store(store_));
  }
  void TearDown() override {
    if (proxy_.pid() > 0) {
      PTEST_EXPECT_ALIVE(proxy_);
    }
    if (held_run() && !store_.name().empty() && !HasFatalFailure()) expect_ledger();
  }

  // A scenario with destructive statements: in the held run the ledger must have at least `rows` rows
  // (one per statement and table), `written` of them snapshots of committed tables.
  void expect_holds(int rows, int written) {
    min_rows_ = rows;
    min_written_ = written;
  }

  PredropProcess proxy_;
  StoreDatabase store_;

 private:
  void expect_ledger() {
    const std::string counts =
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'written'), count(*) FILTER (WHERE hold_ms > 0) "
        "FROM predrop.drop_events WHERE outcome <> 'unresolved'";   // a DO block is logged, never held
    long rows = -1, written = -1, timed = -1;
    // The ledger row is written while the statement is held; the wait covers a write still in flight.
    for (int attempt = 0; attempt < 50; ++attempt) {
      auto r = store_.query(counts);
      ASSERT_FALSE(r.error) << "reading the ledger: " << r.error->message;
      ASSERT_EQ(r.rows.size(), 1u);
      rows = std::stol(r.rows[0][0].value_or("-1"));
      written = std::stol(r.rows[0][1].value_or("-1"));
      timed = std::stol(r.rows[0][2].value_or("-1"));
      // hold_ms is set once the hold ends, after the row itself is written.
      if (min_rows_ == 0 || (rows >= min_rows_ && written >= min_written_ && timed == rows)) break;
      std::this_thread::sleep_for(100ms);
    }
    std::string ledger;
    for (const auto& row :
         store_.query("SELECT concat_ws(' ', outcome, schema_name || '.' || table_name, statement_kind, 'hold_ms=' || hold_ms, error) "
                      "FROM predrop.drop_events WHERE outcome <> 'unresolved' ORDER BY occurred_at").rows)
      ledger += "\n  " + row[0].value_or("NULL");
    if (min_rows_ == 0) {
      EXPECT_EQ(rows, 0) << "no destructive statement in this scenario, yet the ledger has:" << ledger;
      return;
    }
    EXPECT_GE(rows, min_rows_) << "the scenario's DROPs were not all held (ledger of " << store_.name() << "):" << ledger
                               << "\npredrop log:\n" << proxy_.log();
    EXPECT_GE(written, min_written_) << "no snapshot of the committed tables dropped:" << ledger;
    EXPECT_EQ(timed, rows) << "every ledger row records how long its statement was held:" << ledger;
  }

  int min_rows_ = 0;
  int min_written_ = 0;
};

// Opens a session on `port` and records the startup replies.
RawConn open_session(uint16_t port, Transcript& t, const std::string& app = "ptest-diff") {
  RawConn c;
  if (!c.connect("127.0.0.1", port)) {
    t.problems.push_back("connect: " + c.last_error());
    return c;
  }
  step(c, t, "startup", msg::startup(default_params(app)), 'Z');
  return c;
}

void finish(RawConn& c, Transcript& t) {
  t.marker("terminate");
  c.send(msg::terminate());
  if (!c.wait_closed(5000ms)) t.problems.push_back("Terminate did not close the connection");
}

TEST_F(Differential, SimpleQueries) {
  const std::string table = per_process("ptest_simple");
  const std::string kept = per_process("ptest_simple_kept");
  // Held run: the DROP of a table created in the same implicit transaction (ledger table_missing,
  // predrop's connection cannot see it), the DROP IF EXISTS of a missing one, and a committed table's.
  expect_holds(2, 1);
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "multi", msg::query("SELECT 1 AS a, 'x'::text AS b, NULL::int AS c; SELECT 1/0; SELECT 2"), 'Z');
    step(c, t, "series", msg::query("SELECT g, repeat('y', g) FROM generate_series(1, 200) g"), 'Z');
    step(c, t, "empty", msg::query(""), 'Z');
    step(c, t, "syntax error", msg::query("SELEC 1"), 'Z');
    step(c, t, "ddl+drop",
         msg::query("CREATE TABLE " + table + " (a int, b text); INSERT INTO " + table +
                    " SELECT g, g::text FROM generate_series(1,10) g; SELECT count(*) FROM " + table +
                    "; DROP TABLE " + table),
         'Z');
    step(c, t, "drop if exists", msg::query("DROP TABLE IF EXISTS " + table + "_missing"), 'Z');
    step(c, t, "txn error", msg::query("BEGIN; SELECT 1/0;"), 'Z');
    step(c, t, "in failed txn", msg::query("SELECT 1"), 'Z');
    step(c, t, "rollback", msg::query("ROLLBACK"), 'Z');
    // (No columns of temp tables in results: their RowDescription carries the per-run table OID.)
    step(c, t, "txn", msg::query("BEGIN; CREATE TEMP TABLE tt(x int); INSERT INTO tt VALUES (1),(2); SELECT x * 1 AS x FROM tt ORDER BY 1; COMMIT"), 'Z');
    step(c, t, "show", msg::query("SHOW server_version; SHOW client_encoding; SET application_name = 'renamed'"), 'Z');
    step(c, t, "create committed", msg::query("CREATE TABLE " + kept + " (a int, b text); INSERT INTO " + kept + " VALUES (1, 'one')"),
         'Z');
    step(c, t, "drop committed", msg::query("DROP TABLE " + kept), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, ExtendedProtocol) {
  const std::string table = per_process("ptest_ext");
  const std::string kept = per_process("ptest_ext_kept");
  // Held run: the DROP in the pipeline that created the table (table_missing) and a committed table's.
  expect_holds(2, 1);
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "parse/describe/bind/execute",
         msg::parse("s1", "SELECT $1::int + 1 AS n, $2::text AS t", {23, 25}) + msg::describe('S', "s1") +
             msg::bind("p1", "s1", {"41", std::nullopt}) + msg::describe('P', "p1") + msg::execute("p1") + msg::sync(),
         'Z');
    step(c, t, "reuse statement", msg::bind("", "s1", {"1", "one"}) + msg::execute("") + msg::sync(), 'Z');
    step(c, t, "portal suspended",
         msg::parse("", "SELECT g FROM generate_series(1, 10) g") + msg::bind("", "") + msg::execute("", 3) +
             msg::execute("", 3) + msg::execute("", 0) + msg::sync(),
         'Z');
    step(c, t, "close", msg::close('S', "s1") + msg::close('P', "p1") + msg::sync(), 'Z');
    step(c, t, "unknown statement", msg::bind("", "s1", {"1", "x"}) + msg::execute("") + msg::sync(), 'Z');
    step(c, t, "ddl and drop (extended)",
         msg::parse("", "CREATE TABLE " + table + " (a int)") + msg::bind("", "") + msg::execute("") +
             msg::parse("dr", "DROP TABLE " + table) + msg::bind("", "dr") + msg::execute("") + msg::sync(),
         'Z');
    step(c, t, "error in parse", msg::parse("", "SELEC 1") + msg::bind("", "") + msg::execute("") + msg::sync(), 'Z');
    step(c, t, "after error", msg::parse("", "SELECT 'ok'") + msg::bind("", "") + msg::execute("") + msg::sync(), 'Z');
    step(c, t, "create committed (extended)",
         msg::parse("", "CREATE TABLE " + kept + " (a int)") + msg::bind("", "") + msg::execute("") + msg::sync(), 'Z');
    step(c, t, "drop committed (extended)",
         msg::parse("dk", "DROP TABLE " + kept) + msg::bind("", "dk") + msg::execute("") + msg::sync(), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, PipelineWithErrorSkipsToSync) {
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    std::string pipeline;
    for (int i = 0; i < 40; ++i) {
      if (i == 17) {
        pipeline += msg::parse("", "SELECT 1 / $1::int") + msg::bind("", "", {"0"}) + msg::execute("");
      } else {
        std::string name = "q" + std::to_string(i);
        pipeline += msg::parse(name, "SELECT $1::int * 2 AS v") + msg::bind("", name, {std::to_string(i)}) +
                    msg::describe('P', "") + msg::execute("");
      }
    }
    pipeline += msg::sync();
    step(c, t, "pipeline", pipeline, 'Z');
    // Statements parsed before the error exist, the ones after it were never parsed.
    step(c, t, "after",
         msg::bind("", "q3", {"5"}) + msg::execute("") + msg::sync() + msg::bind("", "q30", {"5"}) + msg::execute("") +
             msg::sync(),
         'Z', 2);
    // Several Syncs in one write, errors in two segments.
    step(c, t, "segments",
         msg::query("SELECT 1") + msg::parse("", "SELECT 1/0") + msg::bind("", "") + msg::execute("") + msg::sync() +
             msg::parse("", "SELECT 2") + msg::bind("", "") + msg::execute("") + msg::sync() +
             msg::parse("", "bad sql") + msg::sync() + msg::query("SELECT 3"),
         'Z', 5);
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, FlushWithoutSync) {
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "flush",
         msg::parse("f", "SELECT $1::text || '!' AS x") + msg::bind("", "f", {"hi"}) + msg::describe('P', "") +
             msg::execute("") + msg::flush(),
         'C');
    step(c, t, "flush again", msg::bind("", "f", {"again"}) + msg::execute("") + msg::flush(), 'C');
    step(c, t, "sync", msg::sync(), 'Z');
    step(c, t, "flush error", msg::parse("", "SELECT 1/0") + msg::bind("", "") + msg::execute("") + msg::flush(), 'E');
    step(c, t, "sync after error", msg::sync(), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, LargeStatements) {
  std::string text100k(100 * 1024, 'a');
  for (size_t i = 0; i < text100k.size(); i += 97) text100k[i] = static_cast<char>('b' + (i % 23));
  std::string text5m(5 * 1024 * 1024, 'z');
  for (size_t i = 0; i < text5m.size(); i += 1013) text5m[i] = static_cast<char>('A' + (i % 26));
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "parse 100 KB",
         msg::parse("big", "SELECT '" + text100k + "' AS big, $1::int AS n") + msg::bind("", "big", {"7"}) +
             msg::execute("") + msg::sync(),
         'Z');
    step(c, t, "query 100 KB", msg::query("SELECT length('" + text100k + "'); SELECT '" + text100k + "'"), 'Z');
    step(c, t, "query 5 MB", msg::query("SELECT md5('" + text5m + "'), '" + text5m + "' AS big"), 'Z');
    step(c, t, "parse 5 MB", msg::parse("", "SELECT length('" + text5m + "')") + msg::bind("", "") + msg::execute("") +
                                 msg::sync(),
         'Z');
    step(c, t, "small after", msg::query("SELECT 'still framed'"), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, Copy20MB) {
  // ~20 MB of rows, sent in CopyData messages of very different sizes (one row .. ~300 KB).
  std::vector<std::string> chunks;
  size_t total = 0;
  const std::string pad(80, 'p');
  std::string cur;
  int sizes[] = {1, 7, 100, 3000, 2, 450};
  int row = 0, which = 0, in_chunk = 0;
  while (total < 20u * 1024 * 1024) {
    std::string line = std::to_string(row) + "\t" + pad.substr(row % 50) + std::to_string(row * 7) + "\n";
    ++row;
    cur += line;
    total += line.size();
    if (++in_chunk == sizes[which]) {
      chunks.push_back(std::move(cur));
      cur.clear();
      in_chunk = 0;
      which = (which + 1) % 6;
    }
  }
  if (!cur.empty()) chunks.push_back(std::move(cur));
  std::string copy_in;
  for (const auto& ch : chunks) copy_in += msg::copy_data(ch);
  copy_in += msg::copy_done();

  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "create", msg::query("CREATE TEMP TABLE cp (i int, t text)"), 'Z');
    step(c, t, "copy in start", msg::query("COPY cp FROM STDIN"), 'G');
    step(c, t, "copy in data", copy_in, 'Z', 1, 120000ms);
    step(c, t, "check", msg::query("SELECT count(*), sum(length(t)), md5(string_agg(t, ',' ORDER BY i)) FROM cp"), 'Z');
    step(c, t, "copy out", msg::query("COPY (SELECT * FROM cp ORDER BY i) TO STDOUT"), 'Z', 1, 120000ms);
    // COPY with an error in the middle of the data: the server answers early and ignores the rest.
    step(c, t, "copy bad start", msg::query("COPY cp FROM STDIN"), 'G');
    step(c, t, "copy bad data",
         msg::copy_data("1\tok\n") + msg::copy_data("x\tnot a number\n") + msg::copy_data(chunks[3]) + msg::copy_done(),
         'Z');
    step(c, t, "copy fail start", msg::query("COPY cp FROM STDIN"), 'G');
    step(c, t, "copy fail", msg::copy_data("5\tx\n") + msg::copy_fail("client gave up"), 'Z');
    step(c, t, "count", msg::query("SELECT count(*) FROM cp"), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, NoticesFromDoBlock) {
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c = open_session(port, t);
    step(c, t, "notice",
         msg::query("DO $$BEGIN RAISE NOTICE 'hello %', 42; RAISE WARNING 'careful'; "
                    "FOR i IN 1..50 LOOP RAISE NOTICE 'n%', i; END LOOP; END$$"),
         'Z');
    step(c, t, "notice+error", msg::query("DO $$BEGIN RAISE NOTICE 'before'; RAISE EXCEPTION 'boom' USING ERRCODE = '22012'; END$$"),
         'Z');
    step(c, t, "notice extended",
         msg::parse("", "DO $$BEGIN RAISE NOTICE 'ext'; END$$") + msg::bind("", "") + msg::execute("") + msg::sync(), 'Z');
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, ListenNotify) {
  const std::string channel = per_process("ptest_chan");
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn a = open_session(port, t, "ptest-listener");
    RawConn b = open_session(port, t, "ptest-notifier");
    step(a, t, "listen", msg::query("LISTEN " + channel), 'Z');
    step(b, t, "notify", msg::query("NOTIFY " + channel + ", 'payload one'; SELECT pg_notify('" + channel + "', 'two')"),
         'Z');
    // Delivered to the idle listener without it asking.
    step(a, t, "receive", "", 'A', 2, 10000ms);
    step(b, t, "notify in txn", msg::query("BEGIN; NOTIFY " + channel + ", 'three'; COMMIT"), 'Z');
    step(a, t, "receive 3", "", 'A', 1, 10000ms);
    step(a, t, "unlisten", msg::query("UNLISTEN *"), 'Z');
    finish(a, t);
    finish(b, t);
    return t;
  });
}

TEST_F(Differential, StartupSplitIntoSingleBytes) {
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c;
    if (!c.connect("127.0.0.1", port)) {
      t.problems.push_back("connect: " + c.last_error());
      return t;
    }
    t.marker("slow startup");
    std::string pkt = msg::startup(default_params("ptest-slow-startup-with-a-longer-name"));
    if (!c.send_slowly(pkt, 1, 2ms)) t.problems.push_back("send: " + c.last_error());
    bool complete = false;
    t.add(c.read_until('Z', 1, 10000ms, &complete));
    if (!complete) t.problems.push_back("slow startup: no ReadyForQuery");
    // A query in 3-byte pieces too.
    t.marker("slow query");
    c.send_slowly(msg::query("SELECT 'slowly' AS s"), 3, 1ms);
    t.add(c.read_until('Z', 1, 10000ms, &complete));
    if (!complete) t.problems.push_back("slow query: no ReadyForQuery");
    finish(c, t);
    return t;
  });
}

TEST_F(Differential, ManyMessagesInOneWrite) {
  expect_same_through_predrop(proxy_, [&](uint16_t port) {
    Transcript t;
    RawConn c;
    if (!c.connect("127.0.0.1", port)) {
      t.problems.push_back("connect: " + c.last_error());
      return t;
    }
    // Startup and the first queries together: the server reads them after authentication.
    std::string all = msg::startup(default_params("ptest-one-write"));
    for (int i = 0; i < 300; ++i) all += msg::query("SELECT " + std::to_string(i) + " AS i");
    for (int i = 0; i < 200; ++i)
      all += msg::parse("", "SELECT $1::int + 1") + msg::bind("", "", {std::to_string(i)}) + msg::execute("") + msg::sync();
    all += msg::query("SELECT 'last'");
    step(c, t, "one write", all, 'Z', 1 + 300 + 200 + 1, 60000ms);
    finish(c, t);
    return t;
  });
}

}  // namespace
}  // namespace ptest
