#!/usr/bin/python3
"""libpq's extended protocol through predrop (tests/hold/hold_libpq.cpp): PQexecParams of a DROP,
a PQprepare'd DROP executed three times (a snapshot at each execution, of that execution's table),
pipeline mode with a DROP between other statements, and fail closed over the extended protocol.
"""
import os
import re
import subprocess

import holdlib

CONFIG = """
rules:
  - {schema: "guarded", on_failure: closed}
"""


def run(h, mode):
    exe = os.environ.get("HOLD_LIBPQ")
    if not exe:
        h.fail("HOLD_LIBPQ unset (ctest sets it to the hold_libpq target)")
        return None
    r = subprocess.run([exe, h.proxy_conninfo(), mode], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    print("# hold_libpq %s (exit %d):\n%s" % (mode, r.returncode, "\n".join("#   " + l for l in r.stdout.splitlines())))
    h.check(r.returncode == 0, "hold_libpq %s: every step behaved" % mode)
    return r.stdout


def test(h):
    h.exec("CREATE TABLE xp_params (a int, b text); CREATE TABLE xp_pipe (p int, q int, r int);"
           "CREATE TABLE xp_log (n int); CREATE SCHEMA guarded; CREATE TABLE guarded.xp_closed (a int); ANALYZE;")
    h.start_predrop("--hold-timeout-ms", "10000")

    o_params = h.oid("public.xp_params")
    run(h, "params")
    h.check(not h.exists("public.xp_params"), "PQexecParams: xp_params dropped")
    h.check_event("public", "xp_params", "written", "dropped", oid=o_params)

    out = run(h, "prepared") or ""
    oids = [int(x) for x in re.findall(r"^oid (\d+)$", out, re.M)]
    h.check(len(oids) == 3 and len(set(oids)) == 3, "prepared DROP executed three times on three tables", oids)
    for i, oid in enumerate(oids):
        snaps = h.snapshots("table_oid = %s", (oid,))
        h.check(len(snaps) == 1, "PQexecPrepared #%d: one snapshot of that execution's table (oid %d)" % (i + 1, oid),
                len(snaps))
        h.check_event("public", "xp_prep", "written", "dropped", oid=oid, label="xp_prep execution #%d" % (i + 1))

    o_pipe = h.oid("public.xp_pipe")
    out = run(h, "pipeline") or ""
    h.check("count 2" in out, "pipeline: the statements after the held DROP ran in order (count 2)")
    h.check(not h.exists("public.xp_pipe"), "pipeline: xp_pipe dropped")
    snaps = h.snapshots("table_oid = %s", (o_pipe,))
    h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == ["p", "q", "r"], "pipeline: xp_pipe snapshotted",
            [h.snapshot_columns(s) for s in snaps])
    h.check_event("public", "xp_pipe", "written", "dropped", oid=o_pipe)

    h.check_captured_before_drop(h.truth(), "extended protocol: ")

    # fail closed over the extended protocol: slow store, closed rule
    h.stop_predrop()
    h.start_predrop("--hold-timeout-ms", "500", config=CONFIG)
    h.exec("CREATE FUNCTION predrop.hold_test_slow() RETURNS trigger LANGUAGE plpgsql AS "
           "$f$BEGIN PERFORM pg_sleep(5); RETURN NEW; END$f$;"
           "CREATE TRIGGER hold_test_slow BEFORE INSERT ON predrop.schema_snapshots "
           "FOR EACH ROW EXECUTE FUNCTION predrop.hold_test_slow();", db=h.store_db)
    out = run(h, "closed") or ""
    h.check("guarded.xp_closed" in out, "extended protocol refusal names the table guarded.xp_closed",
            re.findall(r"^refusal: .*$", out, re.M))
    h.check(h.exists("guarded.xp_closed"), "fail closed (extended): guarded.xp_closed still exists")


if __name__ == "__main__":
    holdlib.main(test, "extended")
