#!/usr/bin/python3
"""No secret in logs, ledger, snapshots, /metrics, /drops or check-config output.

Through predrop, with holds on, a client sets passwords (CREATE USER … PASSWORD, ALTER ROLE … PASSWORD)
and runs destructive statements whose text carries the secret in string literals of every kind, in
comments and in utility statements pg_query_normalize does not rewrite (COMMENT ON … IS '…').
predrop stores the normalised statement text (literals replaced by $n, comments dropped; names stay):
the secret must appear nowhere, with text and JSON logs at trace level. The capture and store
passwords, given through the environment and a conninfo_file, must not appear either."""
import json
import os
import secrets
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.environ.get("PREDROP_SOURCE_DIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "hold"))
import holdlib  # noqa: E402

SECRET = "S3cret-" + secrets.token_hex(8)
CAPTURE_PW = "S3cret-capture-" + secrets.token_hex(6)
STORE_PW = "S3cret-store-" + secrets.token_hex(6)
ALL_SECRETS = (SECRET, CAPTURE_PW, STORE_PW)
# Startup parameters are logged before authentication: they must not forge lines or break JSON.
FORGED = '2026-01-01 00:00:00.000 critical FORGED {"level":"critical","msg":"FORGED"}'
HOSTILE_APP = 'app"\\}\n' + FORGED + '\r\x1b[31m\xff'


def statements(tag, role):
    s = SECRET
    return [
        "CREATE USER %s PASSWORD '%s'" % (role, s),
        "ALTER ROLE %s PASSWORD '%s'" % (role, s),
        "ALTER ROLE %s WITH LOGIN ENCRYPTED PASSWORD E'%s'" % (role, s),
        "DROP TABLE %s_a; SELECT '%s'" % (tag, s),
        "DROP TABLE %s_b /* %s */" % (tag, s),
        "-- %s\nDROP TABLE %s_c" % (s, tag),
        "COMMENT ON TABLE %s_keep IS '%s'; DROP TABLE %s_d" % (tag, s, tag),
        "DROP TABLE %s_e; SELECT $q$%s$q$, U&'%s', E'\\x41%s'" % (tag, s, s, s),
        "ALTER TABLE %s_f ALTER COLUMN b TYPE text USING b || '%s'" % (tag, s),
        "TRUNCATE %s_g; SELECT length('%s')" % (tag, s),
        "DO $$BEGIN PERFORM '%s'; END$$" % s,
        # A parse error: relayed untouched, never classified or recorded.
        "DROP TABLE %s_keep; SELECT '%s' FROM WHERE" % (tag, s),
    ]


def run_set(h, tag, role):
    h.exec(";".join("CREATE TABLE %s_%s (a int, b int)" % (tag, x) for x in "abcdefg") +
           "; CREATE TABLE %s_keep (a int); INSERT INTO %s_a SELECT g, g FROM generate_series(1, 20) g; ANALYZE"
           % (tag, tag))
    for sql in statements(tag, role):
        r = h.psql(sql)  # -c: one Query message, several statements in it
        print("# %s -> rc %d" % (sql.replace(SECRET, "<secret>").replace("\n", " ")[:90], r.rc))
    gone = [t for t in ("a", "b", "c", "d", "e", "g") if h.exists("public.%s_%s" % (tag, t))]
    h.check(gone == ["g"], "%s: the destructive statements ran (only the truncated table is left)" % tag, gone)
    h.check(h.exists("public.%s_keep" % tag), "%s: the statement with a parse error did not run" % tag)
    ok = h.q("SELECT rolpassword IS NOT NULL AND rolpassword NOT LIKE %s FROM pg_authid WHERE rolname = %s",
             ("%" + SECRET + "%", role))
    h.check(ok == [(True,)], "%s: the role's password was set through predrop (a SCRAM verifier)" % tag, ok)


def grep(h, label, text):
    hits = [s for s in ALL_SECRETS if s in text]
    h.check(not hits, "%s: no secret in %d bytes" % (label, len(text)),
            "found %s" % ", ".join(("the client's secret" if x == SECRET else "a conninfo password") for x in hits))
    return not hits


def test(h):
    roles = []
    conninfo_file = os.path.join(h.work, "store.conninfo")
    with open(conninfo_file, "w") as f:
        f.write("host=%s port=%d dbname=%s user=postgres password=%s\n" % (h.host, h.port, h.store_db, STORE_PW))
    env = {"PREDROP_CAPTURE_CONNINFO": "host=%s port=%d user=postgres password=%s" % (h.host, h.port, CAPTURE_PW)}
    try:
        for fmt in ("text", "json"):
            config = ("logging:\n  format: %s\n  level: trace\nstore:\n  conninfo_file: %s\n" % (fmt, conninfo_file))
            h.start_predrop("--hold-timeout-ms", "10000", capture=False, store=False, config=config, env=env)
            tag = "sec_%s" % fmt
            role = "sec_role_%s_%s" % (fmt, h.db.split("_", 2)[2])
            roles.append(role)
            run_set(h, tag, role)
            c = holdlib.psycopg2.connect(h.proxy_conninfo(), application_name=HOSTILE_APP)
            c.close()
            try:
                holdlib.psycopg2.connect(host=h.host, port=h.p.port, dbname=h.db, user='no"such\n' + FORGED).close()
            except holdlib.psycopg2.Error:
                pass
            h.check_event("public", tag + "_a", "written", "dropped")
            h.check_event("public", tag + "_f", "written", "not_dropped", label=tag + "_f (ALTER … USING)")
            grep(h, "/metrics (%s logs)" % fmt, h.metrics())
            with urllib.request.urlopen("http://%s/drops?limit=1000" % h.admin, timeout=10) as r:
                grep(h, "/drops (%s logs)" % fmt, r.read().decode())
            h.stop_predrop()
            log = open(h.logs[-1], errors="replace").read()
            h.check(len(log.splitlines()) >= 10, "%s log has lines to search (%d)" % (fmt, len(log.splitlines())))
            # Lines starting "# " are the harness's own (the command line it started).
            lines = [line for line in log.splitlines() if line.strip() and not line.startswith("# ")]
            h.check(not [l for l in lines if l.startswith("2026-01-01") or l.startswith('{"level"')],
                    "%s log: no line forged by a startup parameter" % fmt)
            h.check(sum("FORGED" in l for l in lines) >= 2, "%s log: the hostile startup parameters were logged" % fmt)
            if fmt == "json":
                bad = []
                for line in lines:
                    try:
                        obj = json.loads(line)
                        if set(obj) != {"time", "level", "msg"}:
                            bad.append(line)
                    except ValueError:
                        bad.append(line)
                h.check(not bad, "json log: every line is one JSON object with time, level, msg", bad[:3])
            grep(h, "predrop's %s log at trace level" % fmt, log)

        events = h.sq("SELECT e::text FROM predrop.drop_events e")
        snaps = h.sq("SELECT s::text FROM predrop.schema_snapshots s")
        h.check(len(events) >= 12 and len(snaps) >= 10, "ledger and snapshots hold the statements (%d ledger rows, %d snapshots)"
                % (len(events), len(snaps)))
        grep(h, "every drop_events row", "\n".join(r[0] for r in events))
        grep(h, "every schema_snapshots row", "\n".join(r[0] for r in snaps))
        stored = sorted({r[0] for r in h.sq("SELECT statement FROM predrop.drop_events")})
        for s in stored:
            print("# stored statement: %s" % s.replace("\n", "\\n"))
        h.check(any("DROP TABLE sec_text_a" in s and "$1" in s for s in stored),
                "the ledger stores the normalised statement (names kept, literals as $n)", stored)
        unresolved = h.sq("SELECT statement FROM predrop.drop_events WHERE outcome = 'unresolved'")
        h.check(len(unresolved) == 2, "the DO blocks are in the ledger as unresolved", unresolved)

        # check-config: the effective config of the same file and environment, passwords masked.
        cfg = os.path.join(h.work, "check.yaml")
        with open(cfg, "w") as f:
            f.write("store:\n  conninfo_file: %s\n" % conninfo_file)
        e = dict(os.environ, **env)
        r = subprocess.run([h.bin, "check-config", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=e, timeout=30)
        h.check(r.returncode == 0 and "****" in r.stdout, "check-config prints the config with masked passwords",
                r.stdout[-800:])
        grep(h, "check-config output", r.stdout)
        with open(cfg, "w") as f:
            f.write("store:\n  conninfo_file: %s\n  conninfo: \"password=%s\"\nlimits:\n  max_client: 3\n"
                    % (conninfo_file, STORE_PW))
        r = subprocess.run([h.bin, "check-config", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=e, timeout=30)
        h.check(r.returncode != 0, "check-config rejects a config with errors", r.stdout)
        grep(h, "check-config error output", r.stdout)
    finally:
        for role in roles:
            try:
                h._admin_conn("DROP ROLE IF EXISTS %s" % role)
            except Exception as ex:  # noqa: BLE001
                print("# could not drop %s: %s" % (role, ex))


if __name__ == "__main__":
    holdlib.main(test, "secrets")
