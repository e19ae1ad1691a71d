#!/usr/bin/python3
"""200 clients at once, each recreating its own table in a transaction (DROP TABLE IF EXISTS,
CREATE TABLE, INSERT, COMMIT), a few rounds, with capture.pool_size 4: no client statement fails,
and every committed recreate (truth.ddl: the OID dropped and the OID created in one transaction)
has its post_create of the new OID paired with the pre_drop of the OID that round dropped, or a
ledger row saying why not. The slowest client statement is printed, not asserted."""
import collections
import os
import threading
import time

import afterlib

N_CLIENTS = int(os.environ.get("AFTER_CLIENTS", "200"))
ROUNDS = int(os.environ.get("AFTER_ROUNDS", "3"))
POOL = 4


def test(h):
    h.exec("DO $$BEGIN FOR i IN 1..%d LOOP "
           "EXECUTE format('CREATE TABLE t_%%s (id int, v text)', i); "
           "EXECUTE format('INSERT INTO t_%%s SELECT g, ''v'' || g FROM generate_series(1, 20) g', i); END LOOP; END$$;"
           % N_CLIENTS)
    h.exec("ANALYZE")
    h.reset_truth()
    h.start(extra_config="  pool_size: %d\n" % POOL)
    errors, latencies = [], []
    lock = threading.Lock()
    start = threading.Barrier(N_CLIENTS)

    def client(i):
        try:
            c = h.pconnect(autocommit=False)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append((i, "connect", str(e)))
            return
        mine = []
        try:
            start.wait(60)
            for rnd in range(ROUNDS):
                for sql in ("DROP TABLE IF EXISTS t_%d" % i,
                            "CREATE TABLE t_%d (id int, v text, r%d int)" % (i, rnd),
                            "INSERT INTO t_%d SELECT g, 'v' || g, %d FROM generate_series(1, 20) g" % (i, rnd)):
                    t0 = time.monotonic()
                    with c.cursor() as cur:
                        cur.execute(sql)
                    mine.append((time.monotonic() - t0, sql))
                t0 = time.monotonic()
                c.commit()
                mine.append((time.monotonic() - t0, "COMMIT"))
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append((i, "statement", str(e).strip()))
        finally:
            c.close()
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(1, N_CLIENTS + 1)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    wall = time.monotonic() - t0
    h.check(not errors, "%d clients x %d rounds: no client statement failed" % (N_CLIENTS, ROUNDS), errors[:5])
    latencies.sort(key=lambda x: x[0])
    if latencies:
        worst = latencies[-1]
        p99 = latencies[int(len(latencies) * 0.99) - 1][0]
        print("# %d statements in %.1f s; slowest client statement %.0f ms (%s); p99 %.0f ms"
              % (len(latencies), wall, worst[0] * 1000, worst[1], p99 * 1000))

    # The recreates that committed, from the event trigger: per transaction the OID dropped and the
    # OID created of each table.
    truth = h.ddl_truth()
    by_txn = collections.defaultdict(dict)
    rounds = collections.Counter()
    for r in truth:
        by_txn[r["txid"]]["dropped" if r["command_tag"].startswith("DROP") else "created"] = int(r["objid"])
        by_txn[r["txid"]]["name"] = r["object_identity"].split(".")[-1]
    recreates = [t for t in by_txn.values() if "dropped" in t and "created" in t]
    for t in recreates:   # truth.ddl is in commit order per table: a client's rounds are sequential
        t["round"] = rounds[t["name"]]
        rounds[t["name"]] += 1
    h.check(len(recreates) == N_CLIENTS * ROUNDS, "truth: %d committed recreates" % (N_CLIENTS * ROUNDS), len(recreates))

    def accounted():
        befores = {int(s["table_oid"]): s for s in h.snapshots("reason = 'pre_drop'")}
        afters = {s["pair_of"]: s for s in h.afters("reason = 'post_create'") if s["pair_of"]}
        ledger = {e["table_name"] for e in h.events("reason = 'post_create' AND outcome <> 'written'")}
        missing, wrong = [], []
        for t in recreates:
            b = befores.get(t["dropped"])
            a = afters.get(b["id"]) if b else None
            if a is None:
                missing.append(t)
            elif int(a["table_oid"]) != t["created"] or "r%d" % t["round"] not in h.snapshot_columns(a):
                wrong.append("%s round %d: created oid %d with column r%d, its post_create (pair_of the pre_drop of "
                             "oid %d) has oid %s and columns %s" % (t["name"], t["round"], t["created"], t["round"],
                                                                    t["dropped"], a["table_oid"], h.snapshot_columns(a)))
        return missing, wrong, ledger, afters

    deadline = time.monotonic() + 60
    while True:
        missing, wrong, ledger, afters = accounted()
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print("# %d paired post_create rows, %d recreates without one, %d describing another table; ledger rows of "
          "afters not written: %s" % (len(afters), len(missing), len(wrong), sorted(ledger)[:10]))
    unexplained = [t for t in missing if t["name"] not in ledger]
    h.check(not unexplained, "every committed recreate has its post_create (paired with the pre_drop of the OID its "
            "round dropped) or a ledger row saying why not (%d missing, %d unexplained)"
            % (len(missing), len(unexplained)), unexplained[:5])
    h.check(not wrong, "each round's post_create is the table that round created (its OID, its column r<round>)",
            "%d of %d: %s" % (len(wrong), len(recreates), wrong[:3]))
    h.check_afters_match_truth("%d clients x %d rounds" % (N_CLIENTS, ROUNDS), timeout=5)


if __name__ == "__main__":
    afterlib.main(test, "after_many_recreates")
