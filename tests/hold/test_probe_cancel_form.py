#!/usr/bin/python3
"""Probe: the error predrop answers a cancelled hold with is in the form of a real cancel.

A real cancel: SELECT pg_sleep(10) cancelled direct (and, as a control, through predrop, where the
cancel reaches the server). A held DROP cancelled through predrop (the store's gate closed, tests/hold/probelib.py): its ErrorResponse
must carry S, V, C, M equal to the real cancel's and no field the real cancel lacks (no W: a real
cancel has no PL/pgSQL context line); F, L and R may differ or be absent. Checked on a bare socket
for a simple Query and for Parse/Bind/Execute, and through psycopg2 (e.diag) and libpq
(tests/hold/hold_libpq.cpp, mode cancel). A fail-closed refusal carries no PL/pgSQL context either.
"""
import threading

import psycopg2

import holdlib
import probelib
import rawpg

CONFIG = """
rules:
  - {schema: "guarded", on_failure: closed}
default: {action: snapshot, on_failure: open}
"""
COMPARED = ("S", "V", "C", "M")
MAY_DIFFER = ("F", "L", "R")


def error_of(msgs):
    for t, b in msgs:
        if t == "E":
            return rawpg.error_fields(b)
    return None


def real_cancel(h, port, extended=False):
    c = rawpg.Raw(port, h.db)
    sql = "SELECT pg_sleep(10)"
    c.send(rawpg.parse("", sql) + rawpg.bind("", "") + rawpg.execute("") + rawpg.sync() if extended
           else rawpg.query(sql))
    h.wait_for(lambda: h.q("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state = 'active' "
                           "AND query = %s", (h.db, sql))[0][0], timeout=10, interval=0.05)
    rawpg.cancel(port, c.pid, c.key)
    e = error_of(c.read_until_ready(timeout=10))
    c.close()
    return e


def held_cancel(h, table, extended=False):
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        sql = "DROP TABLE " + table
        c.send(rawpg.parse("", sql) + rawpg.bind("", "") + rawpg.execute("") + rawpg.sync() if extended
               else rawpg.query(sql))
        if probelib.wait_held(h, "cancel form, %s" % table):
            rawpg.cancel(h.p.port, c.pid, c.key)
        e = error_of(c.read_until_ready(timeout=10))
        c.close()
    return e


def same_form(h, label, real, got):
    print("# %s: real cancel %s\n# %s: predrop     %s" % (label, real, label, got))
    if not h.check(real is not None and got is not None, "%s: both ended in an ErrorResponse" % label, got):
        return
    h.check(all(got.get(k) == real.get(k) for k in COMPARED),
            "%s: S, V, C, M as in a real cancel" % label, {k: (real.get(k), got.get(k)) for k in COMPARED})
    extra = sorted(set(got) - set(real) - set(MAY_DIFFER))
    h.check(not extra, "%s: no field a real cancel lacks" % label, {k: got[k] for k in extra})
    h.check("W" not in got, "%s: no context (W) field" % label, got.get("W"))


def psycopg2_diag(h, conn, sql, before_cancel):
    out = {}

    def body():
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        except psycopg2.Error as e:
            out.update(sqlstate=e.diag.sqlstate, severity=e.diag.severity, primary=e.diag.message_primary,
                       context=e.diag.context, detail=e.diag.message_detail, hint=e.diag.message_hint)
    t = threading.Thread(target=body, daemon=True)
    t.start()
    before_cancel()
    conn.cancel()
    t.join(15)
    return out


def libpq_fields(h, conninfo, sql, before_go):
    d = probelib.Driver(conninfo, "cancel", sql)
    if d.wait_line("sent"):
        before_go()
        d.go()
    d.finish()
    return [l for l in d.lines if l.split(" ")[0] in ("sqlstate", "severity", "primary", "context")]


def test(h):
    h.exec("CREATE TABLE cf_simple (a int); CREATE TABLE cf_ext (a int); CREATE TABLE cf_pg (a int);"
           "CREATE TABLE cf_lp (a int); CREATE SCHEMA guarded; CREATE TABLE guarded.cf_closed (a int)")
    h.start_predrop("--hold-timeout-ms", "30000")
    sleeping = "SELECT pg_sleep(10)"

    def sleeping_started():
        h.wait_for(lambda: h.q("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state = 'active' "
                               "AND query = %s", (h.db, sleeping))[0][0], timeout=10, interval=0.05)

    real = real_cancel(h, h.port)
    relayed = real_cancel(h, h.p.port)
    h.check(real is not None and relayed == real, "control: a real cancel through predrop is the server's own",
            (real, relayed))
    same_form(h, "simple Query, cancel during the hold", real, held_cancel(h, "cf_simple"))
    same_form(h, "Parse/Bind/Execute, cancel during the hold", real_cancel(h, h.port, extended=True),
              held_cancel(h, "cf_ext", extended=True))

    c = h.connect()
    direct = psycopg2_diag(h, c, sleeping, sleeping_started)
    c.close()
    with probelib.StoreGate(h):
        c = h.pconnect()
        held = psycopg2_diag(h, c, "DROP TABLE cf_pg", lambda: probelib.wait_held(h, "psycopg2 cancel form"))
        c.close()
    print("# psycopg2 diag: real cancel %s\n# psycopg2 diag: predrop     %s" % (direct, held))
    h.check(direct.get("sqlstate") == "57014" and held == direct,
            "psycopg2: the cancelled hold's diag (severity, primary, context, detail, hint) is a real cancel's",
            "real %s | predrop %s" % (direct, held))

    direct = libpq_fields(h, h.conninfo(), sleeping, sleeping_started)
    with probelib.StoreGate(h):
        held = libpq_fields(h, h.proxy_conninfo(), "DROP TABLE cf_lp", lambda: probelib.wait_held(h, "libpq cancel form"))
    h.check("sqlstate 57014" in direct and held == direct, "libpq: the cancelled hold's error fields are a real cancel's",
            "real %s | predrop %s" % (direct, held))

    h.stop_predrop()
    h.start_predrop("--hold-timeout-ms", "500", config=CONFIG)
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        c.send(rawpg.query("DROP TABLE guarded.cf_closed"))
        refusal = error_of(c.read_until_ready(timeout=10))
        c.close()
    print("# fail-closed refusal: %s" % refusal)
    h.check(refusal is not None and refusal.get("S") == "ERROR" and "predrop" in refusal.get("M", ""),
            "fail closed: an ERROR naming predrop", refusal)
    h.check(refusal is not None and "W" not in refusal, "fail closed: no context (W) field",
            refusal and refusal.get("W"))
    h.check(h.exists("guarded.cf_closed"), "fail closed: guarded.cf_closed still exists")


if __name__ == "__main__":
    holdlib.main(test, "cancel_form")
