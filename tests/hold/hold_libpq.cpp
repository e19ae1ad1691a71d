// Destructive statements through predrop over libpq's extended protocol, for tests/hold.
//
//   hold_libpq CONNINFO params      PQexecParams("DROP TABLE xp_params")
//   hold_libpq CONNINFO prepared    PQprepare a DROP once, CREATE + PQexecPrepared it three times
//                                   (prints the OID dropped by each execution: "oid N")
//   hold_libpq CONNINFO pipeline    pipeline mode: INSERT, DROP TABLE xp_pipe, SELECT, one Sync
//   hold_libpq CONNINFO closed      PQexecParams("DROP TABLE guarded.xp_closed"), expects an error
//                                   naming predrop, then in BEGIN: error, 25P02, ROLLBACK
//   hold_libpq CONNINFO cancel SQL  PQsendQuery(SQL), print "sent", wait for a line on stdin, PQcancel;
//                                   prints the error's fields (sqlstate, severity, primary, context);
//                                   behaved: the statement ended in 57014
//   hold_libpq CONNINFO finish SQL  PQsendQuery(SQL), print "sent", wait for a line on stdin, PQfinish
//   hold_libpq CONNINFO pipeline5 SQL  pipeline mode, five Syncs: SQL prepared as s_victim in the first,
//                                   executed in the third between two INSERTs; prints one line per
//                                   result (status, command tag, first value; errors without their text)
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

const char* field(const PGresult* r, int code) {
  const char* v = PQresultErrorField(r, code);
  return v ? v : "(none)";
}

void wait_for_go() {
  std::printf("sent\n");
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) fail("stdin closed before the go line");
}

void cancel(PGconn* c, const char* sql) {
  if (!PQsendQuery(c, sql)) return fail(std::string("PQsendQuery: ") + PQerrorMessage(c));
  wait_for_go();
  PGcancel* k = PQgetCancel(c);
  char err[256];
  if (!k || !PQcancel(k, err, sizeof err)) fail(std::string("PQcancel: ") + err);
  if (k) PQfreeCancel(k);
  bool cancelled = false;
  while (PGresult* r = PQgetResult(c)) {
    if (PQresultStatus(r) == PGRES_FATAL_ERROR) {
      std::printf("sqlstate %s\nseverity %s\nprimary %s\ncontext %s\n", field(r, PG_DIAG_SQLSTATE),
                  field(r, PG_DIAG_SEVERITY_NONLOCALIZED), field(r, PG_DIAG_MESSAGE_PRIMARY), field(r, PG_DIAG_CONTEXT));
      cancelled = std::strcmp(field(r, PG_DIAG_SQLSTATE), "57014") == 0;
    } else {
      std::printf("result %s %s\n", PQresStatus(PQresultStatus(r)), PQcmdStatus(r));
    }
    PQclear(r);
  }
  if (!cancelled) fail("the statement did not end in 57014");
  if (scalar(c, "SELECT 40 + 2") != "42") fail("session unusable after the cancel");
  else std::printf("ok: session usable after the cancel\n");
}

void finish(PGconn* c, const char* sql) {
  if (!PQsendQuery(c, sql)) return fail(std::string("PQsendQuery: ") + PQerrorMessage(c));
  PQflush(c);
  wait_for_go();
  PQfinish(c);
  std::printf("finished\n");
}

void pipeline5(PGconn* c, const char* victim) {
  if (!PQenterPipelineMode(c)) return fail("PQenterPipelineMode");
  int sent = 0;
  auto prepared = [&](const char* name) { sent += PQsendQueryPrepared(c, name, 0, nullptr, nullptr, nullptr, 0); };
  auto params = [&](const char* sql) { sent += PQsendQueryParams(c, sql, 0, nullptr, nullptr, nullptr, nullptr, 0); };
  auto sync = [&] { sent += PQpipelineSync(c); };
  sent += PQsendPrepare(c, "s_victim", victim, 0, nullptr);
  sent += PQsendPrepare(c, "s_log", "INSERT INTO guarded.log VALUES (1)", 0, nullptr);
  sync();
  prepared("s_log");
  params("SELECT 2");
  sync();
  prepared("s_log");
  prepared("s_victim");
  prepared("s_log");
  sync();
  params("SELECT count(*) FROM guarded.log");
  sync();
  prepared("s_log");
  params("SELECT 5");
  sync();
  if (sent != 15) return fail("queueing the pipeline: " + std::string(PQerrorMessage(c)));
  int syncs = 0, nulls = 0;
  while (syncs < 5 && nulls < 100) {
    PGresult* r = PQgetResult(c);
    if (!r) {
      ++nulls;
      continue;
    }
    nulls = 0;
    auto st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      ++syncs;
      std::printf("sync\n");
    } else if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED) {
      std::printf("%s\n", PQresStatus(st));
    } else {
      std::printf("%s %s %s\n", PQresStatus(st), PQcmdStatus(r),
                  PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "-");
    }
    PQclear(r);
  }
  if (syncs < 5) fail("only " + std::to_string(syncs) + " of 5 pipeline syncs: " + PQerrorMessage(c));
  if (!PQexitPipelineMode(c)) fail(std::string("PQexitPipelineMode: ") + PQerrorMessage(c));
  std::printf("log rows %s\n", scalar(c, "SELECT count(*) FROM guarded.log").c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: hold_libpq CONNINFO params|prepared|pipeline|closed|cancel SQL|finish SQL|pipeline5 SQL\n");
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
  else if (mode == "cancel" && argc == 4) cancel(c, argv[3]);
  else if (mode == "finish" && argc == 4) {
    finish(c, argv[3]);
    return failures ? 1 : 0;
  } else if (mode == "pipeline5" && argc == 4) pipeline5(c, argv[3]);
  else {
    std::fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
  }
  PQfinish(c);
  return failures ? 1 : 0;
}
