#!/usr/bin/python3
"""The kill switch PREDROP_SNAPSHOTS=off: a DROP is relayed at once, with no snapshot, and the ledger
says 'disabled' (or nothing). The store failing (slow, locked, full, down, killed) is in
tests/faults/test_store_faults.py and test_store_outage.py.
"""
import time

import holdlib


def timed_drop(h, table):
    c = h.pconnect()
    try:
        with c.cursor() as cur:
            t0 = time.monotonic()
            cur.execute("DROP TABLE %s" % table)
            return (time.monotonic() - t0) * 1000
    finally:
        c.close()


def test(h):
    h.exec("CREATE TABLE ks_t (a int);")
    h.start_predrop("--hold-timeout-ms", "10000", env={"PREDROP_SNAPSHOTS": "off"})
    oid = h.oid("public.ks_t")
    ms = timed_drop(h, "ks_t")
    print("# kill switch: DROP TABLE ks_t took %.1f ms" % ms)
    h.check(not h.exists("public.ks_t"), "kill switch: drop relayed")
    time.sleep(1)
    h.check(not h.snapshots("table_oid = %s", (oid,)), "kill switch: no snapshot of ks_t")
    ev = [e for e in h.events() if e["outcome"] == "disabled" or e["table_name"] == "ks_t"]
    h.check(all(e["outcome"] == "disabled" for e in ev),
            "kill switch: ledger has a 'disabled' row or none (%d disabled rows)" % len(ev),
            [(e["outcome"], e["table_name"]) for e in ev])
    h.check((h.metric("predrop_snapshots_total", 'outcome="written"') or 0) == 0,
            "kill switch: predrop_snapshots_total{outcome=written} is 0")


if __name__ == "__main__":
    holdlib.main(test, "failopen")
