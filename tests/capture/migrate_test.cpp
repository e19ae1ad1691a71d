// `predrop migrate` against a real store: idempotent, refuses a newer store, adapts an existing
// reference-shaped table by only adding what is missing, safe when several sidecars start at once.
#include <gtest/gtest.h>

#include <thread>

#include "capture/capture.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;

namespace {

std::string columns_of(Db& db, const std::string& schema, const std::string& table) {
  return db.value("SELECT string_agg(column_name || ':' || data_type, ',' ORDER BY ordinal_position) "
                  "FROM information_schema.columns WHERE table_schema = '" + schema + "' AND table_name = '" + table + "'");
}

}  // namespace

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set (run through scripts/test.sh)"; }
};

TEST_F(MigrateTest, FreshStoreThenIdempotentRerun) {
  TempDatabase store("cap_mig");
  auto r1 = migrate(conninfo_for(store.name()));
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_EQ(r1.from_version, 0);
  EXPECT_GE(r1.to_version, 1);
  Db db(store.name());
  std::string snap_cols = columns_of(db, "predrop", "schema_snapshots");
  for (const char* c : {"id:uuid", "schema_name:character varying", "columns_profile:jsonb", "captured_at:timestamp with time zone",
                        "is_truncated:boolean", "database_name:text", "table_oid:bigint", "session_user_name:text",
                        "hold_ms:double precision", "drop_outcome:text", "outcome_at:timestamp with time zone"})
    EXPECT_NE(snap_cols.find(c), std::string::npos) << c << " in " << snap_cols;
  EXPECT_NE(columns_of(db, "predrop", "drop_events").find("outcome:text"), std::string::npos);
  // Version 3: the quarantine's rows.
  EXPECT_GE(r1.to_version, 3);
  std::string q_cols = columns_of(db, "predrop", "quarantine");
  for (const char* c : {"id:uuid", "database_name:text", "table_oid:bigint", "quarantine_table:text",
                        "dropped_at:timestamp with time zone", "expires_at:timestamp with time zone", "bytes:bigint",
                        "snapshot_id:uuid", "event_id:uuid", "state:text", "state_reason:text", "detail:jsonb"})
    EXPECT_NE(q_cols.find(c), std::string::npos) << c << " in " << q_cols;
  std::string indexes = db.value("SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'schema_snapshots'");
  for (const char* ix : {"ix_schema_snapshots_table", "ix_schema_snapshots_identity", "ix_schema_snapshots_hash", "ix_schema_snapshots_provenance"})
    EXPECT_NE(indexes.find(ix), std::string::npos) << indexes;
  // Version 6: columns_profile compressed with lz4 where the server has it (it has it when a column
  // can be declared so).
  db.exec("DO $$BEGIN CREATE TEMP TABLE lz4_probe (a text COMPRESSION lz4); "
          "EXCEPTION WHEN feature_not_supported THEN CREATE TEMP TABLE lz4_probe (a text); END$$");
  const bool server_has_lz4 =
      db.value("SELECT attcompression FROM pg_attribute WHERE attrelid = 'lz4_probe'::regclass AND attname = 'a'") == "l";
  EXPECT_EQ(db.value("SELECT attcompression FROM pg_attribute WHERE attrelid = 'predrop.schema_snapshots'::regclass "
                     "AND attname = 'columns_profile'"),
            server_has_lz4 ? "l" : "");

  auto r2 = migrate(conninfo_for(store.name()));
  ASSERT_TRUE(r2.ok) << r2.error;
  EXPECT_EQ(r2.from_version, r1.to_version);
  EXPECT_EQ(r2.to_version, r1.to_version);
  EXPECT_EQ(columns_of(db, "predrop", "schema_snapshots"), snap_cols);
  EXPECT_EQ(db.value("SELECT count(*) FROM predrop.schema_migrations"), std::to_string(r1.to_version));
}

TEST_F(MigrateTest, RefusesStoreNewerThanBinary) {
  TempDatabase store("cap_mig");
  ASSERT_TRUE(migrate(conninfo_for(store.name())).ok);
  Db(store.name()).exec("INSERT INTO predrop.schema_migrations (version, store_table, name) VALUES (999, 'predrop.schema_snapshots', '0999_future.sql')");
  auto r = migrate(conninfo_for(store.name()));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("newer"), std::string::npos) << r.error;
}

TEST_F(MigrateTest, ExistingReferenceTableOnlyGainsColumns) {
  TempDatabase store("cap_mig");
  Db db(store.name());
  // The reference's 0056 shape, without 0057's provenance columns, holding one row.
  db.exec(R"(
    CREATE SCHEMA raw;
    CREATE TABLE raw.raw_schema_snapshots (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      schema_name varchar(63) NOT NULL, table_name varchar(63) NOT NULL,
      resource_identity varchar(512), version integer,
      reason varchar(128) NOT NULL, actor varchar(128) NOT NULL,
      column_count integer NOT NULL DEFAULT 0, row_count_estimate bigint,
      schema_hash varchar(40) NOT NULL, columns_profile jsonb NOT NULL DEFAULT '[]'::jsonb,
      stats_available boolean NOT NULL DEFAULT false, extra jsonb,
      captured_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX ix_raw_schema_snapshots_table ON raw.raw_schema_snapshots (schema_name, table_name, captured_at DESC);
    CREATE INDEX ix_raw_schema_snapshots_identity ON raw.raw_schema_snapshots (resource_identity, captured_at DESC) WHERE resource_identity IS NOT NULL;
    CREATE INDEX ix_raw_schema_snapshots_hash ON raw.raw_schema_snapshots (schema_hash);
    INSERT INTO raw.raw_schema_snapshots (schema_name, table_name, reason, actor, schema_hash)
      VALUES ('raw', 't', 'baseline', 'collector', repeat('a', 40));)");
  std::string before = columns_of(db, "raw", "raw_schema_snapshots");
  auto r = migrate(conninfo_for(store.name()), "raw.raw_schema_snapshots");
  ASSERT_TRUE(r.ok) << r.error;
  std::string after = columns_of(db, "raw", "raw_schema_snapshots");
  ASSERT_EQ(after.substr(0, before.size()), before) << "existing columns must be untouched";
  for (const char* c : {"parser_version", "is_truncated", "database_name", "table_oid", "drop_outcome"})
    EXPECT_NE(after.find(c), std::string::npos) << c;
  EXPECT_EQ(db.value("SELECT count(*) FROM raw.raw_schema_snapshots"), "1");
  EXPECT_EQ(db.value("SELECT to_regclass('predrop.schema_snapshots') IS NULL"), "t");
  // The reference's own index names are recognised, not duplicated: 3 existing + provenance + ours + pkey,
  // version 2's two (pair_of, after_oid) and version 4's after_name.
  EXPECT_EQ(db.value("SELECT count(*) FROM pg_indexes WHERE schemaname = 'raw' AND tablename = 'raw_schema_snapshots'"), "9");
  EXPECT_NE(after.find("pair_of"), std::string::npos);
  EXPECT_EQ(db.value("SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_raw_schema_snapshots_provenance'"), "1");
  auto again = migrate(conninfo_for(store.name()), "raw.raw_schema_snapshots");
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(columns_of(db, "raw", "raw_schema_snapshots"), after);
}

TEST_F(MigrateTest, ConcurrentSidecarsSerialise) {
  TempDatabase store("cap_mig");
  std::vector<std::thread> threads;
  std::vector<MigrateResult> results(4);
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { results[i] = migrate(conninfo_for(store.name())); });
  for (auto& t : threads) t.join();
  int applied = 0;
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok) << r.error;
    if (r.from_version == 0) ++applied;
  }
  EXPECT_EQ(applied, 1) << "exactly one sidecar applies, the others find it done";
}

TEST_F(MigrateTest, UnreachableStoreErrorHasNoPassword) {
  auto r = migrate("host=127.0.0.1 port=1 user=x password=hunter2 connect_timeout=2");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.find("hunter2"), std::string::npos) << r.error;
}
