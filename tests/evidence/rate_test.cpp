// The rate of change (evidence/rate.*) without a database: which pairs count, what a change is,
// the weeks.
#include <gtest/gtest.h>

#include "evidence/rate.hpp"
#include "evidence_fixtures.hpp"

namespace predrop::evidence_test {
namespace {

using namespace predrop::evidence;

StoredSnapshot at(StoredSnapshot s, std::string schema, std::string table, std::string reason, std::string when) {
  s.schema_name = std::move(schema);
  s.table_name = std::move(table);
  s.reason = std::move(reason);
  s.captured_at = std::move(when);
  return s;
}

PairVerdict pair(const StoredSnapshot& b, const StoredSnapshot& a, std::string kind = "before_after") {
  PairVerdict p;
  p.kind = std::move(kind);
  p.before = &b;
  p.after = &a;
  p.evaluated = true;
  p.verdict = classify_change(b, a);
  return p;
}

TEST(Rate, WeekOfIsTheMondayOfItsIsoWeek) {
  EXPECT_EQ(week_of("2026-12-03 04:14:22.5+00"), "2026-11-30");   // a Thursday
  EXPECT_EQ(week_of("2026-11-30"), "2026-11-30");                 // a Monday is its own week
  EXPECT_EQ(week_of("2026-11-29T23:59:59Z"), "2026-11-23");       // a Sunday ends the week before
  EXPECT_EQ(week_of("2021-01-01"), "2020-12-28");                 // across a year
  EXPECT_EQ(week_of("2024-02-29"), "2024-02-26");                 // a leap day
  EXPECT_EQ(week_of("1970-01-01"), "1969-12-29");
  for (const char* bad : {"", "2026-13-01", "2026-02-30", "2023-02-29", "2026/12/03", "yesterday", "2026-1-3"})
    EXPECT_EQ(week_of(bad), "") << bad;
}

TEST(Rate, ARenameIsNotAlsoAnAddedAndARemovedColumn) {
  auto before = snap({col("provincia", "text", provinces()), col("anio", "integer", years())});
  auto renamed = snap({col("jurisdiccion", "text", provinces()), col("anio", "integer", years())});
  auto c = shape_change(classify_change(before, renamed));
  EXPECT_TRUE(c.changed);
  EXPECT_TRUE(c.renamed);
  EXPECT_FALSE(c.added);
  EXPECT_FALSE(c.removed);
  EXPECT_FALSE(c.type_changed);
  auto same = shape_change(classify_change(before, before));
  EXPECT_FALSE(same.changed);
  auto retyped = snap({col("provincia", "text", provinces()), col("anio", "bigint", years())});
  auto t = shape_change(classify_change(before, retyped));
  EXPECT_TRUE(t.changed && t.type_changed && !t.added && !t.removed && !t.renamed);
}

TEST(Rate, WhichPairsShowATableRecreatedOrAltered) {
  auto shape = snap({col("provincia", "text", provinces())});
  auto b1 = at(shape, "raw", "t", "baseline", "2026-11-02 10:00:00+00");
  auto b2 = at(shape, "raw", "t", "baseline", "2026-11-09 10:00:00+00");
  auto d1 = at(shape, "raw", "t", "pre_drop", "2026-11-02 10:00:00+00");
  EXPECT_TRUE(shows_recreate_or_alter(pair(d1, b2)));                    // a before/after pair
  EXPECT_FALSE(shows_recreate_or_alter(pair(b1, b2, "same_table")));     // seen twice, nothing happened
  EXPECT_TRUE(shows_recreate_or_alter(pair(d1, b2, "same_table")));      // dropped, then there again
  auto other = b2;
  b1.table_oid = 100;
  other.table_oid = 200;
  EXPECT_TRUE(shows_recreate_or_alter(pair(b1, other, "same_table")));   // another relation: recreated
  auto wider = at(snap({col("provincia", "text", provinces()), col("anio", "integer", years())}), "raw", "t", "baseline",
                  "2026-11-09 10:00:00+00");
  EXPECT_TRUE(shows_recreate_or_alter(pair(b1, wider, "same_table")));   // altered
  EXPECT_FALSE(shows_recreate_or_alter(pair(d1, wider, "version")));     // another table name
  auto skipped = pair(d1, b2);
  skipped.evaluated = false;
  EXPECT_FALSE(shows_recreate_or_alter(skipped));
}

TEST(Rate, DistinctTablesPerSchemaAndPerWeekEveryWeekListed) {
  auto two = snap({col("provincia", "text", provinces()), col("anio", "integer", years())});
  auto three = snap({col("provincia", "text", provinces()), col("anio", "integer", years()), col("monto", "numeric", years())});
  std::vector<StoredSnapshot> s = {
      at(two, "datos", "ventas", "pre_drop", "2026-11-10 09:00:00+00"), at(three, "datos", "ventas", "post_create", "2026-11-10 09:00:01+00"),
      at(two, "datos", "ventas", "pre_drop", "2026-11-11 09:00:00+00"), at(two, "datos", "ventas", "post_create", "2026-11-11 09:00:01+00"),
      at(two, "datos", "padron", "pre_drop", "2026-11-12 09:00:00+00"), at(two, "datos", "padron", "post_create", "2026-11-12 09:00:01+00"),
      at(two, "otro", "tasas", "pre_drop", "2026-11-25 09:00:00+00"), at(three, "otro", "tasas", "post_alter", "2026-11-25 09:00:01+00"),
  };
  std::vector<PairVerdict> pairs = {pair(s[0], s[1]), pair(s[2], s[3]), pair(s[4], s[5]), pair(s[6], s[7])};
  auto r = change_rate_json(pairs, 30, "2026-12-03");
  EXPECT_EQ(r["pairs_counted"], 4);
  // ventas twice (once changed, once not) is one table seen and one changed.
  EXPECT_EQ(r["overall"]["tables_seen"], 3);
  EXPECT_EQ(r["overall"]["tables_changed_shape"], 2);
  EXPECT_EQ(r["overall"]["added"], 2);
  EXPECT_DOUBLE_EQ(r["overall"]["share_changed"].get<double>(), 2.0 / 3.0);
  EXPECT_EQ(r["by_schema"]["datos"]["tables_seen"], 2);
  EXPECT_EQ(r["by_schema"]["datos"]["tables_changed_shape"], 1);
  EXPECT_EQ(r["by_schema"]["otro"]["tables_changed_shape"], 1);
  // 30 days before 2026-12-03 is 2026-11-03, in the week of 2026-11-02; the last week is 2026-11-30.
  std::vector<std::string> weeks;
  for (const auto& w : r["weekly"]) weeks.push_back(w["week"]);
  EXPECT_EQ(weeks, (std::vector<std::string>{"2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23", "2026-11-30"}));
  EXPECT_EQ(r["weekly"][1]["tables_seen"], 2);
  EXPECT_EQ(r["weekly"][1]["tables_changed_shape"], 1);
  EXPECT_EQ(r["weekly"][2]["tables_seen"], 0);
  EXPECT_DOUBLE_EQ(r["weekly"][2]["share_changed"].get<double>(), 0.0);
  EXPECT_EQ(r["weekly"][3]["tables_changed_shape"], 1);
  // A pair ending outside the window's weeks (another clock) widens the series to it.
  auto early = change_rate_json(pairs, 7, "2026-12-03");
  EXPECT_EQ(early["weekly"].front()["week"], "2026-11-09");
  EXPECT_EQ(early["weekly"].size(), 4u);
  auto none = change_rate_json({}, 7, "2026-12-03");
  EXPECT_EQ(none["overall"]["tables_seen"], 0);
  EXPECT_EQ(none["weekly"].size(), 2u);   // 2026-11-23 and 2026-11-30
}

}  // namespace
}  // namespace predrop::evidence_test
