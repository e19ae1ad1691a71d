// Before/after pairs (store version 2) read back by the evidence tools, through the predrop
// binary against a real PostgreSQL: rows are inserted into a migrated store the way the capture
// writes them (pair_of, extra profile_of, and pg_notify on predrop_snapshots with the stable
// payload), then diff, history, report (text, JSON, HTML) and watch are checked.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "capture/snapshot.hpp"
#include "cli_runner.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture::testing;
using nlohmann::json;
using predrop::evidence_test::json_of;
using predrop::evidence_test::q;
using predrop::evidence_test::Run;
using predrop::evidence_test::run_predrop;

namespace {

struct Col {
  std::string name;
  int attnum;
  std::string type;
  std::vector<std::string> values;  // as most_common_vals; empty: no statistics
};

// One snapshot row as the capture writes it; captured_at is an offset in minutes from a fixed
// past instant so the order is the test's, not the clock's.
struct Row {
  Row(std::string schema, std::string table, std::string reason, std::string database, long oid, std::vector<Col> cols,
      int minute, std::string pair_of = "", std::string profile_of = "")
      : schema(std::move(schema)), table(std::move(table)), reason(std::move(reason)), database(std::move(database)), oid(oid),
        cols(std::move(cols)), minute(minute), pair_of(std::move(pair_of)), profile_of(std::move(profile_of)) {}
  std::string schema, table, reason, database;
  long oid;
  std::vector<Col> cols;
  int minute;
  std::string pair_of, profile_of;
};

std::string lit(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

std::string insert_sql(const Row& r, bool notify) {
  json profile = json::array();
  std::vector<std::string> names;
  bool stats = false;
  for (const auto& c : r.cols) {
    names.push_back(c.name);
    stats = stats || !c.values.empty();
    json col = {{"name", c.name}, {"ordinal", c.attnum}, {"pg_type", c.type}, {"histogram_sample", json::array()}};
    if (c.values.empty()) {
      col["null_frac"] = nullptr;
      col["n_distinct"] = nullptr;
      col["most_common_vals"] = json::array();
    } else {
      col["null_frac"] = 0.0;
      col["n_distinct"] = static_cast<double>(c.values.size());
      col["most_common_vals"] = c.values;
    }
    profile.push_back(col);
  }
  json extra = json::object();
  if (!r.profile_of.empty()) extra["profile_of"] = r.profile_of;
  std::string ins =
      "INSERT INTO predrop.schema_snapshots (schema_name, table_name, reason, actor, column_count, schema_hash, "
      "columns_profile, stats_available, extra, captured_at, database_name, table_oid, pair_of) VALUES (" +
      lit(r.schema) + ", " + lit(r.table) + ", " + lit(r.reason) + ", 'predrop', " + std::to_string(r.cols.size()) + ", " +
      lit(predrop::capture::schema_hash(names, {})) + ", " + lit(profile.dump()) + "::jsonb, " + (stats ? "true" : "false") +
      ", " + lit(extra.dump()) + "::jsonb, now() - interval '1 day' + interval '" + std::to_string(r.minute) + " minutes', " +
      lit(r.database) + ", " + std::to_string(r.oid) + ", " + (r.pair_of.empty() ? "NULL" : lit(r.pair_of) + "::uuid") +
      ") RETURNING *";
  if (!notify) return "WITH ins AS (" + ins + ") SELECT id FROM ins";
  // The capture's payload, field for field.
  return "WITH ins AS (" + ins +
         ") SELECT id, pg_notify('predrop_snapshots', json_build_object('id', id, 'database', database_name, "
         "'schema', schema_name, 'table', table_name, 'reason', reason, 'schema_hash', schema_hash, 'pair_of', pair_of, "
         "'captured_at', captured_at)::text) FROM ins";
}

std::vector<std::string> provinces() { return {"Salta", "Jujuy", "Chaco", "Misiones", "Formosa", "Tucuman"}; }

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

}  // namespace

class PairsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set (run through scripts/test.sh)";
    ASSERT_NE(std::getenv("PREDROP_BIN"), nullptr);
    store = std::make_unique<TempDatabase>("ev_pairs");
    auto m = run_predrop("migrate --store " + q(conninfo_for(store->name())));
    ASSERT_EQ(m.rc, 0) << m.out;
    sdb = std::make_unique<Db>(store->name());
  }
  std::string add(const Row& r, bool notify = false) { return sdb->value(insert_sql(r, notify)); }
  std::string store_flag() { return " --store " + q(conninfo_for(store->name())); }
  std::unique_ptr<TempDatabase> store;
  std::unique_ptr<Db> sdb;
};

// An ALTER pair: one relation (database and OID), so the rename is read from the attnum even
// though the values share nothing; the default is the latest complete pair (before → its
// post_analyze), not the latest two rows (post_alter → post_analyze, no change).
TEST_F(PairsTest, DiffOfAlterPairReadsRenameFromAttnum) {
  std::string b = add({"public", "ventas", "baseline", "appdb", 16500,
                       {{"id", 1, "integer", {"1", "2", "3", "4", "5"}},
                        {"provincia", 2, "text", provinces()},
                        {"codigo", 4, "integer", {"10", "20", "30", "40"}}},
                       0});
  std::string a = add({"public", "ventas", "post_alter", "appdb", 16500,
                       {{"id", 1, "integer", {}}, {"jurisdiccion", 2, "text", {}}, {"code", 4, "bigint", {}}},
                       5, b});
  std::string z = add({"public", "ventas", "post_analyze", "appdb", 16500,
                       {{"id", 1, "integer", {"1", "2", "3", "4", "5"}},
                        {"jurisdiccion", 2, "text", {"North", "South", "East", "West", "Centre"}},
                        {"code", 4, "bigint", {"7", "8", "9", "11"}}},
                       6, b, a});
  auto d = json_of(run_predrop("diff public.ventas --format json" + store_flag()));
  EXPECT_EQ(d["before"]["id"], b);
  EXPECT_EQ(d["after"]["id"], z);
  EXPECT_EQ(d["paired"], true);
  json ren = d["diff"]["renamed_candidates"];
  ASSERT_EQ(ren.size(), 2u) << d["diff"].dump();
  EXPECT_EQ(ren[0], json({{"from", "codigo"}, {"to", "code"}, {"similarity", 1.0}, {"evidence", "attnum"}}));
  EXPECT_EQ(ren[1], json({{"from", "provincia"}, {"to", "jurisdiccion"}, {"similarity", 1.0}, {"evidence", "attnum"}}));
  EXPECT_EQ(d["diff"]["ambiguous_renames"], json::array());
  EXPECT_EQ(d["diff"]["type_changed"], json::array({{{"column", "code"}, {"from", "integer"}, {"to", "bigint"}}}));

  auto t = run_predrop("diff public.ventas" + store_flag());
  EXPECT_EQ(t.rc, 0);
  EXPECT_NE(t.out.find("provincia \u2192 jurisdiccion (1.00)  by attnum"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("~ code: integer \u2192 bigint"), std::string::npos) << t.out;

  // The same pair by ids; --latest keeps the latest-two reading.
  auto byid = json_of(run_predrop("diff " + b + " " + z + " --format json" + store_flag()));
  EXPECT_EQ(byid["diff"], d["diff"]);
  auto latest = json_of(run_predrop("diff public.ventas --latest --format json" + store_flag()));
  EXPECT_EQ(latest["before"]["id"], a);
  EXPECT_EQ(latest["diff"]["renamed_candidates"], json::array());

  // A recreate (new OID) is not one relation: with nothing in common the values decide, and
  // they do not match, so the columns are added and removed, never guessed.
  std::string p = add({"public", "r", "pre_drop", "appdb", 16600, {{"a", 1, "text", provinces()}}, 10});
  add({"public", "r", "post_analyze", "appdb", 16700, {{"b", 1, "text", {"w", "x", "y", "z"}}}, 11, p});
  auto r = json_of(run_predrop("diff public.r --format json" + store_flag()));
  EXPECT_EQ(r["diff"]["renamed_candidates"], json::array());
  EXPECT_EQ(r["diff"]["added"], json::array({"b"}));
}

TEST_F(PairsTest, HistoryShowsPairsOneLineEach) {
  std::string b1 = add({"public", "v", "baseline", "appdb", 100, {{"a", 1, "text", provinces()}}, 0});
  std::string p = add({"public", "v", "pre_drop", "appdb", 100, {{"a", 1, "text", provinces()}}, 1});
  std::string c = add({"public", "v", "post_create", "appdb", 200, {{"a", 1, "text", {}}, {"anio", 2, "integer", {}}}, 2, p});
  std::string z = add({"public", "v", "post_analyze", "appdb", 200,
                       {{"a", 1, "text", provinces()}, {"anio", 2, "integer", {"2019", "2020", "2021", "2022"}}}, 3, p, c});
  std::string b2 = add({"public", "v", "baseline", "appdb", 200,
                        {{"a", 1, "text", provinces()}, {"anio", 2, "integer", {"2019", "2020", "2021", "2022"}}}, 4});
  std::string al = add({"public", "v", "post_alter", "appdb", 200, {{"region", 1, "text", {}}, {"anio", 2, "integer", {}}}, 5, b2});

  auto h = json_of(run_predrop("history public.v --format json" + store_flag()));
  ASSERT_EQ(h["pairs"].size(), 2u) << h.dump(2);
  EXPECT_EQ(h["pairs"][0]["before"]["id"], p);
  EXPECT_EQ(h["pairs"][0]["after"]["id"], z);
  EXPECT_EQ(h["pairs"][0]["waiting_for_stats"], false);
  EXPECT_EQ(h["pairs"][0]["summary"], "added anio");
  EXPECT_EQ(h["pairs"][1]["before"]["id"], b2);
  EXPECT_EQ(h["pairs"][1]["after"]["id"], al);
  EXPECT_EQ(h["pairs"][1]["waiting_for_stats"], true);
  EXPECT_EQ(h["pairs"][1]["summary"], "renamed a \u2192 region (by attnum)");
  ASSERT_EQ(h["unpaired"].size(), 1u);
  EXPECT_EQ(h["unpaired"][0]["id"], b1);
  EXPECT_EQ(h["snapshots"].size(), 6u);  // the flat list stays

  auto t = run_predrop("history public.v" + store_flag());
  EXPECT_EQ(t.rc, 0);
  EXPECT_NE(t.out.find("public.v: 6 snapshot(s), 2 pair(s), 1 unpaired"), std::string::npos) << t.out;
  std::istringstream lines(t.out);
  std::vector<std::string> ls;
  for (std::string l; std::getline(lines, l);) ls.push_back(l);
  ASSERT_EQ(ls.size(), 4u) << t.out;
  EXPECT_NE(ls[1].find("unpaired baseline"), std::string::npos) << ls[1];
  EXPECT_NE(ls[2].find("pre_drop "), std::string::npos) << ls[2];
  EXPECT_NE(ls[2].find(" " + p.substr(0, 8) + " "), std::string::npos) << ls[2];
  EXPECT_NE(ls[2].find("\u2192 post_analyze "), std::string::npos) << ls[2];
  EXPECT_NE(ls[2].find("added anio"), std::string::npos) << ls[2];
  EXPECT_NE(ls[3].find("baseline "), std::string::npos) << ls[3];
  EXPECT_NE(ls[3].find("\u2192 post_alter "), std::string::npos) << ls[3];
  EXPECT_NE(ls[3].find("renamed a \u2192 region (by attnum)  (waiting for statistics)"), std::string::npos) << ls[3];

  // Snapshots in no pair (all a store before version 2 holds) still say what changed.
  std::string o1 = add({"public", "old", "baseline", "appdb", 300, {{"a", 1, "text", {}}}, 0});
  add({"public", "old", "baseline", "appdb", 300, {{"a", 1, "text", {}}, {"c", 2, "integer", {}}}, 1});
  auto old_t = run_predrop("history public.old" + store_flag());
  EXPECT_NE(old_t.out.find("since " + o1.substr(0, 8) + ": added c"), std::string::npos) << old_t.out;
  auto old_j = json_of(run_predrop("history public.old --format json" + store_flag()));
  ASSERT_EQ(old_j["unpaired"].size(), 2u);
  EXPECT_EQ(old_j["unpaired"][1]["changed_since"], o1);
  EXPECT_EQ(old_j["unpaired"][1]["changed"]["added"], json::array({"c"}));
}

// No provenance on any row: every pair is unattributable. Three pairs changed (two added
// columns, one rename kept by its values); each is listed with what changed, in JSON, text and
// HTML, the gates not evaluated once; plus the pair counts and plain timestamps.
TEST_F(PairsTest, ReportListsUnattributablePairsAndCountsPairs) {
  std::string p1 = add({"public", "t1", "pre_drop", "appdb", 1, {{"a", 1, "text", provinces()}}, 0});
  add({"public", "t1", "post_create", "appdb", 2, {{"a", 1, "text", {}}, {"x", 2, "integer", {}}}, 1, p1});
  std::string p2 = add({"public", "t2", "pre_drop", "appdb", 3, {{"a", 1, "text", provinces()}}, 2});
  std::string c2 = add({"public", "t2", "post_create", "appdb", 4, {{"a", 1, "text", {}}, {"y", 2, "integer", {}}}, 3, p2});
  add({"public", "t2", "post_analyze", "appdb", 4, {{"a", 1, "text", provinces()}, {"y", 2, "integer", {"1", "2", "3", "4"}}}, 4, p2, c2});
  std::string p3 = add({"public", "t3", "pre_drop", "appdb", 5, {{"provincia", 1, "text", provinces()}, {"n", 2, "integer", {"1", "2", "3", "4"}}}, 5});
  std::string c3 = add({"public", "t3", "post_create", "appdb", 6, {{"jurisdiccion", 1, "text", {}}, {"n", 2, "integer", {}}}, 6, p3});
  add({"public", "t3", "post_analyze", "appdb", 6, {{"jurisdiccion", 1, "text", provinces()}, {"n", 2, "integer", {"1", "2", "3", "4"}}}, 7, p3, c3});
  add({"public", "t4", "post_create", "appdb", 7, {{"z", 1, "integer", {}}}, 8});  // a brand new table

  auto r = json_of(run_predrop("report --format json" + store_flag()));
  EXPECT_EQ(r["complete_pairs"], 3);
  EXPECT_EQ(r["pairs_waiting_for_stats"], 1);
  EXPECT_EQ(r["unpaired_snapshots"], 1);
  EXPECT_EQ(r["pairs_by_kind"]["before_after"], 3);
  EXPECT_EQ(r["by_verdict"]["unattributable"], 3);
  ASSERT_EQ(r["changes"].size(), 3u) << r.dump(2);
  std::map<std::string, json> by_table;
  for (const auto& c : r["changes"]) {
    EXPECT_EQ(c["verdict"], "unattributable");
    EXPECT_FALSE(c.contains("gates_not_evaluated"));
    by_table[c["table"]] = c;
  }
  EXPECT_EQ(by_table["public.t1"]["added"], json::array({"x"}));
  EXPECT_EQ(by_table["public.t1"]["after_reason"], "post_create");
  EXPECT_EQ(by_table["public.t2"]["added"], json::array({"y"}));
  EXPECT_EQ(by_table["public.t2"]["after_reason"], "post_analyze");
  ASSERT_EQ(by_table["public.t3"]["renamed_candidates"].size(), 1u);
  EXPECT_EQ(by_table["public.t3"]["renamed_candidates"][0]["to"], "jurisdiccion");
  EXPECT_EQ(r["gates_not_evaluated"], json({{"G0_identity", 3}, {"G1_provenance", 3}, {"G2_sibling", 3}}));

  auto t = run_predrop("report" + store_flag());
  EXPECT_EQ(t.rc, 0);
  EXPECT_NE(t.out.find("before/after pairs: 3 complete (1 waiting for statistics), 1 unpaired snapshot(s)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("public.t1  before_after  unattributable  " + p1.substr(0, 8)), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("added x"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("added y"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("renamed provincia \u2192 jurisdiccion (1.00)"), std::string::npos) << t.out;
  EXPECT_EQ(count_of(t.out, "G1_provenance"), 1u) << t.out;
  EXPECT_NE(t.out.find(", " + r["coverage"]["first_seen"].get<std::string>() + " .. "), std::string::npos) << t.out;

  std::string path = "/tmp/" + store->name() + ".html";
  auto h = run_predrop("report --format html --output " + path + store_flag());
  ASSERT_EQ(h.rc, 0);
  std::ifstream in(path);
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  EXPECT_EQ(html.find("no actionable change"), std::string::npos);
  EXPECT_NE(html.find("<td>public.t1</td><td>before_after</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>public.t2</td><td>before_after</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>public.t3</td><td>before_after</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>unattributable</td><td>x</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>unattributable</td><td>y</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("provincia \u2192 jurisdiccion (1.00)"), std::string::npos) << html;
  EXPECT_EQ(count_of(html, "G1_provenance"), 1u);
  EXPECT_NE(html.find("<th>first_seen</th><td>" + r["coverage"]["first_seen"].get<std::string>() + "</td>"), std::string::npos) << html;
  EXPECT_EQ(html.find("&quot;20"), std::string::npos) << "a timestamp printed as a JSON string";
  EXPECT_NE(html.find("<th>waiting for statistics</th><td>1</td>"), std::string::npos);
  EXPECT_EQ(count_of(html, "class='pair'"), 3u) << "each pair joined on its timeline";
}

namespace {

// predrop watch as a child process with its stdout and stderr on pipes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]), close(err[0]), close(out[1]), close(err[1]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]), close(err[1]);
    out_ = out[0], err_ = err[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
    if (err_ >= 0) close(err_);
  }
  // Reads until `stream` holds n lines or the deadline passes; returns its lines.
  std::vector<std::string> lines(bool from_stderr, size_t n, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string& buf = from_stderr ? err_buf_ : out_buf_;
    while (count_of(buf, "\n") < n && std::chrono::steady_clock::now() < deadline) {
      pollfd p{from_stderr ? err_ : out_, POLLIN, 0};
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char tmp[4096];
      ssize_t k = read(p.fd, tmp, sizeof tmp);
      if (k <= 0) break;
      buf.append(tmp, static_cast<size_t>(k));
    }
    std::vector<std::string> out;
    std::istringstream s(buf);
    for (std::string l; std::getline(s, l);) out.push_back(l);
    return out;
  }
  // Exit status after a signal (or by itself), -1 if it did not end within the timeout.
  int wait_exit(int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      usleep(20000);
    }
    return -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool reaped_ = false;
  std::string out_buf_, err_buf_;
};

}  // namespace

// The capture's notifications, in order; the after that completes a pair comes with its diff.
TEST_F(PairsTest, WatchPrintsEverySnapshotWithThePairDiff) {
  Child w({std::getenv("PREDROP_BIN"), "watch", "--format", "json", "--store", conninfo_for(store->name())});
  auto err = w.lines(true, 1, 10000);
  ASSERT_FALSE(err.empty()) << "watch did not start listening";
  ASSERT_NE(err[0].find("listening on predrop_snapshots"), std::string::npos) << err[0];

  std::string b = add({"public", "w", "baseline", "appdb", 700, {{"id", 1, "integer", {"1", "2", "3", "4"}}, {"nombre", 2, "text", provinces()}}, 0}, true);
  std::string a = add({"public", "w", "post_alter", "appdb", 700, {{"id", 1, "integer", {}}, {"name", 2, "text", {}}}, 1, b}, true);
  std::string n = add({"public", "fresh", "post_create", "appdb", 701, {{"k", 1, "integer", {}}}, 2}, true);
  auto out = w.lines(false, 3, 10000);
  ASSERT_EQ(out.size(), 3u);
  std::vector<json> ev;
  for (const auto& l : out) ev.push_back(json::parse(l, nullptr, false));
  EXPECT_EQ(ev[0]["id"], b);
  EXPECT_EQ(ev[0]["reason"], "baseline");
  EXPECT_EQ(ev[0]["database"], "appdb");
  EXPECT_EQ(ev[0]["schema"], "public");
  EXPECT_EQ(ev[0]["table"], "w");
  EXPECT_TRUE(ev[0]["pair_of"].is_null());
  EXPECT_FALSE(ev[0].contains("diff"));
  EXPECT_EQ(ev[1]["id"], a);
  EXPECT_EQ(ev[1]["pair_of"], b);
  ASSERT_TRUE(ev[1].contains("diff")) << out[1];
  EXPECT_EQ(ev[1]["diff"]["renamed_candidates"],
            json::array({{{"from", "nombre"}, {"to", "name"}, {"similarity", 1.0}, {"evidence", "attnum"}}}));
  EXPECT_EQ(ev[2]["id"], n);
  EXPECT_FALSE(ev[2].contains("diff"));

  kill(w.pid(), SIGTERM);
  EXPECT_EQ(w.wait_exit(5000), 0) << "SIGTERM ends watch cleanly";
}

TEST_F(PairsTest, WatchTextAndLostConnection) {
  Child w({std::getenv("PREDROP_BIN"), "watch", "--store", conninfo_for(store->name())});
  auto err = w.lines(true, 1, 10000);
  ASSERT_FALSE(err.empty());
  std::string b = add({"public", "w", "pre_drop", "appdb", 800, {{"a", 1, "text", provinces()}}, 0}, true);
  add({"public", "w", "post_create", "appdb", 801, {{"a", 1, "text", {}}, {"b", 2, "integer", {}}}, 1, b}, true);
  auto out = w.lines(false, 2, 10000);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].find("  pre_drop  appdb/public.w  " + b.substr(0, 8)), std::string::npos) << out[0];
  EXPECT_NE(out[1].find("  post_create  appdb/public.w  "), std::string::npos) << out[1];
  EXPECT_NE(out[1].find("pairs with " + b.substr(0, 8) + ": added b"), std::string::npos) << out[1];

  // The store ends the session: watch says so and exits non-zero instead of hanging.
  sdb->exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'predrop-evidence' AND pid <> pg_backend_pid()");
  EXPECT_EQ(w.wait_exit(10000), 1);
  // libpq may print the server's FATAL on its way: the last line is watch's own.
  for (size_t n = 2; n <= 3 && (err.empty() || err.back().find("predrop watch: lost") == std::string::npos); ++n) err = w.lines(true, n, 2000);
  ASSERT_GE(err.size(), 2u) << ::testing::PrintToString(err);
  EXPECT_EQ(err.back().rfind("predrop watch: lost the store connection", 0), 0u) << ::testing::PrintToString(err);
}
