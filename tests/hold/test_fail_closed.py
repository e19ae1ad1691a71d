#!/usr/bin/python3
"""Fail closed (rules: schema guarded -> on_failure: closed) with a slow store, and CancelRequest
while a DROP is held.

Fail closed: the client gets an ErrorResponse naming predrop and the table, the table still exists,
in an explicit transaction the transaction is aborted (25P02 until ROLLBACK), the session stays
usable; the same slow store on a schema without the rule fails open (control).
Cancel (hold timeout 10 s, store slow 5 s): PQcancel (psycopg2's conn.cancel()) and psql's SIGINT
through predrop end the hold with 57014 quickly, the table still exists, the session is usable.
"""
import signal
import subprocess
import threading
import time

import psycopg2
import psycopg2.errors

import holdlib

CONFIG = """
rules:
  - {schema: "guarded", on_failure: closed}
default: {action: snapshot, on_failure: open}
"""
SLOW = ("CREATE FUNCTION predrop.hold_test_slow() RETURNS trigger LANGUAGE plpgsql AS "
        "$f$BEGIN PERFORM pg_sleep(5); RETURN NEW; END$f$;"
        "CREATE TRIGGER hold_test_slow BEFORE INSERT ON predrop.schema_snapshots "
        "FOR EACH ROW EXECUTE FUNCTION predrop.hold_test_slow();")


def expect_refusal(h, label, exc, table):
    if exc is None:
        h.fail("%s: the DROP succeeded, expected an error from predrop" % label)
        return
    msg = str(exc).strip()
    print("# %s: %s %s" % (label, getattr(exc, "pgcode", None), msg.replace("\n", " | ")))
    h.check("predrop" in msg, "%s: the error names predrop" % label, msg)
    h.check(table in msg, "%s: the error names the table %s" % (label, table), msg)
    h.check(any(w in msg for w in ("timeout", "not written", "within", "could not")),
            "%s: the error gives the reason" % label, msg)


def closed_cases(h):
    h.exec(SLOW, db=h.store_db)

    # autocommit
    c = h.pconnect()
    exc = None
    t0 = time.monotonic()
    try:
        with c.cursor() as cur:
            cur.execute("DROP TABLE guarded.t1")
    except psycopg2.Error as e:
        exc = e
    ms = (time.monotonic() - t0) * 1000
    print("# fail closed: refusal after %.0f ms" % ms)
    expect_refusal(h, "fail closed, autocommit", exc, "guarded.t1")
    h.check(h.exists("guarded.t1"), "fail closed: guarded.t1 still exists")
    with c.cursor() as cur:
        cur.execute("SELECT 42")
        h.check(cur.fetchone()[0] == 42, "fail closed: the session is usable afterwards")
    c.close()

    # explicit transaction: aborted as if the server had raised
    c = h.pconnect(autocommit=False)
    exc = None
    with c.cursor() as cur:
        cur.execute("SELECT 1")
        try:
            cur.execute("DROP TABLE guarded.t2")
        except psycopg2.Error as e:
            exc = e
        expect_refusal(h, "fail closed, in BEGIN", exc, "guarded.t2")
        code = None
        try:
            cur.execute("SELECT 1")
        except psycopg2.Error as e:
            code = e.pgcode
        h.check(code == "25P02", "fail closed: next statement in the transaction fails with 25P02", code)
    c.rollback()
    with c.cursor() as cur:
        cur.execute("SELECT 7")
        h.check(cur.fetchone()[0] == 7, "fail closed: after ROLLBACK the session works")
    c.rollback()
    c.close()
    h.check(h.exists("guarded.t2"), "fail closed: guarded.t2 still exists")

    # psql, one multi-statement Query; the COMMIT after the refused DROP must not commit anything
    r = h.psql("BEGIN; INSERT INTO guarded.t3 VALUES (1); DROP TABLE guarded.t3; COMMIT;")
    h.check(r.rc != 0 and "predrop" in r.err, "fail closed, psql multi-statement: error from predrop", r)
    h.check("guarded.t3" in r.err, "fail closed, psql multi-statement: the error names guarded.t3", r.err.strip())
    h.check(h.exists("guarded.t3") and h.q("SELECT count(*) FROM guarded.t3")[0][0] == 0,
            "fail closed, psql multi-statement: t3 exists, the INSERT before it rolled back")

    # via search_path: the policy applies to the schema the name resolves to
    r = h.psql("SET search_path = guarded", "DROP TABLE t4")
    h.check(r.rc != 0 and "predrop" in r.err, "fail closed via SET search_path = guarded; DROP TABLE t4: refused", r)
    h.check("guarded.t4" in r.err, "fail closed via search_path: the error names guarded.t4", r.err.strip())
    h.check(h.exists("guarded.t4"), "fail closed via search_path: guarded.t4 still exists")

    # control: a schema without the rule fails open with the same slow store
    r = h.psql("DROP TABLE public.open_t")
    h.check(r.rc == 0 and not h.exists("public.open_t"), "same slow store, schema without the rule: fails open", r)
    h.check(not h.truth("schema_name = 'guarded'"), "truth: nothing in guarded was ever dropped",
            h.truth("schema_name = 'guarded'"))
    h.exec("DROP TRIGGER hold_test_slow ON predrop.schema_snapshots; DROP FUNCTION predrop.hold_test_slow()",
           db=h.store_db)


def cancel_cases(h):
    h.exec(SLOW, db=h.store_db)
    # PQcancel through predrop (psycopg2's cancel() is libpq's PQcancel with the key predrop relayed)
    c = h.pconnect()
    fired = {}

    def cancel():
        fired["t"] = time.monotonic()
        c.cancel()
    timer = threading.Timer(1.0, cancel)
    code, t0 = None, time.monotonic()
    timer.start()
    try:
        with c.cursor() as cur:
            cur.execute("DROP TABLE public.cancel_t")
    except psycopg2.Error as e:
        code = e.pgcode
    t_end = time.monotonic()
    timer.join()
    after = (t_end - fired.get("t", t_end)) * 1000
    print("# PQcancel: DROP returned %s after %.0f ms, %.0f ms after the cancel" % (code, (t_end - t0) * 1000, after))
    h.check(code == "57014", "PQcancel during the hold: 57014", code)
    h.check("t" in fired and after < 1000, "PQcancel: the error came within 1 s of the cancel (%.0f ms)" % after)
    h.check(h.exists("public.cancel_t"), "PQcancel: cancel_t still exists")
    with c.cursor() as cur:
        cur.execute("SELECT 5")
        h.check(cur.fetchone()[0] == 5, "PQcancel: the session is usable afterwards")
        cur.execute("SELECT count(*) FROM public.cancel_t")
        h.check(cur.fetchone()[0] == 0, "PQcancel: the table is readable through the same session")
    c.close()

    # psql: SIGINT sends a CancelRequest through predrop
    p = subprocess.Popen(["psql", "-X", "-d", h.proxy_conninfo(), "-c", "DROP TABLE public.cancel_psql"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    t_sig = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    after = (time.monotonic() - t_sig) * 1000
    print("# psql SIGINT: exit %s %.0f ms after the signal: %s" % (p.returncode, after, err.strip()))
    h.check("canceling statement due to user request" in err, "psql cancel: 'canceling statement due to user request'",
            err)
    h.check(after < 1500, "psql cancel: psql returned within 1.5 s of SIGINT (%.0f ms)" % after)
    h.check(h.exists("public.cancel_psql"), "psql cancel: cancel_psql still exists")
    # and the holds really were held: without a cancel this DROP would wait for the 5 s store
    h.exec("DROP TRIGGER hold_test_slow ON predrop.schema_snapshots", db=h.store_db)
    r = h.psql("DROP TABLE public.cancel_psql")
    h.check(r.rc == 0 and not h.exists("public.cancel_psql"), "after the cancels a DROP goes through", r)


def test(h):
    h.exec("CREATE SCHEMA guarded; CREATE TABLE guarded.t1 (a int); CREATE TABLE guarded.t2 (a int);"
           "CREATE TABLE guarded.t3 (a int); CREATE TABLE guarded.t4 (a int); CREATE TABLE public.open_t (a int);"
           "CREATE TABLE public.cancel_t (a int); CREATE TABLE public.cancel_psql (a int);")
    h.start_predrop("--hold-timeout-ms", "500", config=CONFIG)
    closed_cases(h)
    h.stop_predrop()
    h.start_predrop("--hold-timeout-ms", "10000")
    cancel_cases(h)


if __name__ == "__main__":
    holdlib.main(test, "failclosed")
