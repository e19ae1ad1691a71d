#!/usr/bin/python3
"""What happens to a held statement when its client or predrop goes away mid-hold. The store is made
slow (a trigger sleeping on the snapshot table) so the hold is still on when:
- the client is killed (psql, SIGKILL): the statement is never relayed, the table survives;
- predrop gets SIGTERM and the drain outlasts the hold: the statement is relayed after its snapshot,
  the client sees success, predrop exits on the SIGTERM;
- predrop gets SIGTERM and the drain (limits.drain_timeout_ms 500) ends first: the client gets an
  error, the statement is never relayed, predrop exits on the SIGTERM.
Each case is checked against the server (truth.drops from an sql_drop event trigger, the table's
existence) and the ledger agrees: a drop the server did has a snapshot captured before it, a drop it
did not do is never marked dropped.
"""
import subprocess
import threading
import time

import psycopg2

import faultlib


def slow_store(h, seconds):
    h.exec("CREATE OR REPLACE FUNCTION predrop.fault_slow() RETURNS trigger LANGUAGE plpgsql AS "
           "$f$BEGIN PERFORM pg_sleep(%s); RETURN NEW; END$f$;"
           "DROP TRIGGER IF EXISTS fault_slow ON predrop.schema_snapshots;"
           "CREATE TRIGGER fault_slow BEFORE INSERT ON predrop.schema_snapshots "
           "FOR EACH ROW EXECUTE FUNCTION predrop.fault_slow();" % float(seconds), db=h.store_db)


def hold_in_progress(h):
    """True while predrop's snapshot INSERT sleeps in the store's trigger: the DROP is being held."""
    return h.sq("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'predrop-store' "
                "AND wait_event = 'PgSleep'", (h.store_db,))[0][0] > 0


def wait_hold(h, label):
    ok = h.wait_for(lambda: hold_in_progress(h), timeout=10, interval=0.05)
    h.check(ok, "%s: the DROP is being held (predrop's snapshot write sleeps in the store)" % label)
    return ok


def check_not_dropped(h, label, table, oid):
    h.check(h.exists("public." + table), "%s: %s still exists (the DROP was never relayed)" % (label, table))
    h.check(not h.truth("objid = %s", (oid,)), "%s: the server recorded no drop of %s" % (label, table))
    marked = [e for e in h.events("table_oid = %s", (oid,)) if e["drop_outcome"] == "dropped"]
    h.check(not marked, "%s: no ledger row says %s was dropped" % (label, table), marked)
    print("# %s: ledger rows: %s" % (label, [(e["outcome"], e["drop_outcome"]) for e in h.events("table_oid = %s", (oid,))]))


def check_dropped_after_snapshot(h, label, table, oid):
    truth = h.truth("objid = %s", (oid,))
    h.check(len(truth) == 1 and not h.exists("public." + table), "%s: the server dropped %s" % (label, table))
    h.check_captured_before_drop(truth, label + ": ")
    h.check_event("public", table, "written", oid=oid, label=label)


def drop_in_thread(h, table):
    """DROP through predrop on its own connection (closed afterwards); the result lands in the dict."""
    result = {}

    def body():
        try:
            c = h.pconnect()
        except psycopg2.Error as e:
            result["error"] = "connect: %s" % e
            return
        t0 = time.monotonic()
        try:
            with c.cursor() as cur:
                cur.execute("DROP TABLE %s" % table)
            result["ok"] = True
        except psycopg2.Error as e:
            result["error"] = "%s %s" % (e.pgcode, str(e).strip().replace("\n", " | "))
        result["ms"] = (time.monotonic() - t0) * 1000
        try:
            c.close()
        except psycopg2.Error:
            pass
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, result


def sigterm_during_hold(h, p, label, t, res):
    """SIGTERM predrop while the DROP of thread T is held; predrop must exit, the client must return."""
    if wait_hold(h, label):
        t0 = time.monotonic()
        clean = p.stop(15)
        print("# %s: predrop exited %.1f s after SIGTERM; client: %s" % (label, time.monotonic() - t0, res))
        h.check(clean, "%s: predrop exited on the SIGTERM" % label)
    t.join(20)


def test(h):
    tables = ("disconnect_t", "term_relay_t", "term_cut_t")
    h.exec("".join("CREATE TABLE %s (a int, b text); INSERT INTO %s VALUES (1, 'x');" % (t, t) for t in tables))
    oids = {t: h.oid("public." + t) for t in tables}
    p = h.start_predrop("--hold-timeout-ms", "20000")
    slow_store(h, 2)

    # ---- the client vanishes mid-hold ----
    label = "client killed during the hold"
    psql = subprocess.Popen(["psql", "-X", "-d", h.proxy_conninfo(), "-c", "DROP TABLE disconnect_t"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if wait_hold(h, label):
        psql.kill()
    psql.wait()
    # the snapshot write finishes after the sleep; the statement must not be relayed then
    h.wait_for(lambda: not hold_in_progress(h), timeout=10)
    time.sleep(0.5)
    check_not_dropped(h, label, "disconnect_t", oids["disconnect_t"])
    h.check(h.wait_for(lambda: (h.metric("predrop_client_connections") or 0) == 0, timeout=5),
            "%s: predrop closed the session" % label)

    # ---- SIGTERM, the drain (30 s default) outlasts the hold: relayed after its snapshot ----
    label = "SIGTERM during the hold, long drain"
    t, res = drop_in_thread(h, "term_relay_t")
    sigterm_during_hold(h, p, label, t, res)
    h.check(res.get("ok"), "%s: the client saw the DROP succeed" % label, res)
    check_dropped_after_snapshot(h, label, "term_relay_t", oids["term_relay_t"])
    h.instances.remove(p)

    # ---- SIGTERM, the drain ends first: never relayed ----
    label = "SIGTERM during the hold, drain shorter than the hold"
    slow_store(h, 4)
    p = h.start_predrop("--hold-timeout-ms", "20000", "--no-migrate", config="limits:\n  drain_timeout_ms: 500\n")
    t, res = drop_in_thread(h, "term_cut_t")
    sigterm_during_hold(h, p, label, t, res)
    h.check("error" in res, "%s: the client got an error (not a success, not a hang)" % label, res)
    h.wait_for(lambda: not hold_in_progress(h), timeout=10)
    time.sleep(0.5)
    check_not_dropped(h, label, "term_cut_t", oids["term_cut_t"])
    h.instances.remove(p)
    h.exec("DROP TRIGGER fault_slow ON predrop.schema_snapshots", db=h.store_db)
    for log in h.logs:
        with open(log, errors="replace") as f:
            bad = [l for l in f if "terminate called" in l or "Sanitizer" in l or "Segmentation" in l]
        h.check(not bad, "no crash in %s" % log, bad)


if __name__ == "__main__":
    faultlib.holdlib.main(test, "lifecycle")
