// A libpq client for the real-client tests: runs scenarios against one conninfo and prints a
// transcript that test_libpq.sh compares between a direct and a proxied run. The transcript holds
// results, statuses and the server's error fields, never PIDs or timings (those go to stderr).
// The program also checks what needs no comparison (COPY checksums in == out, cancel latency < 5 s,
// notification sender PID == the sender's PQbackendPID) and exits 1 when such a check fails.
//
//   libpq_client CONNINFO [scenario...]    scenarios: params prepare pipeline notify cancel copy misc
//   env LIBPQ_COPY_MB (default 100): size of the COPY scenario in MB (10^6 bytes)
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string g_conninfo;
int g_failures = 0;

void out(const std::string& s) { std::fputs((s + "\n").c_str(), stdout); std::fflush(stdout); }
void note(const std::string& s) { std::fputs((s + "\n").c_str(), stderr); }
void check(bool ok, const std::string& what) {
  if (ok) {
    out("check ok: " + what);
  } else {
    out("CHECK FAILED: " + what);
    ++g_failures;
  }
}

[[noreturn]] void die(const std::string& what, PGconn* c = nullptr) {
  std::fprintf(stderr, "libpq_client: %s%s%s\n", what.c_str(), c ? ": " : "", c ? PQerrorMessage(c) : "");
  out("FATAL: " + what + (c ? std::string(": ") + PQerrorMessage(c) : ""));
  std::exit(2);
}

PGconn* connect_or_die() {
  PGconn* c = PQconnectdb(g_conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) die("connect", c);
  return c;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string hex(const char* p, int n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += d[(unsigned char)p[i] >> 4];
    s += d[(unsigned char)p[i] & 15];
  }
  return s;
}

std::string field(const PGresult* r, int code) {
  const char* v = PQresultErrorField(r, code);
  return v ? v : "<none>";
}

// Print a result: status, columns, rows (text; binary columns in hex), command tag, error fields.
void dump(const std::string& label, PGresult* r) {
  if (!r) {
    out(label + ": <null result>");
    return;
  }
  ExecStatusType st = PQresultStatus(r);
  std::string line = label + ": " + PQresStatus(st);
  if (*PQcmdStatus(r)) line += " tag=[" + std::string(PQcmdStatus(r)) + "]";
  if (*PQcmdTuples(r)) line += " tuples=" + std::string(PQcmdTuples(r));
  out(line);
  if (st == PGRES_TUPLES_OK || st == PGRES_SINGLE_TUPLE) {
    std::string cols = "  columns:";
    for (int f = 0; f < PQnfields(r); ++f)
      cols += " " + std::string(PQfname(r, f)) + "/" + std::to_string(PQftype(r, f)) + "/fmt" +
              std::to_string(PQfformat(r, f)) + "/mod" + std::to_string(PQfmod(r, f));
    out(cols);
    int shown = std::min(PQntuples(r), 20);
    for (int t = 0; t < shown; ++t) {
      std::string row = "  row:";
      for (int f = 0; f < PQnfields(r); ++f) {
        if (PQgetisnull(r, t, f)) row += " NULL";
        else if (PQfformat(r, f) == 1) row += " 0x" + hex(PQgetvalue(r, t, f), PQgetlength(r, t, f));
        else row += " [" + std::string(PQgetvalue(r, t, f), PQgetlength(r, t, f)) + "]";
      }
      out(row);
    }
    if (PQntuples(r) > shown) out("  ... " + std::to_string(PQntuples(r)) + " rows");
  }
  if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR) {
    out("  severity=" + field(r, PG_DIAG_SEVERITY_NONLOCALIZED) + " sqlstate=" + field(r, PG_DIAG_SQLSTATE));
    out("  message=" + field(r, PG_DIAG_MESSAGE_PRIMARY));
    out("  detail=" + field(r, PG_DIAG_MESSAGE_DETAIL) + " hint=" + field(r, PG_DIAG_MESSAGE_HINT) +
        " position=" + field(r, PG_DIAG_STATEMENT_POSITION) + " context=" + field(r, PG_DIAG_CONTEXT));
    out("  schema=" + field(r, PG_DIAG_SCHEMA_NAME) + " table=" + field(r, PG_DIAG_TABLE_NAME) +
        " column=" + field(r, PG_DIAG_COLUMN_NAME) + " constraint=" + field(r, PG_DIAG_CONSTRAINT_NAME));
    std::string full = PQresultErrorMessage(r);
    while (!full.empty() && full.back() == '\n') full.pop_back();
    out("  text=" + full);
  }
}

void exec_dump(PGconn* c, const std::string& label, const char* sql) {
  PGresult* r = PQexec(c, sql);
  dump(label, r);
  PQclear(r);
}

// ---------------------------------------------------------------------------------------------
void scenario_params() {
  PGconn* c = connect_or_die();
  {
    const char* vals[4] = {"40", "2", nullptr, "\x01\x02\x00\xff"};
    int lens[4] = {0, 0, 0, 4};
    int fmts[4] = {0, 0, 0, 1};
    Oid types[4] = {23, 0, 25, 17};
    PGresult* r = PQexecParams(c, "SELECT $1::int + $2::int AS sum, $3::text IS NULL AS isnull, $4::bytea AS b, "
                                  "length($4) AS blen, $2 AS untyped",
                               4, types, vals, lens, fmts, 0);
    dump("params text result", r);
    PQclear(r);
    r = PQexecParams(c, "SELECT $1::int + $2::int AS sum, $3::text IS NULL AS isnull, $4::bytea AS b, "
                        "now()::date - now()::date AS zero, 1.5::float8 AS f, 'ünï ☃'::text AS u",
                     4, types, vals, lens, fmts, 1);
    dump("params binary result", r);
    PQclear(r);
  }
  {
    // Parameters as the wrong type, a bad SQL, and many parameters.
    const char* v[1] = {"not a number"};
    PGresult* r = PQexecParams(c, "SELECT $1::int", 1, nullptr, v, nullptr, nullptr, 0);
    dump("params bad value", r);
    PQclear(r);
    r = PQexecParams(c, "SELECT $1::int FROM nowhere_table", 1, nullptr, v, nullptr, nullptr, 0);
    dump("params undefined table", r);
    PQclear(r);
    r = PQexecParams(c, "SELECT $2", 1, nullptr, v, nullptr, nullptr, 0);
    dump("params count mismatch", r);
    PQclear(r);
    std::vector<std::string> store;
    std::vector<const char*> ptrs;
    std::string sql = "SELECT ";
    for (int i = 1; i <= 1000; ++i) {
      store.push_back(std::to_string(i));
      sql += (i > 1 ? "+" : "") + std::string("$") + std::to_string(i) + "::int";
    }
    for (auto& s : store) ptrs.push_back(s.c_str());
    r = PQexecParams(c, sql.c_str(), 1000, nullptr, ptrs.data(), nullptr, nullptr, 0);
    dump("params 1000 parameters", r);
    PQclear(r);
  }
  {
    // A 20 MB parameter and a 20 MB result value.
    std::string big(20 * 1000 * 1000, 'x');
    for (size_t i = 0; i < big.size(); i += 997) big[i] = 'a' + (i % 26);
    const char* v[1] = {big.c_str()};
    PGresult* r = PQexecParams(c, "SELECT length($1), md5($1), $1 AS echo", 1, nullptr, v, nullptr, nullptr, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      out("params 20MB: length=" + std::string(PQgetvalue(r, 0, 0)) + " md5=" + PQgetvalue(r, 0, 1));
      check(PQgetlength(r, 0, 2) == (int)big.size() && std::memcmp(PQgetvalue(r, 0, 2), big.data(), big.size()) == 0,
            "20 MB value echoed back byte-identical");
    } else {
      dump("params 20MB", r);
    }
    PQclear(r);
  }
  PQfinish(c);
}

// ---------------------------------------------------------------------------------------------
void scenario_prepare() {
  PGconn* c = connect_or_die();
  PGresult* r = PQprepare(c, "s1", "SELECT $1::int * 2 AS doubled, $2::text || '!' AS shout, $3 AS infer", 3, nullptr);
  dump("prepare s1", r);
  PQclear(r);
  r = PQdescribePrepared(c, "s1");
  dump("describe s1", r);
  if (PQresultStatus(r) == PGRES_COMMAND_OK) {
    std::string p = "  params:";
    for (int i = 0; i < PQnparams(r); ++i) p += " " + std::to_string(PQparamtype(r, i));
    out(p + " nfields=" + std::to_string(PQnfields(r)));
  }
  PQclear(r);
  for (int i = 1; i <= 3; ++i) {
    std::string a = std::to_string(i * 10), b = "call" + std::to_string(i);
    const char* v[3] = {a.c_str(), b.c_str(), i == 2 ? nullptr : "inferred"};
    r = PQexecPrepared(c, "s1", 3, v, nullptr, nullptr, i == 3 ? 1 : 0);
    dump("exec s1 #" + std::to_string(i), r);
    PQclear(r);
  }
  r = PQprepare(c, "s1", "SELECT 1", 0, nullptr);
  dump("prepare s1 again (duplicate)", r);
  PQclear(r);
  r = PQprepare(c, "bad", "SELECT FROM WHERE", 0, nullptr);
  dump("prepare syntax error", r);
  PQclear(r);
  r = PQexecPrepared(c, "never_prepared", 0, nullptr, nullptr, nullptr, 0);
  dump("exec unknown statement", r);
  PQclear(r);
  // The unnamed statement, replaced each time.
  r = PQprepare(c, "", "SELECT 'unnamed one'", 0, nullptr);
  PQclear(r);
  r = PQexecPrepared(c, "", 0, nullptr, nullptr, nullptr, 0);
  dump("exec unnamed 1", r);
  PQclear(r);
  r = PQprepare(c, "", "SELECT 'unnamed two', $1::int", 1, nullptr);
  PQclear(r);
  const char* v1[1] = {"7"};
  r = PQexecPrepared(c, "", 1, v1, nullptr, nullptr, 0);
  dump("exec unnamed 2", r);
  PQclear(r);
  // A prepared DML statement used in a transaction, and a statement visible in pg_prepared_statements.
  exec_dump(c, "create temp", "CREATE TABLE pt (id int PRIMARY KEY, v text)");
  r = PQprepare(c, "ins", "INSERT INTO pt VALUES ($1, $2) RETURNING id, v", 2, nullptr);
  PQclear(r);
  exec_dump(c, "begin", "BEGIN");
  for (int i = 1; i <= 3; ++i) {
    std::string a = std::to_string(i % 3 == 0 ? 1 : i), b = "v" + std::to_string(i);
    const char* v[2] = {a.c_str(), b.c_str()};
    r = PQexecPrepared(c, "ins", 2, v, nullptr, nullptr, 0);
    dump("insert #" + std::to_string(i), r);
    PQclear(r);
  }
  exec_dump(c, "commit after error", "COMMIT");
  exec_dump(c, "count after rollback", "SELECT count(*) FROM pt");
  exec_dump(c, "pg_prepared_statements", "SELECT name, statement, parameter_types::text FROM pg_prepared_statements ORDER BY name");
  exec_dump(c, "deallocate", "DEALLOCATE s1");
  r = PQexecPrepared(c, "s1", 0, nullptr, nullptr, nullptr, 0);
  dump("exec after deallocate", r);
  PQclear(r);
  // Async prepare + exec.
  if (!PQsendPrepare(c, "async1", "SELECT $1::int + 1", 1, nullptr)) die("sendPrepare", c);
  while ((r = PQgetResult(c))) { dump("async prepare", r); PQclear(r); }
  const char* v2[1] = {"41"};
  if (!PQsendQueryPrepared(c, "async1", 1, v2, nullptr, nullptr, 0)) die("sendQueryPrepared", c);
  while ((r = PQgetResult(c))) { dump("async exec", r); PQclear(r); }
  PQfinish(c);
}

// ---------------------------------------------------------------------------------------------
void drain_pipeline(PGconn* c, int syncs, const std::string& label) {
  int seen = 0, n = 0;
  while (seen < syncs) {
    PGresult* r = PQgetResult(c);
    if (!r) continue;  // end of one query's results
    ++n;
    if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) ++seen;
    dump(label + " #" + std::to_string(n), r);
    PQclear(r);
  }
}

void scenario_pipeline() {
  PGconn* c = connect_or_die();
  if (!PQenterPipelineMode(c)) die("enter pipeline", c);
  out(std::string("pipeline status: ") + (PQpipelineStatus(c) == PQ_PIPELINE_ON ? "on" : "off"));
  auto q = [&](const char* sql, int n = 0, const char* const* vals = nullptr) {
    if (!PQsendQueryParams(c, sql, n, nullptr, vals, nullptr, nullptr, 0)) die(std::string("send ") + sql, c);
  };
  q("CREATE TABLE pl (id int PRIMARY KEY, v text)");
  const char* a[2] = {"1", "one"};
  q("INSERT INTO pl VALUES ($1, $2)", 2, a);
  q("SELECT id, v FROM pl");
  if (!PQpipelineSync(c)) die("sync 0", c);
  q("INSERT INTO pl VALUES (5, 'rolled back with the segment')");
  q("SELECT 1/0 AS boom");                     // error: the rest up to the sync is aborted
  q("INSERT INTO pl VALUES (2, 'skipped')");
  q("SELECT 'skipped too'");
  if (!PQpipelineSync(c)) die("sync 1", c);
  q("SELECT count(*) AS after_error FROM pl");  // after the sync: runs
  if (!PQsendPrepare(c, "pp", "SELECT $1::int * 3 AS tripled", 1, nullptr)) die("sendPrepare", c);
  const char* v[1] = {"14"};
  if (!PQsendQueryPrepared(c, "pp", 1, v, nullptr, nullptr, 0)) die("sendQueryPrepared", c);
  if (!PQsendDescribePrepared(c, "pp")) die("sendDescribePrepared", c);
  if (!PQpipelineSync(c)) die("sync 2", c);
  // Explicit transaction spanning syncs, with an error inside.
  q("BEGIN");
  q("INSERT INTO pl VALUES (3, 'in tx')");
  if (!PQpipelineSync(c)) die("sync 3", c);
  q("INSERT INTO pl VALUES (3, 'duplicate')");
  q("SELECT 'aborted in tx'");
  if (!PQpipelineSync(c)) die("sync 4", c);
  q("ROLLBACK");
  q("SELECT array_agg(id ORDER BY id)::text AS ids FROM pl");
  if (!PQpipelineSync(c)) die("sync 5", c);
  drain_pipeline(c, 6, "pipeline");
  // A deep pipeline: 2000 queries, one sync, to exercise buffering in both directions.
  std::vector<std::string> nums;
  for (int i = 0; i < 2000; ++i) nums.push_back(std::to_string(i));
  for (int i = 0; i < 2000; ++i) {
    const char* vv[1] = {nums[i].c_str()};
    q("SELECT $1::int AS n, repeat('p', 100) AS pad", 1, vv);
  }
  if (!PQpipelineSync(c)) die("sync deep", c);
  long sum = 0, results = 0;
  for (;;) {
    PGresult* r = PQgetResult(c);
    if (!r) continue;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) { PQclear(r); break; }
    if (st == PGRES_TUPLES_OK) { sum += std::atol(PQgetvalue(r, 0, 0)); ++results; }
    else dump("deep pipeline unexpected", r);
    PQclear(r);
  }
  out("deep pipeline: results=" + std::to_string(results) + " sum=" + std::to_string(sum));
  check(results == 2000 && sum == 1999L * 2000 / 2, "deep pipeline returned all 2000 results");
  if (!PQexitPipelineMode(c)) die("exit pipeline", c);
  exec_dump(c, "after pipeline", "SELECT 'normal mode again'");
  PQfinish(c);
}

// ---------------------------------------------------------------------------------------------
bool wait_readable(PGconn* c, double seconds) {
  pollfd p{PQsocket(c), POLLIN, 0};
  return poll(&p, 1, (int)(seconds * 1000)) > 0;
}

void scenario_notify() {
  PGconn* a = connect_or_die();
  PGconn* b = connect_or_die();
  // The PIDs a client learns from BackendKeyData must be the real backend PIDs.
  PGresult* r = PQexec(a, "SELECT pg_backend_pid()");
  check(PQresultStatus(r) == PGRES_TUPLES_OK && std::atoi(PQgetvalue(r, 0, 0)) == PQbackendPID(a),
        "PQbackendPID equals pg_backend_pid() (BackendKeyData relayed)");
  PQclear(r);
  exec_dump(a, "listen", "LISTEN chan_a");
  exec_dump(a, "listen quoted", "LISTEN \"Chan B\"");
  exec_dump(b, "notify", "NOTIFY chan_a, 'hello from b'");
  exec_dump(b, "notify unheard", "NOTIFY nobody_listens, 'x'");
  exec_dump(b, "begin", "BEGIN");
  exec_dump(b, "notify in tx 1", "SELECT pg_notify('Chan B', 'tx payload ☃')");
  exec_dump(b, "notify in tx 2", "NOTIFY chan_a");
  exec_dump(b, "notify in tx dup", "NOTIFY chan_a");  // folded with the previous one
  exec_dump(b, "commit", "COMMIT");
  std::string big(7000, 'n');
  std::string sql = "NOTIFY chan_a, '" + big + "'";
  exec_dump(b, "notify 7000 bytes", sql.c_str());
  int got = 0;
  double deadline = now_s() + 5;
  while (got < 4 && now_s() < deadline) {
    if (!wait_readable(a, deadline - now_s())) break;
    if (!PQconsumeInput(a)) die("consumeInput", a);
    while (PGnotify* n = PQnotifies(a)) {
      ++got;
      std::string extra = n->extra;
      out("notification: channel=[" + std::string(n->relname) + "] payload=[" +
          (extra.size() > 60 ? extra.substr(0, 20) + "...(" + std::to_string(extra.size()) + " bytes)" : extra) + "]");
      check(n->be_pid == PQbackendPID(b), "notification sender pid is b's backend pid");
      PQfreemem(n);
    }
  }
  out("notifications received: " + std::to_string(got));
  // A notification arriving while the listener is idle, then picked up by its next query.
  exec_dump(b, "notify while idle", "NOTIFY chan_a, 'idle'");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  exec_dump(a, "query on listener", "SELECT 'listener query'");
  while (PGnotify* n = PQnotifies(a)) {
    out("notification after query: [" + std::string(n->relname) + "] [" + n->extra + "]");
    PQfreemem(n);
  }
  exec_dump(a, "unlisten", "UNLISTEN *");
  PQfinish(a);
  PQfinish(b);
}

// ---------------------------------------------------------------------------------------------
void scenario_cancel() {
  PGconn* c = connect_or_die();
  for (int round = 1; round <= 2; ++round) {
    if (!PQsendQuery(c, "SELECT pg_sleep(30)")) die("send sleep", c);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    PGcancel* cc = PQgetCancel(c);
    char err[256] = {0};
    double t0 = now_s();
    int ok = PQcancel(cc, err, sizeof err);
    PQfreeCancel(cc);
    out("cancel round " + std::to_string(round) + ": PQcancel returned " + std::to_string(ok) + (ok ? "" : std::string(" err=") + err));
    PGresult* r;
    std::vector<PGresult*> results;
    while ((r = PQgetResult(c))) results.push_back(r);
    double elapsed = now_s() - t0;
    note("cancel round " + std::to_string(round) + ": result after " + std::to_string(elapsed) + " s");
    for (auto* x : results) { dump("cancelled query", x); PQclear(x); }
    check(elapsed < 5.0, "cancelled query returned within 5 s");
    exec_dump(c, "connection usable after cancel", "SELECT 'still alive'");
  }
  // Cancel with nothing running: harmless; cancel of a transaction-held query leaves the tx aborted.
  PGcancel* cc = PQgetCancel(c);
  char err[256] = {0};
  out("idle cancel returned " + std::to_string(PQcancel(cc, err, sizeof err)));
  PQfreeCancel(cc);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  exec_dump(c, "after idle cancel", "SELECT 'unaffected'");
  exec_dump(c, "begin", "BEGIN");
  if (!PQsendQuery(c, "SELECT pg_sleep(30)")) die("send sleep", c);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cc = PQgetCancel(c);
  PQcancel(cc, err, sizeof err);
  PQfreeCancel(cc);
  PGresult* r;
  while ((r = PQgetResult(c))) { dump("cancelled in tx", r); PQclear(r); }
  exec_dump(c, "in aborted tx", "SELECT 1");
  exec_dump(c, "rollback", "ROLLBACK");
  // statement_timeout produces the same SQLSTATE family from the server side.
  exec_dump(c, "statement_timeout", "SET statement_timeout = '200ms'");
  exec_dump(c, "timed out", "SELECT pg_sleep(5)");
  PQfinish(c);
}

// ---------------------------------------------------------------------------------------------
struct Md5 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Md5() { EVP_DigestInit_ex(ctx, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx); }
  void add(const char* p, size_t n) { EVP_DigestUpdate(ctx, p, n); }
  std::string hexdigest() {
    unsigned char d[16];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, d, &n);
    return hex((const char*)d, (int)n);
  }
};

void scenario_copy() {
  long mb = std::getenv("LIBPQ_COPY_MB") ? std::atol(std::getenv("LIBPQ_COPY_MB")) : 100;
  const long target = mb * 1000 * 1000;
  PGconn* c = connect_or_die();
  exec_dump(c, "create", "CREATE UNLOGGED TABLE copy_t (id bigint, payload text, n numeric)");
  PGresult* r = PQexec(c, "COPY copy_t FROM STDIN");
  dump("copy in start", r);
  PQclear(r);
  // Deterministic rows of varying length with escapes, unicode and NULLs.
  Md5 in_md5;
  std::string buf, row;
  long sent = 0, rows = 0;
  double t0 = now_s();
  while (sent < target) {
    ++rows;
    row = std::to_string(rows) + "\t";
    if (rows % 1000 == 0) row += "\\N";
    else {
      row += "r" + std::to_string(rows * 7919 % 100003) + " tab\\there ü ";
      row.append(20 + rows % 80, (char)('a' + rows % 26));
    }
    row += "\t" + std::to_string(rows % 9973) + "." + std::to_string(rows % 100) + "\n";
    buf += row;
    if (buf.size() >= 65536) {
      if (PQputCopyData(c, buf.data(), (int)buf.size()) != 1) die("putCopyData", c);
      in_md5.add(buf.data(), buf.size());
      sent += buf.size();
      buf.clear();
    }
  }
  if (!buf.empty()) {
    if (PQputCopyData(c, buf.data(), (int)buf.size()) != 1) die("putCopyData", c);
    in_md5.add(buf.data(), buf.size());
    sent += buf.size();
  }
  if (PQputCopyEnd(c, nullptr) != 1) die("putCopyEnd", c);
  while ((r = PQgetResult(c))) { dump("copy in end", r); PQclear(r); }
  double t_in = now_s() - t0;
  std::string md5_in = in_md5.hexdigest();
  out("copy in: rows=" + std::to_string(rows) + " bytes=" + std::to_string(sent) + " md5=" + md5_in);
  note("copy in: " + std::to_string(sent / 1e6) + " MB in " + std::to_string(t_in) + " s");

  // Out, in the order it went in (sort in memory; no synchronized scans).
  exec_dump(c, "work_mem", "SET work_mem = '512MB'");
  r = PQexec(c, "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT");
  dump("copy out start", r);
  PQclear(r);
  Md5 out_md5;
  long got = 0, chunks = 0;
  t0 = now_s();
  for (;;) {
    char* p = nullptr;
    int n = PQgetCopyData(c, &p, 0);
    if (n == -1) break;
    if (n == -2) die("getCopyData", c);
    out_md5.add(p, n);
    got += n;
    ++chunks;
    PQfreemem(p);
  }
  while ((r = PQgetResult(c))) { dump("copy out end", r); PQclear(r); }
  double t_out = now_s() - t0;
  std::string md5_out = out_md5.hexdigest();
  out("copy out: bytes=" + std::to_string(got) + " md5=" + md5_out);
  note("copy out: " + std::to_string(got / 1e6) + " MB in " + std::to_string(t_out) + " s, " + std::to_string(chunks) + " rows");
  check(got == sent && md5_out == md5_in, "COPY OUT returned the COPY IN data byte-identical (md5)");

  // Binary COPY of a slice, and server-side checksums of what it stored.
  exec_dump(c, "server checksum", "SELECT count(*), count(payload), sum(length(payload)), sum(n) FROM copy_t");
  r = PQexec(c, "COPY (SELECT * FROM copy_t WHERE id <= 50000 ORDER BY id) TO STDOUT WITH (FORMAT binary)");
  PQclear(r);
  Md5 bin_md5;
  long bin = 0;
  for (;;) {
    char* p = nullptr;
    int n = PQgetCopyData(c, &p, 0);
    if (n < 0) break;
    bin_md5.add(p, n);
    bin += n;
    PQfreemem(p);
  }
  while ((r = PQgetResult(c))) { dump("binary copy out end", r); PQclear(r); }
  out("binary copy out: bytes=" + std::to_string(bin) + " md5=" + bin_md5.hexdigest());

  // COPY IN aborted by the client, and COPY IN with a bad row: the server's errors.
  r = PQexec(c, "COPY copy_t FROM STDIN");
  PQclear(r);
  PQputCopyData(c, "1\tx\t1\n", 6);
  PQputCopyEnd(c, "client gave up");
  while ((r = PQgetResult(c))) { dump("copy in aborted by client", r); PQclear(r); }
  r = PQexec(c, "COPY copy_t FROM STDIN");
  PQclear(r);
  const char bad[] = "1\tok\t1\nnope\tbad\t2\n";
  PQputCopyData(c, bad, sizeof bad - 1);
  PQputCopyEnd(c, nullptr);
  while ((r = PQgetResult(c))) { dump("copy in bad row", r); PQclear(r); }
  exec_dump(c, "count unchanged", "SELECT count(*) FROM copy_t");
  exec_dump(c, "drop", "DROP TABLE copy_t");
  PQfinish(c);
}

// ---------------------------------------------------------------------------------------------
void notice_receiver(void* arg, const PGresult* r) {
  auto* log = static_cast<std::vector<std::string>*>(arg);
  log->push_back(field(r, PG_DIAG_SEVERITY_NONLOCALIZED) + " " + field(r, PG_DIAG_SQLSTATE) + " " +
                 field(r, PG_DIAG_MESSAGE_PRIMARY) + " | detail=" + field(r, PG_DIAG_MESSAGE_DETAIL));
}

void scenario_misc() {
  PGconn* c = connect_or_die();
  out("protocol version: " + std::to_string(PQprotocolVersion(c)));
  out("server version: " + std::to_string(PQserverVersion(c)));
  for (const char* p : {"server_version", "server_encoding", "client_encoding", "application_name", "DateStyle",
                        "IntervalStyle", "integer_datetimes", "standard_conforming_strings", "TimeZone",
                        "is_superuser", "session_authorization", "in_hot_standby"}) {
    const char* v = PQparameterStatus(c, p);
    out(std::string("parameter ") + p + " = " + (v ? v : "<unset>"));
  }
  exec_dump(c, "set application_name", "SET application_name = 'libpq client'");
  out(std::string("parameter application_name after SET = ") + (PQparameterStatus(c, "application_name") ?: "<unset>"));
  exec_dump(c, "set DateStyle", "SET DateStyle = 'SQL, DMY'");
  out(std::string("parameter DateStyle after SET = ") + (PQparameterStatus(c, "DateStyle") ?: "<unset>"));
  std::vector<std::string> notices;
  PQsetNoticeReceiver(c, notice_receiver, &notices);
  exec_dump(c, "raise notices",
            "DO $$ BEGIN RAISE NOTICE 'n1 %', 1; RAISE WARNING 'w1' USING DETAIL = 'dd'; "
            "RAISE NOTICE 'n2' USING ERRCODE = '01000'; END $$");
  exec_dump(c, "drop missing", "DROP TABLE IF EXISTS surely_missing");
  for (auto& n : notices) out("notice: " + n);
  exec_dump(c, "empty query", "");
  exec_dump(c, "only a comment", "-- nothing");
  exec_dump(c, "multi statement", "SELECT 1 AS a; SELECT 2 AS b; SELECT 3 AS c");
  exec_dump(c, "multi statement with error", "SELECT 1; SELECT 1/0; SELECT 3");
  exec_dump(c, "many rows", "SELECT count(*), sum(g), md5(string_agg(g::text, ',')) FROM generate_series(1, 200000) g");
  // 100k rows delivered to the client, row by row.
  if (!PQsendQuery(c, "SELECT g, md5(g::text) FROM generate_series(1, 100000) g")) die("send", c);
  if (!PQsetSingleRowMode(c)) die("single row mode", c);
  long n = 0;
  Md5 m;
  PGresult* r;
  while ((r = PQgetResult(c))) {
    if (PQresultStatus(r) == PGRES_SINGLE_TUPLE) {
      ++n;
      m.add(PQgetvalue(r, 0, 1), PQgetlength(r, 0, 1));
    } else {
      dump("single row mode end", r);
    }
    PQclear(r);
  }
  out("single row mode: rows=" + std::to_string(n) + " md5=" + m.hexdigest());
  // A big result in one go.
  r = PQexec(c, "SELECT repeat(md5(g::text), 50) FROM generate_series(1, 20000) g");
  Md5 m2;
  for (int i = 0; i < PQntuples(r); ++i) m2.add(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
  out("big result: rows=" + std::to_string(PQntuples(r)) + " md5=" + m2.hexdigest());
  PQclear(r);
  // Transaction status as libpq sees it.
  auto ts = [&](const char* label) {
    static const std::map<int, std::string> names = {{PQTRANS_IDLE, "idle"}, {PQTRANS_INTRANS, "intrans"},
                                                     {PQTRANS_INERROR, "inerror"}, {PQTRANS_ACTIVE, "active"}};
    out(std::string("transaction status ") + label + ": " + names.at(PQtransactionStatus(c)));
  };
  ts("start");
  exec_dump(c, "begin", "BEGIN");
  ts("in tx");
  exec_dump(c, "error", "SELECT nope");
  ts("after error");
  exec_dump(c, "rollback", "ROLLBACK");
  ts("after rollback");
  // A FATAL from the server: the connection is gone, and libpq says so.
  // (Only the status: whether libpq reads the FATAL before it sees EOF is a race even when direct.)
  r = PQexec(c, "SELECT pg_terminate_backend(pg_backend_pid())");
  out(std::string("terminate self: ") + PQresStatus(PQresultStatus(r)));
  PQclear(r);
  out(std::string("status after terminate: ") + (PQstatus(c) == CONNECTION_OK ? "ok" : "bad"));
  PQfinish(c);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONNINFO [params|prepare|pipeline|notify|cancel|copy|misc...]\n", argv[0]);
    return 2;
  }
  g_conninfo = argv[1];
  std::map<std::string, std::function<void()>> scenarios = {
      {"params", scenario_params}, {"prepare", scenario_prepare}, {"pipeline", scenario_pipeline},
      {"notify", scenario_notify}, {"cancel", scenario_cancel},   {"copy", scenario_copy},
      {"misc", scenario_misc}};
  std::vector<std::string> run;
  for (int i = 2; i < argc; ++i) run.push_back(argv[i]);
  if (run.empty()) run = {"params", "prepare", "pipeline", "notify", "cancel", "copy", "misc"};
  for (auto& s : run) {
    auto it = scenarios.find(s);
    if (it == scenarios.end()) {
      std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
      return 2;
    }
    out("=== " + s);
    it->second();
  }
  out(g_failures ? "libpq_client: " + std::to_string(g_failures) + " check(s) failed" : "libpq_client: done");
  return g_failures ? 1 : 0;
}
