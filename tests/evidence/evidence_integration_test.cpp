// The evidence tools end to end against a real PostgreSQL, through the predrop binary: baseline
// (captures, walks forward with --limit, never writes to the target, speed), diff with a rename,
// history, report with both pair kinds, and ddl executed and compared with the snapshot.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "capture/capture.hpp"
#include "cli_runner.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;
using nlohmann::json;
using predrop::evidence_test::json_of;
using predrop::evidence_test::q;
using predrop::evidence_test::Run;
using predrop::evidence_test::run_predrop;

class EvidenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set (run through scripts/test.sh)";
    ASSERT_NE(std::getenv("PREDROP_BIN"), nullptr);
    target = std::make_unique<TempDatabase>("ev_target");
    store = std::make_unique<TempDatabase>("ev_store");
    auto m = run_predrop("migrate --store " + q(conninfo_for(store->name())));
    ASSERT_EQ(m.rc, 0) << m.out;
    db = std::make_unique<Db>(target->name());
    sdb = std::make_unique<Db>(store->name());
  }
  std::string store_flag() { return " --store " + q(conninfo_for(store->name())); }
  std::string target_flag() { return " --target " + q(conninfo_for(target->name())); }
  json baseline(const std::string& extra = "") {
    auto r = run_predrop("baseline --format json" + target_flag() + store_flag() + extra);
    EXPECT_EQ(r.rc, 0) << r.out;
    return json_of(r);
  }
  std::unique_ptr<TempDatabase> target, store;
  std::unique_ptr<Db> db, sdb;
};

// openarg §9 integration 1: baseline, a recreate with a column added, a second baseline, and
// the pair classified (unexplained once both sides carry a real fingerprint).
TEST_F(EvidenceTest, BaselineRecaptureDiffHistory) {
  db->exec("CREATE SCHEMA raw; CREATE TABLE raw.t (provincia text, monto numeric);"
           "INSERT INTO raw.t SELECT (ARRAY['Salta','Jujuy','Chaco','Misiones','Formosa','Tucumán'])[g], g * 10 "
           "FROM generate_series(1, 6) g; ANALYZE raw.t");
  auto b1 = baseline(" --schema raw");
  EXPECT_EQ(b1["candidates"], 1);
  EXPECT_EQ(b1["captured"], 1);
  EXPECT_EQ(baseline(" --schema raw")["candidates"], 0);  // latest snapshot matches: skipped
  EXPECT_EQ(sdb->value("SELECT reason || ' ' || (extra->>'alive') FROM predrop.schema_snapshots"), "baseline true");
  db->exec("DROP TABLE raw.t; CREATE TABLE raw.t (provincia text, monto numeric, anio int);"
           "INSERT INTO raw.t SELECT 'Salta', g, 2020 FROM generate_series(1, 6) g; ANALYZE raw.t");
  auto b2 = baseline(" --schema raw");
  EXPECT_EQ(b2["captured"], 1);

  auto h = json_of(run_predrop("history raw.t --format json" + store_flag()));
  ASSERT_EQ(h["snapshots"].size(), 2u);
  EXPECT_EQ(h["snapshots"][0]["column_count"], 2);
  EXPECT_EQ(h["snapshots"][1]["column_count"], 3);
  EXPECT_TRUE(h["snapshots"][0]["changed"].is_null());
  EXPECT_EQ(h["snapshots"][1]["changed"]["added"], json::array({"anio"}));

  auto d = json_of(run_predrop("diff raw.t --format json" + store_flag()));
  EXPECT_EQ(d["diff"]["added"], json::array({"anio"}));
  EXPECT_EQ(d["diff"]["removed"], json::array());
  EXPECT_EQ(d["verdict"]["verdict"], "unattributable");  // no provenance recorded
  sdb->exec("UPDATE predrop.schema_snapshots SET parser_version = 'p:testfingerprint', normalization_version = 'n:testfingerprint'");
  d = json_of(run_predrop("diff raw.t --format json" + store_flag()));
  EXPECT_EQ(d["verdict"]["verdict"], "unexplained");
  EXPECT_EQ(d["verdict"]["change_class"], "additive");
  EXPECT_TRUE(d["verdict"]["is_actionable"]);
  // By ids, the same answer.
  std::string a = h["snapshots"][0]["id"], b = h["snapshots"][1]["id"];
  auto byid = json_of(run_predrop("diff " + a + " " + b + " --format json" + store_flag()));
  EXPECT_EQ(byid["diff"]["added"], json::array({"anio"}));
}

TEST_F(EvidenceTest, DiffShowsRenameAsText) {
  db->exec("CREATE TABLE public.r (provincia text, n int);"
           "INSERT INTO r SELECT (ARRAY['Salta','Jujuy','Chaco','Misiones','Formosa','Tucumán'])[1 + g % 6], g FROM generate_series(1, 600) g;"
           "ANALYZE r");
  baseline(" --schema public");
  db->exec("ALTER TABLE r RENAME COLUMN provincia TO jurisdiccion; ANALYZE r");
  baseline(" --schema public");
  auto t = run_predrop("diff public.r" + store_flag());
  EXPECT_EQ(t.rc, 0);
  EXPECT_NE(t.out.find("provincia \u2192 jurisdiccion (1.00)"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("\033["), std::string::npos) << "colour without a terminal";
  auto j = json_of(run_predrop("diff public.r --format json --method profile" + store_flag()));
  EXPECT_EQ(j["diff"]["renamed_candidates"][0]["to"], "jurisdiccion");
}

TEST_F(EvidenceTest, BaselineWalksForwardWithLimit) {
  db->exec("DO $$ BEGIN FOR i IN 1..5 LOOP EXECUTE format('CREATE TABLE w%s (a int, b text)', i); END LOOP; END $$");
  auto r1 = baseline(" --limit 2 --batch-size 1 --lanes 2");  // two one-table batches, one per lane
  EXPECT_EQ(r1["candidates"], 5);
  EXPECT_EQ(r1["captured"], 2);
  EXPECT_EQ(r1["remaining"], 3);
  auto r2 = baseline(" --limit 2");
  EXPECT_EQ(r2["candidates"], 3);
  EXPECT_EQ(r2["remaining"], 1);
  auto r3 = baseline(" --limit 2");
  EXPECT_EQ(r3["captured"], 1);
  EXPECT_EQ(r3["remaining"], 0);
  EXPECT_EQ(sdb->value("SELECT count(DISTINCT table_name) FROM predrop.schema_snapshots"), "5");
}

// Read-only: a role that can only connect and SELECT captures everything, and the target's
// write counters do not move.
TEST_F(EvidenceTest, BaselineNeverWritesToTarget) {
  std::string role = unique_name("ev_ro");
  db->exec("CREATE SCHEMA s; CREATE TABLE s.t1 (a int, b text); CREATE TABLE s.t2 (c date);"
           "INSERT INTO s.t1 SELECT g, g::text FROM generate_series(1, 100) g; ANALYZE");
  Db("postgres").exec("CREATE ROLE " + role + " LOGIN; GRANT CONNECT ON DATABASE " + target->name() + " TO " + role);
  db->exec("REVOKE ALL ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA s TO " + role + "; GRANT SELECT ON ALL TABLES IN SCHEMA s TO " + role);
  db.reset();  // flush this session's counters
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::string counters = "SELECT tup_inserted || '/' || tup_updated || '/' || tup_deleted FROM pg_stat_database WHERE datname = '" +
                         target->name() + "'";
  std::string before = Db("postgres").value(counters);
  auto r = run_predrop("baseline --format json --schema s --target " + q(conninfo_for(target->name()) + " user=" + role) + store_flag());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(json_of(r)["captured"], 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(Db("postgres").value(counters), before);
  EXPECT_EQ(sdb->value("SELECT bool_and(stats_available) FILTER (WHERE table_name = 't1') FROM predrop.schema_snapshots"), "t");
  Db("postgres").exec("DROP DATABASE " + target->name() + " WITH (FORCE)");
  target = std::make_unique<TempDatabase>("ev_target");
  Db("postgres").exec("DROP ROLE " + role);
}

// Batches read and write the same rows as one batch: the catalog read and the store write are
// prepared once a session and run again for each batch, and a batch's store write overlaps the
// next batch's read.
TEST_F(EvidenceTest, BaselineInBatchesWritesWhatOneBatchDoes) {
  db->exec("CREATE SCHEMA bb; DO $$ BEGIN FOR i IN 1..7 LOOP "
           "EXECUTE format('CREATE TABLE bb.t%s (id int, provincia text, monto numeric, fecha date)', i); "
           "EXECUTE format('INSERT INTO bb.t%s SELECT g, ''p'' || mod(g, %s), g * 1.5, "
           "date ''2026-01-01'' + mod(g, 40) FROM generate_series(1, 300) g', i, i + 2); END LOOP; END $$; ANALYZE");
  const std::string rows = "SELECT string_agg(table_name || ' ' || schema_hash || ' ' || row_count_estimate || ' ' || "
                           "columns_profile::text, E'\\n' ORDER BY table_name) FROM predrop.schema_snapshots";
  auto batched = baseline(" --schema bb --batch-size 3 --lanes 1");  // batches of 3, 3 and 1
  EXPECT_EQ(batched["captured"], 7);
  EXPECT_TRUE(batched["errors"].empty()) << batched.dump();
  const std::string in_batches = sdb->value(rows);
  // Its ids are time-ordered (version 7), as a hold's are (capture/store_writer.hpp, new_uuid).
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots WHERE substr(id::text, 15, 1) = '7'"), "7");
  sdb->exec("TRUNCATE predrop.schema_snapshots");
  auto whole = baseline(" --schema bb --batch-size 1000");
  EXPECT_EQ(whole["captured"], 7);
  const std::string in_one = sdb->value(rows);
  EXPECT_NE(in_one.find("\"most_common_vals\": [\"p0\""), std::string::npos) << in_one;  // profiled, not empty
  EXPECT_EQ(in_batches, in_one);
}

TEST_F(EvidenceTest, BaselineSpeed) {
  const int n = 2000;
  db->exec("DO $$ BEGIN FOR i IN 1.." + std::to_string(n) +
           " LOOP EXECUTE format('CREATE TABLE bulk%s (id int, name text, amount numeric(10,2), day date, flag bool)', i); "
           "END LOOP; END $$");
  auto r = baseline(" --schema public");
  EXPECT_EQ(r["captured"], n);
  std::printf("baseline speed: %d tables in %.2f s = %.0f tables/s (end to end: listing, comparison, catalog reads, store writes)\n", n,
              r["seconds"].get<double>(), r["tables_per_s"].get<double>());
  EXPECT_EQ(sdb->value("SELECT count(*) FROM predrop.schema_snapshots"), std::to_string(n));
}

TEST_F(EvidenceTest, DdlRecreatesTheCapturedShape) {
  db->exec("CREATE TABLE public.shape (id bigint, \"Mixed Case\" text, \"select\" int, gone int, amount numeric(10,2),"
           " label varchar(20), tags text[], at timestamptz, \"we\"\"ird\" boolean);"
           "ALTER TABLE shape DROP COLUMN gone");  // an ordinal gap
  baseline(" --schema public");
  std::string id = sdb->value("SELECT id FROM predrop.schema_snapshots WHERE table_name = 'shape'");
  auto r = run_predrop("ddl " + id + store_flag());
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("\"Mixed Case\" text"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"select\" integer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  amount numeric(10,2)"), std::string::npos) << r.out;  // unquoted where not needed
  TempDatabase fresh("ev_ddl");
  Db f(fresh.name());
  f.exec(r.out);
  auto shape = [](Db& d) {
    return d.value("SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod), ',' ORDER BY attnum) "
                   "FROM pg_attribute WHERE attrelid = 'public.shape'::regclass AND attnum > 0 AND NOT attisdropped");
  };
  EXPECT_EQ(shape(f), shape(*db));
}

TEST_F(EvidenceTest, ReportPairsBothKinds) {
  auto none = json_of(run_predrop("report --format json" + store_flag()));
  EXPECT_EQ(none["pairs_found"], 0);
  EXPECT_EQ(none["evaluated"], 0);
  EXPECT_EQ(none["mode"], "shadow");
  db->exec("CREATE TABLE t__v1 (a int); CREATE TABLE t__v2 (a int, b int); CREATE TABLE same (x int)");
  baseline();
  db->exec("ALTER TABLE same ADD COLUMN y int");
  baseline();
  sdb->exec("UPDATE predrop.schema_snapshots SET parser_version = 'p:x', resource_identity = 'res:t', "
            "version = CASE table_name WHEN 't__v1' THEN 1 ELSE 2 END WHERE table_name LIKE 't\\_\\_v%'");
  sdb->exec("UPDATE predrop.schema_snapshots SET parser_version = 'p:x' WHERE table_name = 'same'");
  auto r = json_of(run_predrop("report --days 30 --format json" + store_flag()));
  EXPECT_EQ(r["pairs_found"], 2);
  EXPECT_EQ(r["pairs_by_kind"]["same_table"], 1);
  EXPECT_EQ(r["pairs_by_kind"]["version"], 1);
  EXPECT_EQ(r["actionable"], 2);
  EXPECT_EQ(r["actionable_by_class"]["additive"], 2);
  bool saw_version = false;
  for (const auto& ex : r["examples"]) {
    if (ex["pair_kind"] == "version") {
      saw_version = true;
      EXPECT_EQ(ex["compared_against"], "t__v1");
      EXPECT_EQ(ex["gates_not_evaluated"], json::array({"G2_sibling"}));
    }
  }
  EXPECT_TRUE(saw_version);
  auto text = run_predrop("report" + store_flag());
  EXPECT_NE(text.out.find("2 change(s) survived every gate"), std::string::npos) << text.out;
}
