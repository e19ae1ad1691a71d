// A snapshot's content does not depend on the server's version: the same table, analysed, gives
// the same columns_profile on PostgreSQL 15 and 17 (scripts/test.sh runs this binary against both).
// PostgreSQL 17 changed what predrop's catalog and pg_stats reads could trip on: pg_attribute's
// attstattarget became nullable (NULL is the default target, 15 stores -1), and pg_stats gained
// range_length_histogram, range_empty_frac and range_bounds_histogram. predrop reads neither
// attstattarget nor the range columns: a profile holds null_frac, n_distinct, most_common_vals and
// histogram_bounds, which both versions compute alike, so a range column's profile is its
// null_frac and n_distinct on both (its histograms are range statistics, not captured).
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <nlohmann/json.hpp>

#include "capture/capture.hpp"
#include "capture_fixture.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;
using namespace std::chrono_literals;

namespace {

// A column per statistics target form (default, a small one, 0, set then back to the default),
// a range column with NULL and empty ranges, and text values with commas and quotes. Every value
// is a function of g and the table is smaller than ANALYZE's sample, so the statistics are exact.
constexpr const char* kTable = R"SQL(
CREATE TABLE public.versioned (
  id int, few int, unstatted int, reset int, span int4range, tag text);
ALTER TABLE public.versioned ALTER COLUMN few SET STATISTICS 5;
ALTER TABLE public.versioned ALTER COLUMN unstatted SET STATISTICS 0;
ALTER TABLE public.versioned ALTER COLUMN reset SET STATISTICS 3;
ALTER TABLE public.versioned ALTER COLUMN reset SET STATISTICS -1;
INSERT INTO public.versioned
  SELECT g, CASE WHEN g % 3 = 0 THEN 0 ELSE g % 50 END, g % 7, g % 4,
         CASE WHEN g % 10 = 0 THEN NULL WHEN g % 10 = 1 THEN 'empty'::int4range
              ELSE int4range(g, g + g % 9 + 1) END,
         CASE g % 5 WHEN 0 THEN 'a,b' WHEN 1 THEN 'say "hi"' WHEN 2 THEN NULL ELSE 't' || (g % 40) END
    FROM generate_series(1, 1200) g;
ANALYZE public.versioned;
)SQL";

// What PostgreSQL 15.14 and 17.12 both give (ANALYZE reads every row: the values are exact).
constexpr const char* kExpectedProfile = R"JSON([
 {"name":"id","ordinal":1,"pg_type":"integer","null_frac":0.0,"n_distinct":-1.0,"most_common_vals":[],
  "histogram_sample":["1","12","24","36","48","60","72","84","96","108","120","132","144","156","168","180","192","204","216","228"]},
 {"name":"few","ordinal":2,"pg_type":"integer","null_frac":0.0,"n_distinct":50.0,"most_common_vals":["0","1","2","3","4"],
  "histogram_sample":["5","13","22","31","40","49"]},
 {"name":"unstatted","ordinal":3,"pg_type":"integer","null_frac":null,"n_distinct":null,"most_common_vals":[],"histogram_sample":[]},
 {"name":"reset","ordinal":4,"pg_type":"integer","null_frac":0.0,"n_distinct":4.0,"most_common_vals":["0","1","2","3"],"histogram_sample":[]},
 {"name":"span","ordinal":5,"pg_type":"int4range","null_frac":0.1,"n_distinct":-0.9,"most_common_vals":[],"histogram_sample":[]},
 {"name":"tag","ordinal":6,"pg_type":"text","null_frac":0.2,"n_distinct":18.0,
  "most_common_vals":["a,b","say \"hi\"","t13","t14","t18","t19","t23","t24","t28","t29","t3","t33","t34","t38","t39","t4","t8","t9"],
  "histogram_sample":[]}
])JSON";

class CaptureServerVersionTest : public CaptureDatabasesTest {
 protected:
  CaptureServerVersionTest() : CaptureDatabasesTest("capv") {}
  void SetUp() override {
    CaptureDatabasesTest::SetUp();
    if (HasFatalFailure()) return;
    major = std::stoi(db->value("SELECT current_setting('server_version_num')")) / 10000;
  }
  SnapshotResult snapshot_of(const std::string& table) {
    SnapshotRequest r;
    r.ctx.database = src->name();
    r.ctx.session_user = "postgres";
    r.ctx.statement_kind = "drop_table";
    r.ctx.statement = "DROP TABLE " + table;
    r.search_path = {"public"};
    r.targets = {{TargetKind::relation, "public", table, {}, {}, 0}};
    r.deadline = std::chrono::steady_clock::now() + 20s;
    CaptureService svc(cfg);
    auto p = std::make_shared<std::promise<SnapshotResult>>();
    auto f = p->get_future();
    svc.snapshot(std::move(r), [p](SnapshotResult res) { p->set_value(std::move(res)); });
    if (f.wait_for(20s) != std::future_status::ready) {
      ADD_FAILURE() << "done() never called";
      return {};
    }
    return f.get();
  }
  int major = 0;
};

}  // namespace

// The pass that says it runs against a version does (scripts/test.sh's PostgreSQL 17 pass
// would otherwise prove nothing if it fell back to the 15 cluster).
TEST_F(CaptureServerVersionTest, ServerIsTheVersionTheRunNames) {
  std::cout << "# server: " << db->value("SELECT version()") << "\n";
  const char* want = std::getenv("PG_MAJOR");
  ASSERT_TRUE(want && *want) << "PG_MAJOR unset: source the env file scripts/pg-cluster.sh start writes";
  EXPECT_EQ(major, std::atoi(want));
}

TEST_F(CaptureServerVersionTest, SameProfileOnEveryVersion) {
  db->exec(kTable);
  // The catalog does differ between the versions, where predrop does not look.
  EXPECT_EQ(db->value("SELECT coalesce(attstattarget::text, 'null') FROM pg_attribute "
                      "WHERE attrelid = 'public.versioned'::regclass AND attname = 'reset'"),
            major >= 17 ? "null" : "-1");
  EXPECT_EQ(db->value("SELECT attstattarget FROM pg_attribute "
                      "WHERE attrelid = 'public.versioned'::regclass AND attname = 'few'"),
            "5");
  if (major >= 17) {
    EXPECT_EQ(db->value("SELECT (range_length_histogram IS NOT NULL AND range_bounds_histogram IS NOT NULL)::text "
                        "|| ' ' || range_empty_frac FROM pg_stats WHERE tablename = 'versioned' AND attname = 'span'"),
              "true 0.11111111");  // 120 empty of 1080 non-NULL
  }

  auto res = snapshot_of("versioned");
  ASSERT_EQ(res.outcome, SnapshotOutcome::written) << res.error;
  auto rows = sdb->exec("SELECT columns_profile::text, column_count, row_count_estimate, stats_available "
                        "FROM predrop.schema_snapshots WHERE table_name = 'versioned'");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(*rows[0][1], "6");
  EXPECT_EQ(*rows[0][2], "1200");
  EXPECT_EQ(*rows[0][3], "t");
  auto profile = nlohmann::json::parse(*rows[0][0]);
  auto expected = nlohmann::json::parse(kExpectedProfile);
  ASSERT_EQ(profile.size(), expected.size()) << profile.dump();
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(profile[i], expected[i]) << "PostgreSQL " << major << ", column " << expected[i]["name"];
}
