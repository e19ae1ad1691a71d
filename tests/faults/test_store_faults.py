#!/usr/bin/python3
"""The store answers but cannot take the snapshot: slow (a BEFORE INSERT trigger sleeping 5 s on the
snapshot table), locked (ACCESS EXCLUSIVE held by another session), full (a CHECK constraint every
new row fails). Each DROP completes at the client, predrop's recorded hold_ms stays within
faultlib.HOLD_BOUND_MS (hold_timeout_ms + slack), the miss is in the ledger (one row naming the table), in /metrics and in the
log; once the fault is removed the next DROP gets a written snapshot from the same predrop process.
(Moved here from tests/hold/test_fail_open.py, which keeps the kill switch.)
"""
import faultlib
from faultlib import HOLD_TIMEOUT_MS

MISS = ("timeout", "store_error")


def test(h):
    tables = ("slow_t", "slow_t2", "slow_ok", "lock_t", "lock_ok", "full_t", "full_ok", "ok_t")
    h.exec("".join("CREATE TABLE %s (a int, b text); INSERT INTO %s VALUES (1, 'x');" % (t, t) for t in tables))
    h.start_predrop("--hold-timeout-ms", str(HOLD_TIMEOUT_MS))
    pid = h.p.pid
    hist = faultlib.HoldHistogram(h)
    # warm-up with a healthy store (opens the capture and store connections); only reported
    err, ms = faultlib.drop_through(h, "ok_t")
    print("# warm-up, healthy store: DROP TABLE ok_t took %.1f ms (%s)" % (ms, err or "ok"))
    h.wait_for(lambda: h.events("table_name = 'ok_t'"), timeout=5)

    # ---- slow ----
    h.exec("CREATE FUNCTION predrop.fault_slow() RETURNS trigger LANGUAGE plpgsql AS "
           "$f$BEGIN PERFORM pg_sleep(5); RETURN NEW; END$f$;"
           "CREATE TRIGGER fault_slow BEFORE INSERT ON predrop.schema_snapshots "
           "FOR EACH ROW EXECUTE FUNCTION predrop.fault_slow();", db=h.store_db)
    faultlib.check_miss(h, hist, "slow store", "slow_t", ("timeout",))
    faultlib.check_miss(h, hist, "slow store again", "slow_t2", ("timeout",))
    h.exec("DROP TRIGGER fault_slow ON predrop.schema_snapshots", db=h.store_db)
    faultlib.check_resumed(h, "slow store fixed", "slow_ok")

    # ---- locked ----
    locker = h.connect(h.store_db, autocommit=False)
    with locker.cursor() as cur:
        cur.execute("LOCK TABLE predrop.schema_snapshots IN ACCESS EXCLUSIVE MODE")
    try:
        faultlib.check_miss(h, hist, "locked store", "lock_t", MISS)
    finally:
        locker.rollback()
        locker.close()
    faultlib.check_resumed(h, "lock released", "lock_ok")

    # ---- full: every new snapshot row violates a constraint ----
    h.exec("ALTER TABLE predrop.schema_snapshots ADD CONSTRAINT fault_full CHECK (false) NOT VALID", db=h.store_db)
    faultlib.check_miss(h, hist, "full store", "full_t", ("store_error",))
    h.exec("ALTER TABLE predrop.schema_snapshots DROP CONSTRAINT fault_full", db=h.store_db)
    faultlib.check_resumed(h, "store has room again", "full_ok")

    # a snapshot written late (after the drop it should have preceded) would lie about the order
    truth = {t[1]: t[4] for t in h.truth()}
    for s in h.snapshots("table_name IN ('slow_t', 'slow_t2', 'lock_t', 'full_t')"):
        if s["table_name"] in truth and s["captured_at"] > truth[s["table_name"]]:
            h.fail("%s: snapshot captured at %s, after the drop at %s" % (s["table_name"], s["captured_at"],
                                                                         truth[s["table_name"]]))
    anon = [(e["outcome"], e["statement"]) for e in h.events("outcome IN ('timeout', 'store_error', 'capture_error')")
            if not e["table_name"]]
    h.check(not anon, "every miss in the ledger names its table", anon)
    h.check(h.p.pid == pid and h.p.alive(), "one predrop process throughout (pid %d)" % pid)
    print("# /metrics predrop_snapshots_total: %s" % faultlib.miss_counters(h))


if __name__ == "__main__":
    faultlib.holdlib.main(test, "storefaults")
