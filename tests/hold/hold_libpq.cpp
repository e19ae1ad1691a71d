// Destructive statements through predrop over libpq's extended protocol, for tests/hold.
//
//   hold_libpq CONNINFO params      PQexecParams("DROP TABLE xp_params")
//   hold_libpq CONNINFO prepared    PQprepare a DROP once, CREATE + PQexecPrepared it three times
//                                   (prints the OID dropped by each execution: "oid N")
//   hold_libpq CONNINFO pipeline    pipeline mode: INSERT, DROP TABLE xp_pipe, SELECT, one Sync
//   hold_libpq CONNINFO closed      PQexecParams("DROP TABLE guarded.xp_closed"), expects an error
//                                   naming predrop, then in BEGIN: error, 25P02, ROLLBACK
//
// Prints what it did, one line per step; exits 0 when every step behaved as described, 1 otherwise.
#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  ++failures;
}

bool ok_result(PGresult* r, const char* what) {
  auto st = PQresultStatus(r);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    std::printf("ok: %s -> %s %s\n", what, PQresStatus(st), PQcmdStatus(r));
    return true;
  }
  fail(std::string(what) + ": " + PQresStatus(st) + " " + PQresultErrorMessage(r));
  return false;
}

void exec_ok(PGconn* c, const char* sql) {
  PGresult* r = PQexec(c, sql);
  ok_result(r, sql);
  PQclear(r);
}

std::string scalar(PGconn* c, const char* sql) {
  PGresult* r = PQexec(c, sql);
  std::string v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  return v;
}

void params(PGconn* c) {
  PGresult* r = PQexecParams(c, "DROP TABLE xp_params", 0, nullptr, nullptr, nullptr, nullptr, 0);
  ok_result(r, "PQexecParams(DROP TABLE xp_params)");
  PQclear(r);
}

void prepared(PGconn* c) {
  PGresult* r = PQprepare(c, "drop_it", "DROP TABLE xp_prep", 0, nullptr);
  ok_result(r, "PQprepare(drop_it, DROP TABLE xp_prep)");
  PQclear(r);
  for (int i = 0; i < 3; ++i) {
    exec_ok(c, "CREATE TABLE xp_prep (a int, b text)");
    exec_ok(c, "INSERT INTO xp_prep SELECT g, g::text FROM generate_series(1, 10) g");
    exec_ok(c, "ANALYZE xp_prep");
    std::string oid = scalar(c, "SELECT 'xp_prep'::regclass::oid");
    std::printf("oid %s\n", oid.c_str());
    std::fflush(stdout);
    r = PQexecPrepared(c, "drop_it", 0, nullptr, nullptr, nullptr, 0);
    ok_result(r, "PQexecPrepared(drop_it)");
    PQclear(r);
  }
}

void pipeline(PGconn* c) {
  if (!PQenterPipelineMode(c)) return fail("PQenterPipelineMode");
  const char* sqls[] = {"INSERT INTO xp_log VALUES (1)", "DROP TABLE xp_pipe", "INSERT INTO xp_log VALUES (2)",
                        "SELECT count(*) FROM xp_log"};
  for (const char* s : sqls)
    if (!PQsendQueryParams(c, s, 0, nullptr, nullptr, nullptr, nullptr, 0)) return fail(std::string("send ") + s);
  if (!PQpipelineSync(c)) return fail("PQpipelineSync");
  for (const char* s : sqls) {
    PGresult* r = PQgetResult(c);
    if (!r) return fail(std::string("no result for ") + s);
    if (ok_result(r, s) && std::strncmp(s, "SELECT", 6) == 0) std::printf("count %s\n", PQgetvalue(r, 0, 0));
    PQclear(r);
    r = PQgetResult(c);  // NULL ends each query's results
    if (r) {
      fail(std::string("extra result after ") + s);
      PQclear(r);
    }
  }
  PGresult* r = PQgetResult(c);
  if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) fail(std::string("expected PIPELINE_SYNC, got ") + PQresStatus(PQresultStatus(r)));
  else std::printf("ok: pipeline sync\n");
  PQclear(r);
  if (!PQexitPipelineMode(c)) fail(std::string("PQexitPipelineMode: ") + PQerrorMessage(c));
}

void closed(PGconn* c) {
  PGresult* r = PQexecParams(c, "DROP TABLE guarded.xp_closed", 0, nullptr, nullptr, nullptr, nullptr, 0);
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  std::string msg = PQresultErrorMessage(r);
  std::printf("refusal: %s %s\n", state ? state : "-", msg.c_str());
  if (PQresultStatus(r) != PGRES_FATAL_ERROR) fail("extended-protocol DROP in a closed schema was not refused");
  else if (msg.find("predrop") == std::string::npos) fail("the refusal does not name predrop");
  PQclear(r);
  if (scalar(c, "SELECT 41 + 1") != "42") fail("session unusable after the refusal");
  else std::printf("ok: session usable after refusal\n");
  exec_ok(c, "BEGIN");
  r = PQexecParams(c, "DROP TABLE guarded.xp_closed", 0, nullptr, nullptr, nullptr, nullptr, 0);
  if (PQresultStatus(r) != PGRES_FATAL_ERROR) fail("in BEGIN: not refused");
  PQclear(r);
  r = PQexecParams(c, "SELECT 1", 0, nullptr, nullptr, nullptr, nullptr, 0);
  state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (!state || std::string(state) != "25P02") fail(std::string("in BEGIN: next statement gave ") + (state ? state : "no error"));
  else std::printf("ok: 25P02 after the refusal in BEGIN\n");
  PQclear(r);
  exec_ok(c, "ROLLBACK");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hold_libpq CONNINFO params|prepared|pipeline|closed\n");
    return 2;
  }
  PGconn* c = PQconnectdb(argv[1]);
  if (PQstatus(c) != CONNECTION_OK) {
    std::printf("FAIL: connect: %s\n", PQerrorMessage(c));
    return 1;
  }
  std::string mode = argv[2];
  if (mode == "params") params(c);
  else if (mode == "prepared") prepared(c);
  else if (mode == "pipeline") pipeline(c);
  else if (mode == "closed") closed(c);
  else {
    std::fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
  }
  PQfinish(c);
  return failures ? 1 : 0;
}
