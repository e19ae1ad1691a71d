// Session isolation: 200 libpq sessions at once through one predrop, each running simple queries,
// the extended protocol (unnamed and named prepared statements with the same names in every
// session), a pipeline, a COPY in and out of a temporary table, large rows and SET/SHOW. Every
// result carries its own session's random token or backend pid, so a byte relayed to the wrong
// connection, or a reply stream spliced from two backends, shows up as a foreign token or pid.
// A direct connection then checks the server's view: each session's backend pid has that session's
// application_name, and no two sessions share a backend.
#include <libpq-fe.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "proxy_test_util.hpp"

namespace ptest {
namespace {

constexpr int kSessions = 200;
constexpr int kRounds = 4;
constexpr int kPipelineDepth = 12;
constexpr int kCopyRows = 40;

struct Pg {
  PGconn* c = nullptr;
  ~Pg() {
    if (c) PQfinish(c);
  }
};

struct Res {
  PGresult* r = nullptr;
  explicit Res(PGresult* p) : r(p) {}
  ~Res() {
    if (r) PQclear(r);
  }
  Res(const Res&) = delete;
  Res& operator=(const Res&) = delete;
  ExecStatusType status() const { return PQresultStatus(r); }
  std::string at(int row, int col) const { return PQgetisnull(r, row, col) ? "<null>" : PQgetvalue(r, row, col); }
  int rows() const { return PQntuples(r); }
};

std::string random_token(std::mt19937_64& rng) {
  static const char hex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 24; ++i) s += hex[rng() % 16];
  return s;
}

// One session's run; every mismatch goes to `problems` (the first few are printed by the test).
class Session {
 public:
  Session(int index, std::string token, uint16_t port) : index_(index), token_(std::move(token)), port_(port) {}

  bool connect() {
    std::string ci = "host=127.0.0.1 port=" + std::to_string(port_) +
                     " dbname=postgres user=postgres sslmode=disable gssencmode=disable connect_timeout=60"
                     " application_name=iso_" + token_;
    pg_.c = PQconnectdb(ci.c_str());
    if (PQstatus(pg_.c) != CONNECTION_OK) return fail(std::string("connect: ") + PQerrorMessage(pg_.c));
    Res r(PQexec(pg_.c, "SELECT pg_backend_pid()"));
    if (r.status() != PGRES_TUPLES_OK) return fail(std::string("pid query: ") + PQerrorMessage(pg_.c));
    pid_ = r.at(0, 0);
    if (pid_ != std::to_string(PQbackendPID(pg_.c)))
      return fail("pg_backend_pid() " + pid_ + " differs from BackendKeyData pid " + std::to_string(PQbackendPID(pg_.c)));
    Res t(PQexec(pg_.c, "CREATE TEMP TABLE iso_copy (k int, tok text)"));
    if (t.status() != PGRES_COMMAND_OK) return fail(std::string("create temp table: ") + PQerrorMessage(pg_.c));
    Res p(PQprepare(pg_.c, "iso_named", "SELECT $1::text || ':' || pg_backend_pid(), $2::int * 2", 2, nullptr));
    if (p.status() != PGRES_COMMAND_OK) return fail(std::string("prepare: ") + PQerrorMessage(pg_.c));
    return true;
  }

  void round(int n) {
    simple(n);
    set_show(n);
    extended(n);
    pipeline(n);
    copy(n);
  }

  const std::string& pid() const { return pid_; }
  const std::string& token() const { return token_; }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  bool fail(const std::string& what) {
    if (problems_.size() < 20) problems_.push_back("session " + std::to_string(index_) + ": " + what);
    return false;
  }
  void expect(const std::string& what, const std::string& got, const std::string& want) {
    if (got != want) fail(what + ": got '" + got.substr(0, 120) + "', expected '" + want.substr(0, 120) + "'");
  }

  void simple(int n) {
    // Two statements in one Query and a ~100 kB row: replies span several relay buffers.
    std::string sql = "SELECT '" + token_ + "', pg_backend_pid(), " + std::to_string(n) +
                      "; SELECT repeat('" + token_ + "', 4000)";
    if (!PQsendQuery(pg_.c, sql.c_str())) return (void)fail(std::string("send simple: ") + PQerrorMessage(pg_.c));
    int seen = 0;
    while (PGresult* raw = PQgetResult(pg_.c)) {
      Res r(raw);
      if (r.status() != PGRES_TUPLES_OK) {
        fail(std::string("simple: ") + PQresultErrorMessage(r.r));
        continue;
      }
      if (seen == 0) {
        expect("simple token", r.at(0, 0), token_);
        expect("simple pid", r.at(0, 1), pid_);
        expect("simple round", r.at(0, 2), std::to_string(n));
      } else {
        std::string want;
        for (int i = 0; i < 4000; ++i) want += token_;
        if (r.at(0, 0) != want) fail("large row is not 4000 copies of the session's token");
      }
      ++seen;
    }
    if (seen != 2) fail("simple: " + std::to_string(seen) + " results, expected 2");
  }

  void set_show(int n) {
    std::string app = "iso_" + token_ + "_" + std::to_string(n);
    Res s(PQexec(pg_.c, ("SET application_name = '" + app + "'").c_str()));
    if (s.status() != PGRES_COMMAND_OK) return (void)fail(std::string("SET: ") + PQerrorMessage(pg_.c));
    Res r(PQexec(pg_.c, "SHOW application_name"));
    if (r.status() != PGRES_TUPLES_OK) return (void)fail(std::string("SHOW: ") + PQerrorMessage(pg_.c));
    expect("SHOW application_name", r.at(0, 0), app);
    // libpq tracks the ParameterStatus the server sent for this SET: it must be this session's.
    const char* ps = PQparameterStatus(pg_.c, "application_name");
    expect("ParameterStatus application_name", ps ? ps : "<none>", app);
  }

  void extended(int n) {
    std::string nstr = std::to_string(n);
    const char* vals[2] = {token_.c_str(), nstr.c_str()};
    Res r(PQexecParams(pg_.c, "SELECT $1::text, pg_backend_pid(), $2::int + 1", 2, nullptr, vals, nullptr, nullptr, 0));
    if (r.status() != PGRES_TUPLES_OK) return (void)fail(std::string("execParams: ") + PQerrorMessage(pg_.c));
    expect("extended token", r.at(0, 0), token_);
    expect("extended pid", r.at(0, 1), pid_);
    expect("extended param", r.at(0, 2), std::to_string(n + 1));
    // Every session prepared "iso_named": a Bind reaching another backend would still run, with
    // that backend's pid in the result.
    Res p(PQexecPrepared(pg_.c, "iso_named", 2, vals, nullptr, nullptr, 0));
    if (p.status() != PGRES_TUPLES_OK) return (void)fail(std::string("execPrepared: ") + PQerrorMessage(pg_.c));
    expect("prepared result", p.at(0, 0), token_ + ":" + pid_);
    expect("prepared param", p.at(0, 1), std::to_string(n * 2));
  }

  void pipeline(int n) {
    if (!PQenterPipelineMode(pg_.c)) return (void)fail(std::string("enter pipeline: ") + PQerrorMessage(pg_.c));
    std::vector<std::string> ks;
    for (int k = 0; k < kPipelineDepth; ++k) ks.push_back(std::to_string(n * 1000 + k));
    for (int k = 0; k < kPipelineDepth; ++k) {
      const char* vals[2] = {token_.c_str(), ks[k].c_str()};
      if (!PQsendQueryParams(pg_.c, "SELECT $1::text, $2::int, pg_backend_pid()", 2, nullptr, vals, nullptr, nullptr, 0))
        return (void)fail(std::string("pipeline send: ") + PQerrorMessage(pg_.c));
    }
    if (!PQpipelineSync(pg_.c)) return (void)fail(std::string("pipeline sync: ") + PQerrorMessage(pg_.c));
    for (int k = 0; k < kPipelineDepth; ++k) {
      PGresult* raw = PQgetResult(pg_.c);
      if (!raw) return (void)fail("pipeline: result " + std::to_string(k) + " missing");
      Res r(raw);
      if (r.status() != PGRES_TUPLES_OK) return (void)fail(std::string("pipeline: ") + PQresultErrorMessage(r.r));
      expect("pipeline token", r.at(0, 0), token_);
      expect("pipeline order", r.at(0, 1), ks[k]);
      expect("pipeline pid", r.at(0, 2), pid_);
      Res end(PQgetResult(pg_.c));  // the null that ends each query's results
      if (end.r) fail("pipeline: more than one result for query " + std::to_string(k));
    }
    Res sync(PQgetResult(pg_.c));
    if (!sync.r || sync.status() != PGRES_PIPELINE_SYNC) fail("pipeline: no PGRES_PIPELINE_SYNC");
    if (!PQexitPipelineMode(pg_.c)) fail(std::string("exit pipeline: ") + PQerrorMessage(pg_.c));
  }

  void copy(int n) {
    Res t(PQexec(pg_.c, "TRUNCATE iso_copy"));
    if (t.status() != PGRES_COMMAND_OK) return (void)fail(std::string("truncate: ") + PQerrorMessage(pg_.c));
    Res in(PQexec(pg_.c, "COPY iso_copy FROM STDIN"));
    if (in.status() != PGRES_COPY_IN) return (void)fail(std::string("COPY FROM: ") + PQerrorMessage(pg_.c));
    std::string data;
    for (int k = 0; k < kCopyRows; ++k) data += std::to_string(n * 100 + k) + "\t" + token_ + "\n";
    if (PQputCopyData(pg_.c, data.data(), static_cast<int>(data.size())) != 1 || PQputCopyEnd(pg_.c, nullptr) != 1)
      return (void)fail(std::string("COPY data: ") + PQerrorMessage(pg_.c));
    Res done(PQgetResult(pg_.c));
    if (!done.r || done.status() != PGRES_COMMAND_OK) return (void)fail(std::string("COPY FROM end: ") + PQerrorMessage(pg_.c));
    expect("COPY FROM tag", PQcmdTuples(done.r), std::to_string(kCopyRows));
    while (PGresult* extra = PQgetResult(pg_.c)) PQclear(extra);

    Res out(PQexec(pg_.c, "COPY (SELECT k, tok, pg_backend_pid() FROM iso_copy ORDER BY k) TO STDOUT"));
    if (out.status() != PGRES_COPY_OUT) return (void)fail(std::string("COPY TO: ") + PQerrorMessage(pg_.c));
    std::string got;
    char* buf = nullptr;
    int len;
    while ((len = PQgetCopyData(pg_.c, &buf, 0)) > 0) {
      got.append(buf, len);
      PQfreemem(buf);
    }
    if (len == -2) return (void)fail(std::string("COPY TO read: ") + PQerrorMessage(pg_.c));
    Res end(PQgetResult(pg_.c));
    if (!end.r || end.status() != PGRES_COMMAND_OK) fail(std::string("COPY TO end: ") + PQerrorMessage(pg_.c));
    while (PGresult* extra = PQgetResult(pg_.c)) PQclear(extra);
    std::string want;
    for (int k = 0; k < kCopyRows; ++k) want += std::to_string(n * 100 + k) + "\t" + token_ + "\t" + pid_ + "\n";
    if (got != want) fail("COPY TO output differs from the rows this session copied in: '" + got.substr(0, 120) + "'");
  }

  int index_;
  std::string token_;
  uint16_t port_;
  Pg pg_;
  std::string pid_;
  std::vector<std::string> problems_;
};

std::string direct_conninfo() {
  const char* host = std::getenv("PGHOST");
  const char* port = std::getenv("PGPORT");
  return std::string("host=") + (host ? host : "127.0.0.1") + " port=" + (port ? port : "5432") +
         " dbname=postgres user=postgres sslmode=disable";
}

TEST(Isolation, TwoHundredConcurrentSessionsEachSeeOnlyTheirOwnBytes) {
  PredropProcess p;
  PTEST_START(p);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::unique_ptr<Session>> sessions;
  std::set<std::string> tokens;
  for (int i = 0; i < kSessions; ++i) {
    std::string t = random_token(rng);
    ASSERT_TRUE(tokens.insert(t).second);
    sessions.push_back(std::make_unique<Session>(i, t, p.port()));
  }

  // Phase barriers: all connected (the server's view is checked then), then the rounds start at once.
  std::barrier connected(kSessions + 1);
  std::barrier go(kSessions + 1);
  std::atomic<int> connect_failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      Session& s = *sessions[i];
      bool ok = s.connect();
      if (!ok) connect_failures++;
      connected.arrive_and_wait();
      go.arrive_and_wait();
      if (!ok) return;
      for (int n = 0; n < kRounds; ++n) s.round(n);
    });
  }
  connected.arrive_and_wait();

  std::vector<std::string> problems;
  {
    Pg direct;
    direct.c = PQconnectdb(direct_conninfo().c_str());
    if (PQstatus(direct.c) != CONNECTION_OK) {
      problems.push_back(std::string("direct connection: ") + PQerrorMessage(direct.c));
    } else {
      Res r(PQexec(direct.c, "SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE 'iso\\_%'"));
      std::map<std::string, std::string> app_by_pid;
      for (int row = 0; r.status() == PGRES_TUPLES_OK && row < r.rows(); ++row) app_by_pid[r.at(row, 0)] = r.at(row, 1);
      std::set<std::string> pids;
      for (const auto& s : sessions) {
        if (s->pid().empty()) continue;
        if (!pids.insert(s->pid()).second) problems.push_back("backend pid " + s->pid() + " reported by two sessions");
        auto it = app_by_pid.find(s->pid());
        if (it == app_by_pid.end())
          problems.push_back("session token " + s->token() + ": its backend pid " + s->pid() + " is not in pg_stat_activity");
        else if (it->second != "iso_" + s->token())
          problems.push_back("backend pid " + s->pid() + " belongs to '" + it->second + "', not to iso_" + s->token());
      }
      std::printf("# %zu distinct backend pids, %zu iso_ sessions in pg_stat_activity\n", pids.size(), app_by_pid.size());
    }
  }
  go.arrive_and_wait();
  for (auto& t : threads) t.join();
  EXPECT_EQ(connect_failures.load(), 0);

  int with_problems = 0;
  for (const auto& s : sessions) {
    if (s->problems().empty()) continue;
    ++with_problems;
    for (const auto& pr : s->problems())
      if (problems.size() < 30) problems.push_back(pr);
  }
  std::string all;
  for (const auto& pr : problems) all += pr + "\n";
  EXPECT_EQ(with_problems, 0) << all;
  EXPECT_TRUE(problems.empty()) << all;
  EXPECT_TRUE(p.running()) << "predrop " << p.status() << "\n" << p.log();
  std::printf("# %d sessions x %d rounds (simple, SET/SHOW, extended, prepared, %d-deep pipeline, COPY in/out)\n",
              kSessions, kRounds, kPipelineDepth);
}

}  // namespace
}  // namespace ptest
