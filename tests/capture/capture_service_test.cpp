// CaptureService against a real PostgreSQL 15: what a snapshot holds, that it never touches the
// table (scan counters, ACCESS EXCLUSIVE held elsewhere), name resolution, batching, the pool
// bound, the deadline, outcomes, dedup and enrichment.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "capture/capture.hpp"
#include "capture/catalog_queries.hpp"
#include "capture/store_writer.hpp"
#include "capture_fixture.hpp"

namespace predrop::capture {
// gtest prints an outcome by its ledger text.
void PrintTo(SnapshotOutcome o, std::ostream* os) { *os << to_string(o); }
}  // namespace predrop::capture

using namespace predrop::capture;
using namespace predrop::capture::testing;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

SnapshotResult run(CaptureService& svc, SnapshotRequest req, std::chrono::milliseconds wait = 20s) {
  auto p = std::make_shared<std::promise<SnapshotResult>>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto f = p->get_future();
  svc.snapshot(std::move(req), [p, calls](SnapshotResult r) {
    if (++*calls == 1) p->set_value(std::move(r));
    else ADD_FAILURE() << "done() called twice";
  });
  if (f.wait_for(wait) != std::future_status::ready) {
    ADD_FAILURE() << "done() never called";
    return {};
  }
  return f.get();
}

TargetSpec table(std::string schema, std::string name) { return {TargetKind::relation, std::move(schema), std::move(name), {}, {}, 0}; }

// Polls the store until sql returns want (asynchronous follow-ups: ledger, outcomes).
bool eventually(Db& db, const std::string& sql, const std::string& want, std::chrono::milliseconds limit = 5s) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (db.value(sql) == want) return true;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << sql << " never gave " << want << " (last: " << db.value(sql) << ")";
  return false;
}

}  // namespace

class CaptureTest : public CaptureDatabasesTest {
 protected:
  CaptureTest() : CaptureDatabasesTest("cap") {}
  SnapshotRequest request(std::vector<TargetSpec> targets, std::vector<std::string> path = {"public"}) {
    SnapshotRequest r;
    r.ctx.database = src->name();
    r.ctx.session_user = "postgres";
    r.ctx.application_name = "psql";
    r.ctx.client_addr = "127.0.0.1";
    r.ctx.statement_kind = targets.empty() ? "" : "drop_table";
    r.ctx.statement = "DROP TABLE t";
    r.search_path = std::move(path);
    r.targets = std::move(targets);
    r.deadline = Clock::now() + 20s;
    return r;
  }
};

// Long values are clipped to max_value_chars characters (120 here) whichever side clips them: an
// array within max_values x max_value_chars bytes goes whole and predrop clips it, a longer one is
// clipped by the server (capture/catalog_queries.cpp, kProperArray). Characters, not bytes: 'é'
// is two bytes in UTF-8. Both hold a target of every kind and one of names only (the lean read).
TEST_F(CaptureTest, LongValuesClipToTheSameCharactersOnEitherSide) {
  db->exec(R"(
    CREATE TABLE public.long_values (few text, many text);
    INSERT INTO public.long_values
      SELECT repeat('é', 300) || (g % 3), repeat('é', 300) || (g % 40) FROM generate_series(1, 4000) g;
    ANALYZE public.long_values;)");
  const std::string few_bytes = db->value("SELECT octet_length(most_common_vals::text) FROM pg_stats WHERE tablename = 'long_values' AND attname = 'few'");
  const std::string many_bytes = db->value("SELECT octet_length(most_common_vals::text) FROM pg_stats WHERE tablename = 'long_values' AND attname = 'many'");
  // The two sides of the bound: 20 values x 120 characters.
  ASSERT_LE(std::stoi(few_bytes), 20 * 120);
  ASSERT_GT(std::stoi(many_bytes), 20 * 120);
  std::string clipped;
  for (int i = 0; i < 120; ++i) clipped += "é";
  for (bool lean : {true, false}) {
    CaptureService svc(cfg);
    std::vector<TargetSpec> targets{table("public", "long_values")};
    if (!lean) targets.push_back({TargetKind::schema, "", "no_such_schema", {}, {}, 0});
    auto res = run(svc, request(targets));
    auto it = std::find_if(res.tables.begin(), res.tables.end(), [](const TableResult& t) { return t.table == "long_values"; });
    ASSERT_NE(it, res.tables.end());
    ASSERT_EQ(it->outcome, SnapshotOutcome::written) << it->error;
    auto rows = sdb->exec("SELECT columns_profile::text FROM predrop.schema_snapshots WHERE id = '" + it->snapshot_id + "'");
    ASSERT_EQ(rows.size(), 1u);
    auto profile = nlohmann::json::parse(*rows[0][0]);
    for (int col : {0, 1}) {
      const auto& mcv = profile[col]["most_common_vals"];
      EXPECT_EQ(mcv.size(), col == 0 ? 3u : 20u) << (lean ? "lean " : "full ") << profile[col]["name"];
      for (const auto& v : mcv) EXPECT_EQ(v.get<std::string>(), clipped) << (lean ? "lean " : "full ") << profile[col]["name"];
    }
    sdb->exec("DELETE FROM predrop.schema_snapshots WHERE table_name = 'long_values'");
  }
}

// No array in a catalog read is much longer than the profile keeps (20 values of 120 characters),
// whatever its statistics row stores: an array that goes whole (kProperArray) is one stored
// uncompressed within the bound. Twenty values of 880 characters repeat enough to compress to a
// few hundred bytes in pg_statistic; as text they are 17 KB, which only the server's slicing and
// clipping keeps out of the read. Both reads, the lean one and the full one.
TEST_F(CaptureTest, NoArrayInTheCatalogReadOutgrowsTheProfileBound) {
  db->exec(R"(
    CREATE TABLE public.compressible (v text, few text);
    INSERT INTO public.compressible SELECT repeat('abcdefgh', 110) || (g % 20), 'x' || (g % 3) FROM generate_series(1, 4000) g;
    ANALYZE public.compressible;)");
  ASSERT_EQ(db->value("SELECT pg_column_compression(most_common_vals) IS NOT NULL AND octet_length(most_common_vals::text) > 3 * 20 * 120 "
                      "FROM pg_stats WHERE tablename = 'compressible' AND attname = 'v'"), "t")
      << "the statistics row no longer stores the long values compressed: the test proves nothing";
  std::string clipped;
  for (int i = 0; i < 15; ++i) clipped += "abcdefgh";
  for (bool lean : {true, false}) {
    std::vector<TargetSpec> targets{table("public", "compressible")};
    if (!lean) targets.push_back({TargetKind::schema, "", "no_such_schema", {}, {}, 0});
    auto q = capture_query(request(targets), ProfileBounds{}, false);
    PgResult r{db->exec_params(q.sql, q.params), ""};
    ASSERT_EQ(PQresultStatus(r.res.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.res.get());
    ASSERT_EQ(r.rows(), 2);
    for (int row = 0; row < 2; ++row)
      for (int col : {12, 13})  // most_common_vals, histogram_bounds: 20 values of 120 one-byte characters, quoted
        EXPECT_LE(r.is_null(row, col) ? 0 : static_cast<int>(r.text(row, col).size()), 20 * (120 + 3) + 2)
            << (lean ? "lean " : "full ") << r.text(row, 7) << " column " << col;
    auto catalog = parse_capture(r, targets.size(), ProfileBounds{}, false);
    ASSERT_EQ(catalog.tables.size(), 1u);
    const auto& v = catalog.tables[0].snap.columns.at(0);
    ASSERT_EQ(v.name, "v");
    EXPECT_EQ(v.most_common_vals.size(), 20u) << (lean ? "lean" : "full");
    for (const auto& value : v.most_common_vals) EXPECT_EQ(value, clipped) << (lean ? "lean" : "full");
  }
}

// In a SQL_ASCII database the server counts bytes where predrop counts UTF-8 characters, so there
// the server slices and clips every array, as left() does in that database, whatever its size
// (kProperArray): three values of 300 'é' (600 bytes each) keep their first 120 bytes, 60 'é',
// where a UTF-8 database keeps 120 'é' (LongValuesClipToTheSameCharactersOnEitherSide).
TEST_F(CaptureTest, ASqlAsciiDatabaseClipsValuesAsItsOwnLeftDoes) {
  TempDatabase ascii("cap_ascii", "SQL_ASCII");
  Db adb(ascii.name());
  adb.exec(R"(
    CREATE TABLE public.long_values (few text);
    INSERT INTO public.long_values SELECT repeat('é', 300) || (g % 3) FROM generate_series(1, 4000) g;
    ANALYZE public.long_values;)");
  const std::string server_clip = adb.value("SELECT left(repeat('é', 300), 120)");
  ASSERT_EQ(server_clip.size(), 120u);
  for (bool lean : {true, false}) {
    std::vector<TargetSpec> targets{table("public", "long_values")};
    if (!lean) targets.push_back({TargetKind::schema, "", "no_such_schema", {}, {}, 0});
    auto req = request(targets);
    req.ctx.database = ascii.name();
    auto q = capture_query(req, ProfileBounds{}, false);
    PgResult r{adb.exec_params(q.sql, q.params), ""};
    ASSERT_EQ(PQresultStatus(r.res.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.res.get());
    auto catalog = parse_capture(r, targets.size(), ProfileBounds{}, false);
    ASSERT_EQ(catalog.tables.size(), 1u);
    const auto& few = catalog.tables[0].snap.columns.at(0);
    EXPECT_EQ(few.most_common_vals.size(), 3u) << (lean ? "lean" : "full");
    for (const auto& v : few.most_common_vals) EXPECT_EQ(v, server_clip) << (lean ? "lean" : "full");
  }
}

TEST_F(CaptureTest, TwentyColumnProfileHashOrdinalsAndReltuples) {
  db->exec(R"(
    CREATE TABLE public.big20 (id bigint PRIMARY KEY, i int, s smallint, b bigint, n numeric(10,2), r real,
      d double precision, t text, v varchar(255), c char(3), gone int, bo bool, dt date, ts timestamp,
      tz timestamptz, u uuid, j jsonb, by bytea, ip inet, iv interval, arr int[]);
    ALTER TABLE public.big20 DROP COLUMN gone;
    INSERT INTO public.big20
      SELECT g, g % 7, g % 3, g, g / 3.0, g, g, CASE WHEN g % 2 = 0 THEN 'a,b' ELSE 'say "hi"' END,
             repeat('x', 200) || (g % 4), 'abc', g % 2 = 0, date '2024-01-01' + g % 5, now(), now(),
             gen_random_uuid(), '{"k":1}', '\x00', '10.0.0.1', '1 day', ARRAY[g % 3, 1]
        FROM generate_series(1, 2000) g;
    ANALYZE public.big20;
    CREATE TABLE public.never_analysed (a int, "Córdoba" text);
    CREATE VIEW public.v20 AS SELECT id, t FROM public.big20;)");
  CaptureService svc(cfg);
  auto res = run(svc, request({table("public", "big20"), table("", "never_analysed"), {TargetKind::relation, "public", "v20", {}, {}, 0}}));
  ASSERT_EQ(res.outcome, SnapshotOutcome::written) << res.error;
  ASSERT_EQ(res.tables.size(), 3u);
  for (const auto& t : res.tables) EXPECT_EQ(t.outcome, SnapshotOutcome::written) << t.table << " " << t.error;

  auto rows = sdb->exec("SELECT column_count, row_count_estimate, schema_hash, columns_profile::text, stats_available, extra, "
                        "table_oid, database_name, reason, actor, session_user_name, statement FROM predrop.schema_snapshots "
                        "WHERE table_name = 'big20'");
  ASSERT_EQ(rows.size(), 1u);
  auto& row = rows[0];
  EXPECT_EQ(*row[0], "20");
  EXPECT_EQ(*row[1], "2000");
  EXPECT_EQ(*row[4], "t");
  EXPECT_FALSE(row[5]);  // extra NULL
  EXPECT_EQ(*row[6], db->value("SELECT 'public.big20'::regclass::oid"));
  EXPECT_EQ(*row[7], src->name());
  EXPECT_EQ(*row[10], "postgres");
  auto profile = nlohmann::json::parse(*row[3]);
  ASSERT_EQ(profile.size(), 20u);
  std::vector<std::string> names;
  for (const auto& c : profile) {
    EXPECT_EQ(c.size(), 7u);
    names.push_back(c["name"]);
    EXPECT_LE(c["most_common_vals"].size(), 20u);
    EXPECT_LE(c["histogram_sample"].size(), 20u);
  }
  EXPECT_EQ(*row[2], schema_hash(names, cfg.hash_excluded));
  // Ordinals are attnums: the dropped column 11 leaves a gap.
  EXPECT_EQ(profile[9]["name"], "c");
  EXPECT_EQ(profile[9]["ordinal"], 10);
  EXPECT_EQ(profile[10]["name"], "bo");
  EXPECT_EQ(profile[10]["ordinal"], 12);
  EXPECT_EQ(profile[1]["pg_type"], "integer");
  EXPECT_EQ(profile[4]["pg_type"], "numeric(10,2)");
  EXPECT_EQ(profile[8]["pg_type"], "character varying(255)");
  // Values as PostgreSQL holds them: commas and quotes inside values survive.
  auto mcv_t = profile[7]["most_common_vals"];
  EXPECT_NE(std::find(mcv_t.begin(), mcv_t.end(), "a,b"), mcv_t.end()) << mcv_t.dump();
  EXPECT_NE(std::find(mcv_t.begin(), mcv_t.end(), "say \"hi\""), mcv_t.end()) << mcv_t.dump();
  EXPECT_EQ(profile[7]["null_frac"], 0.0);
  // A 201-character value is clipped to 120 characters.
  for (const auto& v : profile[8]["most_common_vals"]) EXPECT_EQ(v.get<std::string>().size(), 120u);
  EXPECT_FALSE(profile[8]["most_common_vals"].empty());
  EXPECT_EQ(profile[0]["n_distinct"], -1.0);
  EXPECT_EQ(profile[0]["histogram_sample"].size(), 20u);

  // Never analysed: reltuples -1 -> NULL, no stats, non-ASCII names kept.
  auto na = sdb->exec("SELECT row_count_estimate, stats_available, columns_profile->1->>'name', schema_name "
                      "FROM predrop.schema_snapshots WHERE table_name = 'never_analysed'");
  ASSERT_EQ(na.size(), 1u);
  EXPECT_FALSE(na[0][0]);
  EXPECT_EQ(*na[0][1], "f");
  EXPECT_EQ(*na[0][2], "Córdoba");
  EXPECT_EQ(*na[0][3], "public");
  // A view: columns, no stats.
  EXPECT_EQ(sdb->value("SELECT column_count || ' ' || stats_available FROM predrop.schema_snapshots WHERE table_name = 'v20'"),
            "2 false");
  // One ledger row per table, each naming its snapshot.
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.drop_events e JOIN predrop.schema_snapshots s ON s.id = e.snapshot_id "
                       "WHERE e.outcome = 'written'"),
            "3");
}

TEST_F(CaptureTest, NaiveSplitReproducesReference) {
  db->exec("CREATE TABLE t (v text); INSERT INTO t SELECT CASE WHEN g % 2 = 0 THEN 'a,b' ELSE 'c' END "
           "FROM generate_series(1, 100) g; ANALYZE t;");
  cfg.naive_array_split = true;
  CaptureService svc(cfg);
  ASSERT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
  auto mcv = nlohmann::json::parse(sdb->value("SELECT columns_profile->0->'most_common_vals' FROM predrop.schema_snapshots"));
  EXPECT_EQ(mcv, nlohmann::json::parse(R"(["a","b","c"])")) << mcv.dump();
}

TEST_F(CaptureTest, NeverScansTheTable) {
  db->exec("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1000) g; ANALYZE t;");
  auto counters = [&] {
    std::this_thread::sleep_for(1200ms);  // backends flush their pending stats at most once a second
    Db fresh(src->name());
    return fresh.value("SELECT seq_scan || '/' || coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 't'");
  };
  std::string before = counters();
  CaptureService svc(cfg);
  ASSERT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
  EXPECT_EQ(counters(), before);
  // The measurement itself can see a scan (so the assertion above could fail).
  db->exec("SELECT count(*) FROM t");
  EXPECT_NE(counters(), before);
}

TEST_F(CaptureTest, CompletesWhileAnotherSessionHoldsAccessExclusive) {
  db->exec("CREATE TABLE t (id int, v text); INSERT INTO t VALUES (1, 'a'); ANALYZE t;");
  Db locker(src->name());
  locker.exec("BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE; ALTER TABLE t ADD COLUMN w int;");
  CaptureService svc(cfg);
  auto started = Clock::now();
  auto res = run(svc, request({table("public", "t")}), 10s);
  EXPECT_EQ(res.outcome, SnapshotOutcome::written) << res.error;
  EXPECT_LT(Clock::now() - started, 3s);
  // It saw the committed shape, not the uncommitted ALTER.
  EXPECT_EQ(sdb->value("SELECT column_count FROM predrop.schema_snapshots"), "2");
  locker.exec("ROLLBACK");
}

TEST_F(CaptureTest, MissingTableIsNoErrorAndNoSnapshot) {
  CaptureService svc(cfg);
  auto res = run(svc, request({table("public", "no_such_table")}));
  EXPECT_EQ(res.outcome, SnapshotOutcome::table_missing);
  EXPECT_TRUE(res.ok());
  ASSERT_EQ(res.tables.size(), 1u);
  EXPECT_EQ(res.tables[0].outcome, SnapshotOutcome::table_missing);
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots"), "0");
  EXPECT_EQ(sdb->value("SELECT outcome || ' ' || table_name FROM predrop.drop_events"), "table_missing no_such_table");
}

TEST_F(CaptureTest, UnqualifiedNameResolvedThroughSearchPath) {
  db->exec("CREATE SCHEMA s1; CREATE SCHEMA s2; CREATE SCHEMA s3; CREATE TABLE s2.x (a int); CREATE TABLE s3.x (b int, c int);"
           "CREATE INDEX y ON s2.x (a); CREATE TABLE s3.y (a int);");
  CaptureService svc(cfg);
  auto res = run(svc, request({table("", "x"), table("", "y")}, {"s1", "s2", "s3"}));
  ASSERT_EQ(res.tables.size(), 2u);
  EXPECT_EQ(res.tables[0].schema, "s2");
  EXPECT_EQ(res.tables[0].outcome, SnapshotOutcome::written);
  // The server would find the index s2.y first and refuse: nothing to capture, s3.y untouched.
  EXPECT_EQ(res.tables[1].outcome, SnapshotOutcome::table_missing);
  auto res2 = run(svc, request({table("", "x")}, {"s3", "s2"}));
  ASSERT_EQ(res2.tables.size(), 1u);
  EXPECT_EQ(res2.tables[0].schema, "s3");
}

TEST_F(CaptureTest, DropSchemaOf300TablesInOneBatch) {
  db->exec("CREATE SCHEMA snap; DO $$ BEGIN FOR i IN 1..300 LOOP "
           "EXECUTE format('CREATE TABLE snap.t%s (id int, v text)', i); "
           "EXECUTE format('INSERT INTO snap.t%s SELECT g, g::text FROM generate_series(1, 20) g', i); END LOOP; END $$;"
           "ANALYZE;");
  CaptureService svc(cfg);
  auto before = svc.stats().catalog_queries;
  auto res = run(svc, request({{TargetKind::schema, "", "snap", {}, {}, 0}}), 60s);
  ASSERT_EQ(res.outcome, SnapshotOutcome::written) << res.error;
  EXPECT_EQ(res.tables.size(), 300u);
  // One statement resolving all 300 tables with their pg_stats rows beside their columns.
  EXPECT_EQ(svc.stats().catalog_queries - before, 1u);
  EXPECT_EQ(svc.stats().store_statements, 1u);
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots WHERE schema_name = 'snap' AND stats_available"), "300");
  // Every row's id, snapshot and ledger, is a version 7 UUID of the minute it was written in: the
  // store's keys grow with time (capture/store_writer.hpp, new_uuid).
  const std::string version7 =
      "substr(id::text, 15, 1) = '7' AND abs(('x' || lpad(replace(left(id::text, 13), '-', ''), 16, '0'))::bit(64)::bigint"
      " - extract(epoch FROM now()) * 1000) < 60000";
  EXPECT_EQ(sdb->value("SELECT count(*) FILTER (WHERE " + version7 + ") || '/' || count(*) FROM predrop.schema_snapshots"),
            "300/300");
  EXPECT_EQ(sdb->value("SELECT count(*) FILTER (WHERE " + version7 + ") || '/' || count(*) FROM predrop.drop_events"),
            "300/300");
}

TEST_F(CaptureTest, PartitionsAndOwnedByAndWideTables) {
  db->exec(R"(
    CREATE TABLE parted (id int, k int) PARTITION BY RANGE (k);
    CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
    CREATE TABLE parted_1a PARTITION OF parted_1 FOR VALUES FROM (0) TO (10);
    CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (10) TO (20);
    CREATE ROLE )" + src->name() + R"(_owner;
    CREATE TABLE owned1 (a int); CREATE TABLE owned2 (a int);
    ALTER TABLE owned1 OWNER TO )" + src->name() + R"(_owner; ALTER TABLE owned2 OWNER TO )" + src->name() + "_owner;"
           "DO $$ BEGIN EXECUTE 'CREATE TABLE wide (' || (SELECT string_agg('c' || g || ' int', ',') FROM generate_series(1, 301) g) || ')'; END $$;"
           "INSERT INTO wide (c1) VALUES (1); ANALYZE wide;");
  CaptureService svc(cfg);
  auto res = run(svc, request({table("public", "parted")}));
  EXPECT_EQ(res.tables.size(), 4u) << "parent, sub-partitioned partition, its leaf, second partition";
  auto owned = run(svc, request({{TargetKind::owned_by, "", "", {src->name() + "_owner"}, {}, 0}}));
  EXPECT_EQ(owned.tables.size(), 2u);
  auto wide = run(svc, request({table("public", "wide")}));
  ASSERT_EQ(wide.outcome, SnapshotOutcome::written);
  EXPECT_EQ(sdb->value("SELECT column_count || ' ' || stats_available || ' ' || (extra->>'profile_skipped') || ' ' || "
                       "jsonb_array_length(columns_profile) || ' ' || (columns_profile->0->'null_frac' = 'null'::jsonb) "
                       "FROM predrop.schema_snapshots WHERE table_name = 'wide'"),
            "301 false too_many_columns 301 true");
  Db("postgres").exec("DROP DATABASE " + src->name() + " WITH (FORCE)");
  Db("postgres").exec("DROP ROLE " + src->name() + "_owner");
}

// Each column gets its own pg_stats row: the table's own ahead of its inheritance tree's, the
// tree's where a partitioned table has only those, and a column without statistics none.
TEST_F(CaptureTest, EachColumnGetsItsOwnStatisticsOwnAheadOfTheTrees) {
  db->exec(R"(
    CREATE TABLE parent (a int, b text, unanalysed int);
    CREATE TABLE child () INHERITS (parent);
    INSERT INTO parent SELECT g, 'own', NULL FROM generate_series(1, 100) g;
    INSERT INTO child SELECT -g, CASE WHEN g % 2 = 0 THEN NULL ELSE 'child' END, NULL FROM generate_series(1, 300) g;
    ANALYZE parent (a, b);
    CREATE TABLE parted (k int, v text) PARTITION BY RANGE (k);
    CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (1000);
    INSERT INTO parted SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE 'p' END FROM generate_series(0, 399) g;
    ANALYZE parted;)");
  ASSERT_EQ(db->value("SELECT count(*) FROM pg_stats WHERE tablename = 'parent' AND attname = 'b'"), "2")
      << "the parent has its own and its tree's statistics";
  CaptureService svc(cfg);
  ASSERT_EQ(run(svc, request({table("public", "parent"), table("public", "parted")})).outcome, SnapshotOutcome::written);
  auto profile_of = [&](const std::string& t) {
    return nlohmann::json::parse(sdb->value("SELECT columns_profile FROM predrop.schema_snapshots WHERE table_name = '" + t + "'"));
  };
  auto parent = profile_of("parent");
  ASSERT_EQ(parent.size(), 3u);
  EXPECT_EQ(parent[0]["name"], "a");
  EXPECT_EQ(parent[0]["n_distinct"], -1.0) << "a: the parent's own 100 distinct values";
  EXPECT_EQ(parent[1]["name"], "b");
  EXPECT_EQ(parent[1]["null_frac"], 0.0) << "b: own (no NULL), not the tree's (three in eight)";
  EXPECT_EQ(parent[1]["most_common_vals"], nlohmann::json::array({"own"}));
  EXPECT_EQ(parent[2]["name"], "unanalysed");
  EXPECT_TRUE(parent[2]["null_frac"].is_null()) << parent[2].dump();
  auto parted = profile_of("parted");
  ASSERT_EQ(parted.size(), 2u);
  EXPECT_EQ(parted[1]["name"], "v");
  EXPECT_EQ(parted[1]["null_frac"], 0.25) << "the partitioned table's tree statistics";
}

TEST_F(CaptureTest, PoolNeverExceedsItsBound) {
  db->exec("CREATE TABLE t (a int, b text); INSERT INTO t SELECT g, 'v' FROM generate_series(1, 100) g; ANALYZE t;");
  cfg.pool_size = 4;
  CaptureService svc(cfg);
  std::atomic<bool> watching{true};
  int max_seen = 0;
  std::thread watcher([&] {
    Db mon("postgres");
    while (watching) {
      int n = std::stoi(mon.value("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'predrop-capture' "
                                  "AND datname = '" + src->name() + "'"));
      max_seen = std::max(max_seen, n);
      std::this_thread::sleep_for(2ms);
    }
  });
  std::vector<std::future<SnapshotResult>> futures;
  for (int i = 0; i < 50; ++i)
    futures.push_back(std::async(std::launch::async, [&] { return run(svc, request({table("public", "t")}), 60s); }));
  int written = 0;
  for (auto& f : futures) written += f.get().outcome == SnapshotOutcome::written;
  watching = false;
  watcher.join();
  EXPECT_EQ(written, 50);
  EXPECT_GT(max_seen, 0);
  EXPECT_LE(max_seen, 4);
  EXPECT_LE(svc.stats().capture_connections_opened, 4u);
}

TEST_F(CaptureTest, DeadlineGivesTimeoutPromptlyWhenStoreIsSlow) {
  db->exec("CREATE TABLE t (a int)");
  sdb->exec("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$;"
            "CREATE TRIGGER slow BEFORE INSERT ON predrop.schema_snapshots FOR EACH ROW EXECUTE FUNCTION slow();");
  CaptureService svc(cfg);
  auto req = request({table("public", "t")});
  req.deadline = Clock::now() + 400ms;
  auto res = run(svc, req, 5s);
  auto late = Clock::now() - req.deadline;
  EXPECT_EQ(res.outcome, SnapshotOutcome::timeout);
  // Promptly: long before the 3 s insert would end. A tighter bound measures the machine, not
  // predrop (an ASan build next to a 3,000-session test can stall a thread for 100 ms).
  EXPECT_LT(late, 1000ms) << "done() must follow the deadline, not wait for the stuck insert";
  // The ledger says timeout; the stuck insert was cancelled, so no snapshot row appears later.
  eventually(*sdb, "SELECT string_agg(outcome, ',') FROM predrop.drop_events", "timeout");
  std::this_thread::sleep_for(3500ms);
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots"), "0");
  // The service still works afterwards.
  sdb->exec("DROP TRIGGER slow ON predrop.schema_snapshots");
  EXPECT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
}

TEST_F(CaptureTest, ConfirmOutcomesByOid) {
  db->exec("CREATE TABLE keep (a int); CREATE TABLE gone (a int);");
  CaptureService svc(cfg);
  auto res = run(svc, request({table("public", "keep"), table("public", "gone")}));
  ASSERT_EQ(res.outcome, SnapshotOutcome::written);
  db->exec("DROP TABLE gone");
  std::vector<PendingOutcome> pending;
  for (const auto& t : res.tables)
    pending.push_back({.oid = t.oid, .snapshot_id = t.snapshot_id, .event_id = t.event_id, .wrote_snapshot = true});
  svc.confirm_outcomes(src->name(), pending);
  eventually(*sdb, "SELECT string_agg(table_name || '=' || drop_outcome, ',' ORDER BY table_name) FROM predrop.schema_snapshots "
                   "WHERE outcome_at IS NOT NULL", "gone=dropped,keep=not_dropped");
  eventually(*sdb, "SELECT string_agg(table_name || '=' || drop_outcome, ',' ORDER BY table_name) FROM predrop.drop_events",
             "gone=dropped,keep=not_dropped");
  svc.mark_hold(res.tables, 12.5);
  eventually(*sdb, "SELECT count(*) FROM predrop.drop_events WHERE hold_ms = 12.5", "2");
}

// Two DROPs of one table, the first refused (DROP SCHEMA without CASCADE) or undone (ROLLBACK TO
// SAVEPOINT), the second's move the one that stood: both outcome checks find the table quarantined,
// in either order or in one batch. The store row is the later DROP's; the earlier DROP's ledger row
// and snapshot say not_dropped (quarantine/store_rows.hpp).
TEST_F(CaptureTest, TheLaterOfTwoDropsOfOneTableHoldsItsQuarantine) {
  db->exec("CREATE SCHEMA q_s");
  CaptureService svc(cfg);
  // Two holds of one table, then its quarantine as the move leaves it (quarantine/move_sql.cpp): the
  // table in the quarantine schema, its comment the quarantine's.
  struct Drops {
    SnapshotResult earlier, later;
    std::string qid;
  };
  auto two_drops = [&](const std::string& t, const std::string& hold = "") {
    Drops d;
    db->exec("CREATE TABLE " + t + " (a int)");
    d.earlier = run(svc, request({table("public", t)}));
    db->exec("ALTER TABLE " + t + " ADD COLUMN b int");  // a shape of its own: written, not deduplicated
    d.later = run(svc, request({table("public", t)}));
    EXPECT_EQ(d.earlier.tables.size(), 1u);
    EXPECT_EQ(d.later.tables.size(), 1u);
    EXPECT_EQ(d.later.tables.at(0).outcome, SnapshotOutcome::written);
    EXPECT_LT(d.earlier.tables.at(0).event_id, d.later.tables.at(0).event_id);
    d.qid = new_uuid();
    db->exec("ALTER TABLE " + t + " SET SCHEMA q_s; DO $$BEGIN EXECUTE format('COMMENT ON TABLE q_s." + t +
             " IS %L', jsonb_build_object('predrop_quarantine', 1, 'id', '" + d.qid + "', 'schema', 'public', 'table', '" + t +
             "', 'oid', " + std::to_string(d.later.tables.at(0).oid) +
             ", 'dropped_at', '2026-12-07T12:00:00Z', 'dropped_by', 'postgres', 'hold', " +
             (hold.empty() ? "NULL::text" : "'" + hold + "'") + ")::text); END$$");
    return d;
  };
  auto pending = [](const SnapshotResult& r, bool failed = false, const std::string& hold = "") {
    const TableResult& x = r.tables.at(0);
    return PendingOutcome{.oid = x.oid, .snapshot_id = x.snapshot_id, .event_id = x.event_id, .quarantine_schema = "q_s",
                          .retention_s = 3600, .wrote_snapshot = true, .statement_failed = failed, .hold_id = hold};
  };
  auto held_by = [](const Drops& d) { return "SELECT event_id::text FROM predrop.quarantine WHERE id = '" + d.qid + "'"; };
  // The ledger's and the snapshots' outcomes of the table's two DROPs, earlier first.
  auto settled = [&](const std::string& t, const std::string& want) {
    EXPECT_TRUE(eventually(*sdb, "SELECT string_agg(drop_outcome || coalesce('/' || quarantine_id, ''), ',' ORDER BY id) "
                                 "FROM predrop.drop_events WHERE table_name = '" + t + "'", want));
    EXPECT_TRUE(eventually(*sdb, "SELECT string_agg(drop_outcome || coalesce('/' || (extra->>'quarantine_id'), ''), ',' "
                                 "ORDER BY id) FROM predrop.schema_snapshots WHERE table_name = '" + t + "'", want));
  };

  enum class Order { earlier_first, later_first, one_batch };
  for (const auto& [t, order] : {std::pair{"t_a", Order::earlier_first}, std::pair{"t_b", Order::later_first},
                                 std::pair{"t_c", Order::one_batch}}) {
    SCOPED_TRACE(t);
    const Drops d = two_drops(t);
    if (order == Order::one_batch) {
      svc.confirm_outcomes(src->name(), {pending(d.earlier), pending(d.later)});
    } else {
      const SnapshotResult& first = order == Order::earlier_first ? d.earlier : d.later;
      svc.confirm_outcomes(src->name(), {pending(first)});
      ASSERT_TRUE(eventually(*sdb, held_by(d), first.tables.at(0).event_id));
      svc.confirm_outcomes(src->name(), {pending(order == Order::earlier_first ? d.later : d.earlier)});
    }
    settled(t, "not_dropped,quarantined/" + d.qid);
    EXPECT_EQ(sdb->value(held_by(d)), d.later.tables.at(0).event_id);
    EXPECT_EQ(sdb->value("SELECT snapshot_id::text FROM predrop.quarantine WHERE id = '" + d.qid + "'"),
              d.later.tables.at(0).snapshot_id);
  }

  // The other way round: the earlier DROP's move stood, and the later one (another session's, that
  // waited for its lock) failed: the table is no longer where it looked. Its check, which comes
  // second, finds the table quarantined too; the session saw its error.
  const Drops d = two_drops("t_d");
  svc.confirm_outcomes(src->name(), {pending(d.earlier)});
  ASSERT_TRUE(eventually(*sdb, held_by(d), d.earlier.tables.at(0).event_id));
  svc.confirm_outcomes(src->name(), {pending(d.later, true)});
  settled("t_d", "quarantined/" + d.qid + ",not_dropped");
  EXPECT_EQ(sdb->value(held_by(d)), d.earlier.tables.at(0).event_id);

  // The earlier DROP's move stood and the later one succeeded all the same, moving nothing (another
  // session's DROP TABLE IF EXISTS that waited for the move's lock): the comment names the earlier
  // DROP's hold, so the later check, with the greater event id, leaves the row to the earlier one.
  const Drops f = two_drops("t_f", "hold-earlier");
  svc.confirm_outcomes(src->name(), {pending(f.earlier, false, "hold-earlier")});
  ASSERT_TRUE(eventually(*sdb, held_by(f), f.earlier.tables.at(0).event_id));
  svc.confirm_outcomes(src->name(), {pending(f.later, false, "hold-later")});
  settled("t_f", "quarantined/" + f.qid + ",not_dropped");
  EXPECT_EQ(sdb->value(held_by(f)), f.earlier.tables.at(0).event_id);
  // The same in one batch, where the check alone keeps the row of the greater event id otherwise.
  const Drops g = two_drops("t_g", "hold-earlier");
  svc.confirm_outcomes(src->name(), {pending(g.earlier, false, "hold-earlier"), pending(g.later, false, "hold-later")});
  settled("t_g", "quarantined/" + g.qid + ",not_dropped");
  EXPECT_EQ(sdb->value(held_by(g)), g.earlier.tables.at(0).event_id);

  // The purger wrote the row first, from the comment alone (no DROP's ids): the check gives it its DROP's.
  const Drops e = two_drops("t_e");
  sdb->exec("INSERT INTO predrop.quarantine (id, database_name, schema_name, table_name, table_oid, quarantine_schema,"
            " quarantine_table, dropped_at) VALUES ('" + e.qid + "', '" + src->name() + "', 'public', 't_e', " +
            std::to_string(e.later.tables.at(0).oid) + ", 'q_s', 't_e', now())");
  svc.confirm_outcomes(src->name(), {pending(e.later)});
  EXPECT_TRUE(eventually(*sdb, held_by(e), e.later.tables.at(0).event_id));
  EXPECT_EQ(sdb->value("SELECT snapshot_id::text FROM predrop.quarantine WHERE id = '" + e.qid + "'"),
            e.later.tables.at(0).snapshot_id);

  // A table in the quarantine schema under a comment that is not JSON (written by hand) is no
  // quarantine, and fails no other check of its batch: t_h, checked beside it, is quarantined.
  const Drops h = two_drops("t_h", "hold-h");
  db->exec("CREATE TABLE t_i (a int)");
  const SnapshotResult i = run(svc, request({table("public", "t_i")}));
  db->exec("ALTER TABLE t_i SET SCHEMA q_s; COMMENT ON TABLE q_s.t_i IS '{kept by hand, not JSON'");
  svc.confirm_outcomes(src->name(), {pending(i, false, "hold-i"), pending(h.later, false, "hold-h")});
  EXPECT_TRUE(eventually(*sdb, "SELECT drop_outcome || coalesce('/' || quarantine_id, '') FROM predrop.drop_events "
                               "WHERE id = '" + h.later.tables.at(0).event_id + "'", "quarantined/" + h.qid));
  EXPECT_TRUE(eventually(*sdb, "SELECT drop_outcome FROM predrop.drop_events WHERE table_name = 't_i'", "not_dropped"));
}

TEST_F(CaptureTest, DedupWindowSkipsSameShape) {
  db->exec("CREATE TABLE t (a int)");
  cfg.dedup_window_s = 60;
  CaptureService svc(cfg);
  auto first = run(svc, request({table("public", "t")}));
  auto second = run(svc, request({table("public", "t")}));
  EXPECT_EQ(first.outcome, SnapshotOutcome::written);
  EXPECT_EQ(second.outcome, SnapshotOutcome::deduplicated);
  EXPECT_TRUE(second.ok());
  EXPECT_EQ(second.tables[0].snapshot_id, first.tables[0].snapshot_id);
  db->exec("ALTER TABLE t ADD COLUMN b int");
  EXPECT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);  // new shape
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots"), "2");
  EXPECT_EQ(sdb->value("SELECT string_agg(outcome, ',' ORDER BY occurred_at) FROM predrop.drop_events"),
            "written,deduplicated,written");
}

// A hold's write of befores only (capture/store_writer.cpp, kWriteBeforesSql) leaves out the
// parts that pair afters: given the same rows (one captured with every enrichment field, one
// deduplicated against a stored shape, one whose table was missing), it answers and writes exactly
// what the whole write does. Each runs in its own transaction, rolled back; now() is left out.
TEST_F(CaptureTest, BeforesOnlyWriteWritesWhatTheWholeWriteDoes) {
  db->exec("CREATE TABLE t (a int)");
  cfg.dedup_window_s = 60;
  {
    CaptureService svc(cfg);
    ASSERT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
  }
  const std::string stored_hash = sdb->value("SELECT schema_hash FROM predrop.schema_snapshots");

  CapturedTable fresh;
  fresh.snap.schema_name = "public";
  fresh.snap.table_name = "fresh";
  fresh.snap.table_oid = 4242;
  fresh.snap.columns = {{"id", 1, "integer", 0.0, -1.0, {}, {}}, {"provincia", 2, "text", 0.25, 24.0, {"Salta", "Jujuy"}, {}}};
  fresh.snap.row_count_estimate = 200;
  fresh.snap.schema_hash = schema_hash({"id", "provincia"}, {});
  fresh.snap.stats_available = true;
  fresh.enrich = {"dataset-1", 3, "p1", "n1", "layout", "good", false};
  CapturedTable same = fresh;
  same.snap.table_name = "t";
  same.snap.table_oid = 4343;
  same.snap.schema_hash = stored_hash;
  same.snap.columns = {{"a", 1, "integer", std::nullopt, std::nullopt, {}, {}}};

  std::vector<WriteRow> rows(3);
  rows[0] = {new_uuid(), new_uuid(), "public", "fresh", 4242, std::nullopt, "", &fresh, "", ""};
  rows[1] = {new_uuid(), new_uuid(), "public", "t", 4343, std::nullopt, "", &same, "", ""};
  rows[2] = {new_uuid(), new_uuid(), "public", "gone", std::nullopt, SnapshotOutcome::table_missing, "", nullptr, "", ""};
  StatementContext ctx{src->name(), "postgres", "psql", "127.0.0.1", "drop_table", "DROP TABLE fresh, t, gone", "fp"};
  const Params params = write_params({{&rows, &ctx, SnapshotReason::pre_drop, 1.25, "", ""}}, cfg);
  const StoreSql sql = build_store_sql("predrop.schema_snapshots", "predrop.drop_events");

  auto written_by = [&](const std::string& statement) {
    std::string seen;
    sdb->exec("BEGIN");
    auto res = sdb->exec_params(statement, params);
    PGresult* r = res.get();
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQresultErrorMessage(r);
    for (int i = 0; i < PQntuples(r); ++i)
      for (int j = 0; j < PQnfields(r); ++j) {
        std::string v = PQgetisnull(r, i, j) ? "NULL" : PQgetvalue(r, i, j);
        // The row's announcement (capture/announcer.hpp) names its captured_at, each transaction's own.
        if (j == 7) v = v.substr(0, v.find("\"captured_at\""));
        seen += v + "|";
      }
    for (const auto& row : sdb->exec("SELECT (to_jsonb(s) - 'captured_at')::text FROM predrop.schema_snapshots s ORDER BY id"))
      seen += "\n" + row[0].value_or("NULL");
    for (const auto& row : sdb->exec("SELECT (to_jsonb(e) - 'occurred_at')::text FROM predrop.drop_events e ORDER BY id"))
      seen += "\n" + row[0].value_or("NULL");
    sdb->exec("ROLLBACK");
    return seen;
  };
  const std::string whole = written_by(sql.write), befores = written_by(sql.write_befores);
  EXPECT_EQ(befores, whole);
  // What the comparison covers: a row written, one deduplicated, one missing, each with a ledger row.
  EXPECT_NE(whole.find("\"table_name\": \"fresh\""), std::string::npos) << whole;
  EXPECT_NE(whole.find("\"resource_identity\": \"dataset-1\""), std::string::npos) << whole;
  EXPECT_NE(whole.find("\"outcome\": \"deduplicated\""), std::string::npos) << whole;
  EXPECT_NE(whole.find("\"outcome\": \"table_missing\""), std::string::npos) << whole;
  // The written row's announcement is in the answer, for the announcer to send once the write has
  // committed; neither write notifies in its own transaction.
  EXPECT_NE(whole.find("{\"id\" : \"" + rows[0].snapshot_id + "\", \"database\" : \"" + src->name() + "\", \"schema\" : \"public\", "
                       "\"table\" : \"fresh\", \"reason\" : \"pre_drop\""), std::string::npos) << whole;
  for (const std::string* statement : {&sql.write, &sql.write_befores, &sql.copy_after})
    EXPECT_EQ(statement->find("pg_notify"), std::string::npos) << *statement;
}

TEST_F(CaptureTest, EnrichmentFailureNeverBlocksAndWideValuesAreClipped) {
  db->exec("CREATE TABLE t (a int); CREATE TABLE registry (sch text, tbl text, ident text, ver int);"
           "INSERT INTO registry VALUES ('public', 't', repeat('i', 600), 7);");
  cfg.enrich_identity_sql = "SELECT ident AS resource_identity, ver AS version, true AS is_truncated FROM registry "
                            "WHERE sch = $1 AND tbl = $2 ORDER BY ver DESC LIMIT 1;";
  cfg.enrich_provenance_sql = "SELECT nope FROM no_such_registry WHERE s = $1 AND t = $2";
  {
    CaptureService svc(cfg);
    auto res = run(svc, request({table("public", "t")}));
    EXPECT_EQ(res.outcome, SnapshotOutcome::written) << res.error;
    EXPECT_EQ(sdb->value("SELECT length(resource_identity) || ' ' || version || ' ' || is_truncated FROM predrop.schema_snapshots"),
              "512 7 true");
  }
  cfg.enrich_identity_sql = "SELECT repeat('p', 100) AS parser_version, repeat('h', 50) AS header_quality";
  cfg.enrich_provenance_sql = "this is not sql";
  CaptureService svc(cfg);
  EXPECT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
  EXPECT_EQ(sdb->value("SELECT length(parser_version) || ' ' || length(header_quality) FROM predrop.schema_snapshots "
                       "WHERE parser_version IS NOT NULL"),
            "40 20");
}

TEST_F(CaptureTest, UnreachableCaptureDatabaseIsCaptureError) {
  CaptureService svc(cfg);
  auto req = request({table("public", "t")});
  req.ctx.database = "no_such_database_" + src->name();
  auto res = run(svc, req);
  EXPECT_EQ(res.outcome, SnapshotOutcome::capture_error);
  EXPECT_FALSE(res.ok());
  eventually(*sdb, "SELECT string_agg(outcome, ',') FROM predrop.drop_events", "capture_error");
  // record_event: a ledger row for a statement that never reached a capture.
  EventRecord ev;
  ev.ctx.database = src->name();
  ev.outcome = SnapshotOutcome::policy_skip;
  ev.table = "x";
  svc.record_event(ev);
  eventually(*sdb, "SELECT count(*) FROM predrop.drop_events WHERE outcome = 'policy_skip'", "1");
}

TEST_F(CaptureTest, ExistingReferenceStoreTable) {
  TempDatabase ref_store("cap_ref");
  auto m = migrate(conninfo_for(ref_store.name()), "raw.raw_schema_snapshots");
  ASSERT_TRUE(m.ok) << m.error;
  db->exec("CREATE TABLE t (a int)");
  cfg.store_conninfo = conninfo_for(ref_store.name());
  cfg.store_table = "raw.raw_schema_snapshots";
  CaptureService svc(cfg);
  EXPECT_EQ(run(svc, request({table("public", "t")})).outcome, SnapshotOutcome::written);
  Db rdb(ref_store.name());
  EXPECT_EQ(rdb.value("SELECT count(*) FROM raw.raw_schema_snapshots"), "1");
}

TEST_F(CaptureTest, LedgerRowsWaitForAnUnreachableStoreWithinABound) {
  // The store's database does not exist yet: every store connection is refused, as when it is down.
  const std::string later = unique_name("cap_later");
  cfg.store_conninfo = conninfo_for(later);
  cfg.store_retry_max = 2;
  CaptureService svc(cfg);
  for (int i = 0; i < 5; ++i) {
    EventRecord ev;
    ev.ctx.database = src->name();
    ev.outcome = SnapshotOutcome::policy_skip;
    ev.table = "t" + std::to_string(i);
    svc.record_event(ev);
  }
  auto end = Clock::now() + 10s;
  while (Clock::now() < end && svc.stats().store_retry_lost < 3) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(svc.stats().store_retry_lost, 3u) << "5 rows, room for 2: the 3 oldest are dropped and counted";
  EXPECT_EQ(svc.stats().store_retry_queued, 2u);
  // The store appears, already migrated (renamed into place, so no retry meets it half-made); the
  // kept rows arrive by themselves.
  Db("postgres").exec("CREATE DATABASE " + later + "_tmp");
  auto m = migrate(conninfo_for(later + "_tmp"));
  ASSERT_TRUE(m.ok) << m.error;
  Db("postgres").exec("ALTER DATABASE " + later + "_tmp RENAME TO " + later);
  {
    Db ldb(later);
    eventually(ldb, "SELECT count(*) FROM predrop.drop_events WHERE outcome = 'policy_skip'", "2", 15s);
  }
  EXPECT_EQ(svc.stats().store_retry_queued, 0u);
  EXPECT_EQ(svc.stats().store_retry_lost, 3u);
  svc.stop();
  Db("postgres").exec("DROP DATABASE IF EXISTS " + later + " WITH (FORCE)");
}

TEST_F(CaptureTest, HoldUpdatesWaitingForTheirLedgerRowAreBounded) {
  // The store is down: each failed snapshot's ledger row waits in the retry queue, and the hold
  // update that follows it waits for that row. Room for one such update: the others are dropped
  // and counted, the one kept is written once the store is back.
  db->exec("CREATE TABLE t (a int)");
  const std::string later = unique_name("cap_waiters");
  cfg.store_conninfo = conninfo_for(later);
  cfg.store_retry_max = 10;
  cfg.store_waiters_max = 1;
  CaptureService svc(cfg);
  for (int i = 0; i < 3; ++i) {
    auto res = run(svc, request({table("public", "t")}));
    ASSERT_EQ(res.outcome, SnapshotOutcome::store_error) << res.error;
    svc.mark_hold(res.tables, 5.0 + i);
  }
  auto end = Clock::now() + 10s;
  // The ledger rows reach the retry queue on the capture thread, after the hold updates may already
  // have been counted lost: wait for both.
  while (Clock::now() < end && (svc.stats().store_retry_lost < 2 || svc.stats().store_retry_queued < 3))
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(svc.stats().store_retry_lost, 2u) << "3 hold updates, room for 1: the 2 newest are dropped and counted";
  EXPECT_EQ(svc.stats().store_waiting_updates, 1u);
  EXPECT_EQ(svc.stats().store_retry_queued, 3u) << "the ledger rows themselves are all kept";
  Db("postgres").exec("CREATE DATABASE " + later + "_tmp");
  auto m = migrate(conninfo_for(later + "_tmp"));
  ASSERT_TRUE(m.ok) << m.error;
  Db("postgres").exec("ALTER DATABASE " + later + "_tmp RENAME TO " + later);
  {
    Db ldb(later);
    eventually(ldb,
               "SELECT count(*) || ' ' || count(hold_ms) || ' ' || coalesce(min(hold_ms)::text, '-') "
               "FROM predrop.drop_events WHERE outcome = 'store_error'",
               "3 1 5", 15s);
  }
  EXPECT_EQ(svc.stats().store_waiting_updates, 0u);
  EXPECT_EQ(svc.stats().store_retry_lost, 2u);
  svc.stop();
  Db("postgres").exec("DROP DATABASE IF EXISTS " + later + " WITH (FORCE)");
}
