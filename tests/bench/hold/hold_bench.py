#!/usr/bin/python3
"""Hold benchmarks (no assertions): run by run-hold-bench.sh.

1. one-table DROP: hold time over HOLD_BENCH_DROPS drops of small analysed tables (client wall time
   through predrop, predrop's own hold_ms from the ledger, and the same DROP direct for reference),
   p50/p99.
2. HOLD_BENCH_CASCADE_TABLES-table DROP SCHEMA ... CASCADE, HOLD_BENCH_CASCADE_REPS repetitions:
   client wall time through predrop and direct, predrop's hold_ms.
3. pgbench (built-in tpcb-like: BEGIN, 3 UPDATE, SELECT, INSERT, END; nothing destructive) for
   HOLD_BENCH_SECONDS per run, HOLD_BENCH_CLIENTS clients, modes HOLD_BENCH_MODES: through predrop
   with holds enabled (--capture/--store) vs the relay alone (no --capture/--store), alternating,
   HOLD_BENCH_REPS times; tps and statements/s (7 statements per transaction).
Results as TSV lines (section, metric, value) on stdout after the human-readable lines, and in
$BENCH_WORK/hold-results.tsv when BENCH_WORK is set.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "hold"))
import holdlib  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import pct, record, write_results  # noqa: E402

DROPS = int(os.environ.get("HOLD_BENCH_DROPS", "200"))
CASCADE_TABLES = int(os.environ.get("HOLD_BENCH_CASCADE_TABLES", "300"))
CASCADE_REPS = int(os.environ.get("HOLD_BENCH_CASCADE_REPS", "3"))
SECONDS = int(os.environ.get("HOLD_BENCH_SECONDS", "10"))
CLIENTS = int(os.environ.get("HOLD_BENCH_CLIENTS", "8"))
MODES = os.environ.get("HOLD_BENCH_MODES", "simple prepared").split()
REPS = int(os.environ.get("HOLD_BENCH_REPS", "2"))
SCALE = int(os.environ.get("HOLD_BENCH_SCALE", "5"))






def one_table(h):
    h.exec("DO $$BEGIN FOR i IN 1..%d LOOP EXECUTE format("
           "'CREATE TABLE public.b%%s AS SELECT g AS id, md5(g::text) AS v, g * 1.5 AS n, now()::date AS d "
           "FROM generate_series(1, 200) g', i); END LOOP; END$$; ANALYZE;" % DROPS)
    oids = {}
    for i in range(1, DROPS + 1):
        oids[i] = h.oid("public.b%d" % i)
    c = h.pconnect()
    wall = []
    with c.cursor() as cur:
        for i in range(1, DROPS + 1):
            t0 = time.monotonic()
            cur.execute("DROP TABLE b%d" % i)
            wall.append((time.monotonic() - t0) * 1000)
    c.close()
    # the same drops direct, for the DROP's own cost
    h.exec("DO $$BEGIN FOR i IN 1..%d LOOP EXECUTE format("
           "'CREATE TABLE public.b%%s AS SELECT g AS id, md5(g::text) AS v, g * 1.5 AS n, now()::date AS d "
           "FROM generate_series(1, 200) g', i); END LOOP; END$$; ANALYZE;" % DROPS)
    d = h.connect()
    direct = []
    with d.cursor() as cur:
        for i in range(1, DROPS + 1):
            t0 = time.monotonic()
            cur.execute("DROP TABLE b%d" % i)
            direct.append((time.monotonic() - t0) * 1000)
    d.close()
    time.sleep(1)
    holds = [r[0] for r in h.sq("SELECT hold_ms FROM predrop.drop_events WHERE database_name = %s AND table_name ~ '^b[0-9]+$' "
                                "AND hold_ms IS NOT NULL", (h.db,))]
    caps = [r[0] for r in h.sq("SELECT capture_ms FROM predrop.drop_events WHERE database_name = %s AND table_name ~ '^b[0-9]+$' "
                               "AND capture_ms IS NOT NULL", (h.db,))]
    written = h.sq("SELECT count(*) FROM predrop.drop_events WHERE database_name = %s AND table_name ~ '^b[0-9]+$' "
                   "AND outcome = 'written'", (h.db,))[0][0]
    print("one-table DROP x%d (%d snapshots written):" % (DROPS, written))
    for name, xs in (("client wall time through predrop", wall), ("client wall time direct", direct),
                     ("predrop hold_ms (ledger)", holds), ("predrop capture_ms (ledger)", caps)):
        print("  %-36s p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (n=%d)" % (name, pct(xs, 50), pct(xs, 99),
                                                                           max(xs) if xs else float("nan"), len(xs)))
        key = name.split(" (")[0].replace(" ", "_")
        record("one_table", key + "_p50_ms", "%.1f" % pct(xs, 50))
        record("one_table", key + "_p99_ms", "%.1f" % pct(xs, 99))


def cascade(h):
    make = ("CREATE SCHEMA big; DO $$BEGIN FOR i IN 1..%d LOOP EXECUTE format("
            "'CREATE TABLE big.t%%s (id int PRIMARY KEY, v text, n numeric, d date)', i); END LOOP; END$$; ANALYZE;"
            % CASCADE_TABLES)
    print("%d-table DROP SCHEMA ... CASCADE x%d:" % (CASCADE_TABLES, CASCADE_REPS))
    for rep in range(1, CASCADE_REPS + 1):
        h.exec(make)
        c = h.pconnect()
        with c.cursor() as cur:
            t0 = time.monotonic()
            cur.execute("DROP SCHEMA big CASCADE")
            ms = (time.monotonic() - t0) * 1000
        c.close()
        h.exec(make)
        d = h.connect()
        with d.cursor() as cur:
            t0 = time.monotonic()
            cur.execute("DROP SCHEMA big CASCADE")
            ms_d = (time.monotonic() - t0) * 1000
        d.close()
        time.sleep(0.5)
        hold = h.sq("SELECT max(hold_ms), count(*) FILTER (WHERE outcome = 'written') FROM predrop.drop_events "
                    "WHERE database_name = %s AND schema_name = 'big' AND occurred_at > now() - interval '30 s'", (h.db,))
        print("  rep %d: through predrop %7.0f ms, direct %7.0f ms, predrop hold_ms %s (%s written)"
              % (rep, ms, ms_d, "%.0f" % hold[0][0] if hold[0][0] is not None else "-", hold[0][1]))
        record("cascade", "rep%d_predrop_ms" % rep, "%.0f" % ms)
        record("cascade", "rep%d_direct_ms" % rep, "%.0f" % ms_d)
        record("cascade", "rep%d_hold_ms" % rep, "%.0f" % (hold[0][0] or 0))
        h.exec("DELETE FROM predrop.drop_events WHERE schema_name = 'big'", db=h.store_db)


def pgbench(h, holds_port, relay_port):
    subprocess.run(["pgbench", "-h", h.host, "-p", str(h.port), "-U", "postgres", "-i", "-q", "-s", str(SCALE), h.db],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    h.exec("VACUUM ANALYZE")
    print("pgbench tpcb-like (no destructive statements), -c %d -j 2 -T %d, scale %d:" % (CLIENTS, SECONDS, SCALE))
    tps = {}
    for rep in range(REPS):
        for mode in MODES:
            order = [("holds", holds_port), ("relay", relay_port)]
            if rep % 2:
                order.reverse()
            for name, port in order:
                r = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n", "-c",
                                    str(CLIENTS), "-j", "2", "-T", str(SECONDS), "-M", mode, h.db],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                m = re.search(r"tps = ([0-9.]+) \((?:without|excluding)", r.stdout)
                fails = re.search(r"number of failed transactions: (\d+)", r.stdout)
                v = float(m.group(1)) if m else float("nan")
                tps.setdefault((mode, name), []).append(v)
                print("  rep %d %-8s %-6s tps %8.1f  statements/s %8.0f%s" % (
                    rep + 1, mode, name, v, v * 7, "" if r.returncode == 0 else "  (pgbench exit %d)" % r.returncode)
                      + ("  failed transactions %s" % fails.group(1) if fails and fails.group(1) != "0" else ""))
    for (mode, name), vs in sorted(tps.items()):
        avg = sum(vs) / len(vs)
        record("pgbench", "%s_%s_tps" % (mode, name), "%.1f" % avg)
        record("pgbench", "%s_%s_statements_per_s" % (mode, name), "%.0f" % (avg * 7))
    for mode in MODES:
        a = tps.get((mode, "holds"), [])
        b = tps.get((mode, "relay"), [])
        if a and b:
            ra, rb = sum(a) / len(a), sum(b) / len(b)
            print("  %-8s holds enabled %8.1f tps vs relay alone %8.1f tps: %+.1f%%" % (mode, ra, rb, (ra / rb - 1) * 100))


def main():
    h = holdlib.Hold("bench")
    try:
        h.start_predrop("--hold-timeout-ms", "60000")
        holds = h.p
        skip = os.environ.get("HOLD_BENCH_SKIP", "").split()
        if "one_table" not in skip:
            one_table(h)
        if "cascade" not in skip:
            cascade(h)
        if "pgbench" not in skip:
            relay = holdlib.Predrop(h.work)  # no --capture/--store: the relay alone
            relay.start()
            h.instances.append(relay)
            pgbench(h, holds.port, relay.port)
    finally:
        h.cleanup()
    write_results("hold")


if __name__ == "__main__":
    main()
