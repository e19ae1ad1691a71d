#!/usr/bin/python3
"""Scale: a 300-table DROP SCHEMA ... CASCADE (300 snapshots, each before the drop; the hold time is
printed) and 200 clients each dropping its own table at once with capture.pool_size 4 (every table
snapshotted or its miss accounted for in the ledger; pg_stat_activity, sampled in a loop, never shows
more than 4 application_name='predrop-capture' connections to the test database)."""
import os
import threading
import time

import psycopg2

import holdlib

N_CASCADE = int(os.environ.get("HOLD_CASCADE_TABLES", "300"))
N_CLIENTS = int(os.environ.get("HOLD_CLIENTS", "200"))
POOL = 4
CONFIG = """
capture:
  pool_size: %d
""" % POOL


def cascade(h):
    h.exec("CREATE SCHEMA big; DO $$BEGIN FOR i IN 1..%d LOOP "
           "EXECUTE format('CREATE TABLE big.t%%s (id int PRIMARY KEY, v text, n numeric, d date)', i); END LOOP; END$$;"
           % N_CASCADE)
    h.exec("ANALYZE")
    c = h.pconnect()
    with c.cursor() as cur:
        t0 = time.monotonic()
        cur.execute("DROP SCHEMA big CASCADE")
        ms = (time.monotonic() - t0) * 1000
    c.close()
    direct = h.connect()
    h.exec("CREATE SCHEMA big2; DO $$BEGIN FOR i IN 1..%d LOOP "
           "EXECUTE format('CREATE TABLE big2.t%%s (id int PRIMARY KEY, v text, n numeric, d date)', i); END LOOP; END$$;"
           % N_CASCADE)
    with direct.cursor() as cur:
        t0 = time.monotonic()
        cur.execute("DROP SCHEMA big2 CASCADE")
        ms_direct = (time.monotonic() - t0) * 1000
    direct.close()
    print("# %d-table DROP SCHEMA big CASCADE: %.0f ms through predrop (hold + drop); %.0f ms direct (drop alone)"
          % (N_CASCADE, ms, ms_direct))
    truth = h.truth("schema_name = 'big' AND object_type = 'table'")
    h.check(len(truth) == N_CASCADE, "cascade: the server dropped %d tables" % N_CASCADE, len(truth))
    h.check_captured_before_drop(truth, "cascade: ")
    snaps = h.snapshots("schema_name = 'big'")
    h.check(len(snaps) == N_CASCADE, "cascade: %d snapshots" % N_CASCADE, len(snaps))
    holds = sorted({s["hold_ms"] for s in snaps if s["hold_ms"] is not None})
    if holds:
        print("# cascade: hold_ms recorded by predrop: %.0f ms" % holds[-1])
    ev = h.wait_for(lambda: [e for e in h.events("schema_name = 'big'") if e["drop_outcome"] == "dropped"]
                    if len([e for e in h.events("schema_name = 'big'") if e["drop_outcome"]]) >= N_CASCADE else [],
                    timeout=15)
    ev = h.events("schema_name = 'big'")
    h.check(len([e for e in ev if e["outcome"] == "written"]) == N_CASCADE, "cascade: %d ledger rows written" % N_CASCADE,
            sorted({(e["outcome"]) for e in ev}))
    h.check(all(e["drop_outcome"] == "dropped" for e in ev) and ev, "cascade: every ledger row drop_outcome=dropped",
            sorted({str(e["drop_outcome"]) for e in ev}))


def crowd(h):
    h.exec("DO $$BEGIN FOR i IN 0..%d LOOP "
           "EXECUTE format('CREATE TABLE public.crowd%%s (id int, v text)', i); END LOOP; END$$; ANALYZE;"
           % (N_CLIENTS - 1))
    oids = {("crowd%d" % i): h.oid("public.crowd%d" % i) for i in range(N_CLIENTS)}
    conns = [None] * N_CLIENTS

    def opener(k):
        for i in range(k, N_CLIENTS, 8):
            conns[i] = h.pconnect()
    openers = [threading.Thread(target=opener, args=(k,)) for k in range(8)]
    for t in openers:
        t.start()
    for t in openers:
        t.join()
    h.check(all(conns), "crowd: %d client connections open through predrop" % N_CLIENTS)
    stop = threading.Event()
    samples = []

    def sampler():
        s = h.connect("postgres")
        with s.cursor() as cur:
            while not stop.is_set():
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'predrop-capture' "
                            "AND datname = %s", (h.db,))
                samples.append(cur.fetchone()[0])
                time.sleep(0.005)
        s.close()
    sam = threading.Thread(target=sampler)
    sam.start()
    barrier = threading.Barrier(N_CLIENTS)
    errors, times = [], [None] * N_CLIENTS

    def worker(i):
        try:
            barrier.wait(timeout=60)
            t0 = time.monotonic()
            with conns[i].cursor() as cur:
                cur.execute("DROP TABLE crowd%d" % i)
            times[i] = (time.monotonic() - t0) * 1000
        except Exception as e:  # noqa: BLE001
            errors.append("crowd%d: %s" % (i, e))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(N_CLIENTS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    time.sleep(1.0)  # outcome checks also use the capture pool
    stop.set()
    sam.join()
    for c in conns:
        if c is not None:
            c.close()
    done = sorted(t for t in times if t is not None)
    if done:
        print("# crowd: %d DROPs in %.1f s; per-DROP wall time p50 %.0f ms, max %.0f ms"
              % (len(done), wall, done[len(done) // 2], done[-1]))
    h.check(not errors, "crowd: all %d DROPs succeeded" % N_CLIENTS, errors[:5])
    print("# crowd: %d pg_stat_activity samples, max predrop-capture connections %s"
          % (len(samples), max(samples) if samples else None))
    h.check(len(samples) > 20, "crowd: pg_stat_activity was sampled during the run (%d samples)" % len(samples))
    h.check(samples and max(samples) <= POOL, "crowd: never more than %d predrop-capture connections" % POOL,
            max(samples) if samples else None)
    h.check(samples and max(samples) >= 1, "crowd: the sampler saw the capture connections at work")
    truth = h.truth("object_name LIKE 'crowd%%'")
    h.check(len(truth) == N_CLIENTS, "crowd: the server dropped %d tables" % N_CLIENTS, len(truth))
    snaps = {s["table_oid"]: s for s in h.snapshots("table_name LIKE 'crowd%%'")}
    ev = h.events("table_name LIKE 'crowd%%'")
    by_oid = {}
    for e in ev:
        by_oid.setdefault(e["table_oid"], []).append(e["outcome"])
    missing, reasons = [], {}
    when = {t[2]: t[4] for t in truth}
    written = 0
    for name, oid in oids.items():
        s = snaps.get(oid)
        if s is not None and oid in when and s["captured_at"] <= when[oid]:
            written += 1
            continue
        outs = [o for o in by_oid.get(oid, []) if o != "written"]
        if not outs:
            outs = [e["outcome"] for e in ev if e["table_name"] == name and e["outcome"] != "written"]
        if outs:
            reasons[outs[0]] = reasons.get(outs[0], 0) + 1
        else:
            missing.append(name)
    print("# crowd: %d snapshots written before their drop, fail-open reasons %s" % (written, reasons))
    h.check(not missing, "crowd: every table snapshotted before its drop or its miss in the ledger", missing[:10])
    h.check(written == N_CLIENTS, "crowd: all %d snapshots written (generous hold timeout)" % N_CLIENTS,
            "%d written, %s" % (written, reasons))


def test(h):
    h.start_predrop("--hold-timeout-ms", "20000", config=CONFIG)
    cascade(h)
    crowd(h)


if __name__ == "__main__":
    holdlib.main(test, "scale")
