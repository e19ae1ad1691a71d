// PgConn's prepared statements follow the tables they read as those grow (capture/pg_async.cpp,
// replan_due): a statement prepared while its table was empty, run on after the table grew past a
// thousand rows that nothing analysed, is planned again and reads the table by its index.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <string>

#include "capture/conninfo.hpp"
#include "capture/pg_async.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;

namespace {

// Runs one statement on conn through io and returns its result.
PgResult run(boost::asio::io_context& io, PgConn& conn, const char* name, const std::string& sql, const Params& params) {
  std::optional<PgResult> out;
  auto done = [&](PgResult r) { out = std::move(r); };
  if (name) conn.exec_prepared(name, sql, params, done, Plan::follows_growth);
  else conn.exec(sql, params, done);
  while (!out) io.run_one();
  io.restart();
  return std::move(*out);
}

TEST(ReplanDue, ThinsOutAsExecutionsGrow) {
  EXPECT_FALSE(replan_due(0));
  EXPECT_FALSE(replan_due(15));
  EXPECT_TRUE(replan_due(16));
  EXPECT_TRUE(replan_due(64));
  EXPECT_FALSE(replan_due(65));
  EXPECT_TRUE(replan_due(4096));
  EXPECT_FALSE(replan_due(8192));
  EXPECT_TRUE(replan_due(16384));
  EXPECT_FALSE(replan_due(16385));
  EXPECT_TRUE(replan_due(3 * 16384));
}

TEST(PgConnPrepared, PlanFollowsATableThatGrewUnanalysed) {
  ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set";
  TempDatabase db("pgconn_replan");
  // As wide as a snapshot row (about 2 KB as the planner estimates it), so that an empty table is
  // guessed at a few dozen rows, as the store is.
  std::string columns;
  for (int i = 0; i < 60; ++i) columns += ", c" + std::to_string(i) + " text";
  Db(db.name()).exec("CREATE TABLE grows (id uuid PRIMARY KEY, payload text" + columns +
                     ") WITH (autovacuum_enabled = off)");
  boost::asio::io_context io;
  auto conn = std::make_shared<PgConn>(io, db.name());
  std::optional<PgResult> connected;
  conn->connect(connect_params(base_conninfo(), db.name(), "pg_conn_test", ""), [&](PgResult r) { connected = std::move(r); });
  while (!connected) io.run_one();
  io.restart();
  ASSERT_TRUE(connected->ok()) << connected->error;

  // The store's shape of statement: a join of the store with the rows of an argument array.
  const std::string sql =
      "UPDATE grows g SET payload = u.p FROM unnest($1::uuid[], $2::text[]) AS u(id, p) WHERE g.id = u.id";
  const Params one{"{00000000-0000-0000-0000-000000000000}", "{x}"};
  auto plan_text = [&] {
    PgResult r = run(io, *conn, nullptr, "EXPLAIN (FORMAT JSON) EXECUTE replan_probe('" + *one[0] + "', '" + *one[1] + "')", {});
    EXPECT_TRUE(r.ok()) << r.error;
    return r.ok() ? r.text(0, 0) : std::string();
  };
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(run(io, *conn, "replan_probe", sql, one).ok());
  const std::string empty_plan = plan_text();
  EXPECT_NE(empty_plan.find("Seq Scan"), std::string::npos)
      << "on an empty table the server's generic plan reads it whole; this test expects that to be so:\n"
      << empty_plan;

  Db(db.name()).exec("INSERT INTO grows SELECT gen_random_uuid(), repeat('p', 200) FROM generate_series(1, 20000)");
  for (int i = 10; i < 100; ++i) ASSERT_TRUE(run(io, *conn, "replan_probe", sql, one).ok());
  const std::string grown_plan = plan_text();
  EXPECT_EQ(grown_plan.find("Seq Scan"), std::string::npos)
      << "after 100 executions the statement still reads the whole 20,000-row table:\n" << grown_plan;
  EXPECT_NE(grown_plan.find("grows_pkey"), std::string::npos) << grown_plan;
}

}  // namespace
