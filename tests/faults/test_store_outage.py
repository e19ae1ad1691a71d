#!/usr/bin/python3
"""The store is a PostgreSQL cluster of its own that goes away: down when predrop starts (never
migrated), then started (predrop migrates it and snapshots resume), then killed mid-run with
pg_ctl -m immediate, then started again. While it is down every DROP succeeds within the hold
timeout, the miss is counted (/metrics) and logged (the ledger is in the dead store); once it
answers again a later DROP gets a written snapshot and ledger row, from the same predrop process,
and the ledger rows of the misses arrive from predrop's bounded retry queue.
"""

import time

import psycopg2

import faultlib
import holdlib
from faultlib import HOLD_TIMEOUT_MS, HOLD_BOUND_MS, HOLD_BOUND_S


def store_rows(cl, sql, params=()):
    return holdlib.fetch_dicts(psycopg2.connect(cl.conninfo("predrop_store"), connect_timeout=5), sql, params)


def store_migrated(cl):
    try:
        return store_rows(cl, "SELECT to_regclass('predrop.drop_events') IS NOT NULL AS ok")[0]["ok"]
    except psycopg2.Error:
        return False


def check_outage_drop(h, hist, label, table, log_start):
    before_hist, before = hist.read(), faultlib.miss_counters(h)
    faultlib.check_fail_open(h, label, table)
    hist.check_since(before_hist, label)
    after = h.wait_for(lambda: (lambda a: a if a["store_error"] + a["timeout"] > before["store_error"] + before["timeout"]
                                else None)(faultlib.miss_counters(h)), timeout=5)
    h.check(bool(after), "%s: the miss is counted in predrop_snapshots_total{outcome=store_error|timeout}" % label,
            (before, faultlib.miss_counters(h)))
    lines = h.wait_for(lambda: faultlib.log_lines(h, "snapshot store_error", "snapshot timeout", start=log_start),
                       timeout=5)
    h.check(bool(lines), "%s: the miss is logged" % label, h.log_text()[-1200:])
    if lines:
        print("# log: " + lines[-1])


def check_written(h, cl, label, table, oid):
    """A snapshot of oid captured before the drop, and its ledger row (outcome written, hold_ms bounded)."""
    dropped_at = [t[4] for t in h.truth("objid = %s", (oid,))]
    h.check(len(dropped_at) == 1, "%s: the server recorded the drop of %s" % (label, table), dropped_at)
    snaps = store_rows(cl, "SELECT captured_at FROM predrop.schema_snapshots WHERE table_oid = %s AND database_name = %s",
                       (oid, h.db))
    h.check(bool(snaps) and dropped_at and snaps[0]["captured_at"] <= dropped_at[0],
            "%s: %s has a snapshot captured before the drop, without a predrop restart" % (label, table), snaps)
    ev = h.wait_for(lambda: store_rows(cl, "SELECT outcome, hold_ms FROM predrop.drop_events WHERE table_oid = %s "
                                       "AND hold_ms IS NOT NULL", (oid,)), timeout=10)
    h.check(bool(ev) and ev[0]["outcome"] == "written" and ev[0]["hold_ms"] <= HOLD_BOUND_MS,
            "%s: ledger row outcome written, recorded hold_ms <= %d" % (label, HOLD_BOUND_MS), ev)
    if ev:
        print("# %s: recorded hold_ms %.1f" % (label, ev[0]["hold_ms"]))


def test(h):
    faultlib.with_private_cluster(h, "store-pg", "predrop_store", run)


def run(h, cl):
    cl.stop("immediate")
    h.exec("".join("CREATE TABLE %s (a int, b text); INSERT INTO %s VALUES (1, 'x'); ANALYZE %s;" % (t, t, t)
                   for t in ("down_start", "back1", "killed1", "killed2", "back2")))
    oids = {t: h.oid("public." + t) for t in ("back1", "back2")}

    # ---- down at start: predrop serves anyway ----
    h.start_predrop("--hold-timeout-ms", str(HOLD_TIMEOUT_MS),
                    store=cl.conninfo("predrop_store", connect_timeout=2))
    pid = h.p.pid
    h.check(bool(faultlib.log_lines(h, "store unreachable at start")),
            "store down at start: predrop started and logged the unreachable store", h.log_text()[-800:])
    hist = faultlib.HoldHistogram(h)
    check_outage_drop(h, hist, "store down at start", "down_start", 0)

    # ---- the store comes up: migrated in the background, snapshots resume ----
    cl.start()
    h.check(h.wait_for(lambda: store_migrated(cl), timeout=20),
            "store up: predrop migrated it without a restart",
            faultlib.log_lines(h, "store"))
    err, ms = faultlib.drop_through(h, "back1")
    h.check(err is None, "store up: DROP TABLE back1 succeeded (%.0f ms)" % ms, err)
    check_written(h, cl, "store up", "back1", oids["back1"])

    # ---- killed mid-run: pg_ctl stop -m immediate ----
    cl.stop("immediate")
    log_start = faultlib.log_length(h)
    check_outage_drop(h, hist, "store killed", "killed1", log_start)
    # a second client on a connection opened while the store is dead
    check_outage_drop(h, hist, "store still dead", "killed2", faultlib.log_length(h))

    # ---- started again: the next drop gets a written snapshot ----
    # The drop waits until predrop's own probe finds the store writable, as an operator's readiness
    # check would: the first connection to a cluster fresh from crash recovery rebuilds its caches,
    # and on a loaded host that alone has outlasted the 400 ms hold (a CI run of PostgreSQL 17).
    cl.start()
    t0 = time.monotonic()
    ready = h.wait_for(lambda: h.readyz()[0] == 200, timeout=20)
    h.check(ready, "store back: predrop's /readyz says ready again (%.0f ms after the start)"
            % ((time.monotonic() - t0) * 1000), h.readyz())
    err, ms = faultlib.drop_through(h, "back2")
    h.check(err is None, "store back: DROP TABLE back2 succeeded (%.0f ms)" % ms, err)
    check_written(h, cl, "store back", "back2", oids["back2"])

    h.check(h.p.pid == pid and h.p.alive(), "one predrop process throughout (pid %d)" % pid)
    # The ledger rows of the misses waited in predrop's retry queue and arrive now, hold_ms included
    # (the row of the miss before the first migration may meet the store still unmigrated: printed).
    def late_rows():
        return store_rows(cl, "SELECT table_name, outcome, hold_ms FROM predrop.drop_events "
                              "WHERE table_name IN ('down_start', 'killed1', 'killed2') ORDER BY occurred_at")
    rows = h.wait_for(lambda: (lambda r: r if sum(1 for x in r if x["table_name"] in ("killed1", "killed2")
                                                  and x["hold_ms"] is not None) == 2 else None)(late_rows()),
                      timeout=20)
    print("# ledger rows for the drops made while the store was down: %s" % late_rows())
    killed = [r for r in (rows or []) if r["table_name"] in ("killed1", "killed2")]
    h.check(len(killed) == 2 and all(r["outcome"] == "store_error" and r["hold_ms"] <= HOLD_BOUND_MS
                                     for r in killed),
            "store back: the ledger rows of the misses while it was dead arrived from the retry queue "
            "(store_error, hold_ms <= %d)" % (HOLD_BOUND_MS), late_rows())
    queued = h.wait_for(lambda: h.metric("predrop_store_retry_queue") == 0, timeout=10)
    h.check(queued, "store back: predrop_store_retry_queue drained to 0", h.metric("predrop_store_retry_queue"))
    h.check(h.metric("predrop_store_retry_lost_total") == 0, "no ledger statement was lost to the queue bound",
            h.metric("predrop_store_retry_lost_total"))
    counters = faultlib.miss_counters(h)
    print("# /metrics predrop_snapshots_total: %s; hold histogram (count, <= %g s): %s"
          % (counters, HOLD_BOUND_S, hist.read()))


if __name__ == "__main__":
    faultlib.holdlib.main(test, "storeoutage")
