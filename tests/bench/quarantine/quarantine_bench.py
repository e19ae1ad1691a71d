#!/usr/bin/python3
"""Quarantine benchmarks (no assertions; figures only): run by run-quarantine-bench.sh.

1. drop: a table of QUARANTINE_BENCH_MB megabytes (rows of 1 kB, a primary key) dropped
   QUARANTINE_BENCH_REPS times each way, the client's time of the autocommit DROP TABLE alone:
   direct (the real DROP), through predrop with a snapshot rule (the real DROP plus one hold: what
   the quarantine is to cost at most) and through predrop with a quarantine rule (the hold, the
   subtransaction that checks the DROP, the move). A move touches no data, so its time should not
   grow with the table. The table is rebuilt before every DROP and checkpointed, so each DROP starts
   from the same state.
2. purge: QUARANTINE_BENCH_PURGE_TABLES small tables (an index each) quarantined through predrop,
   then `predrop quarantine purge --older-than 0s` timed: tables per second.
Results as TSV lines (section, metric, value) after the human-readable lines, and in
$BENCH_WORK/quarantine-results.tsv when BENCH_WORK is set.
"""
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
from predrop_harness import Predrop  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import record, write_results  # noqa: E402

MB = int(os.environ.get("QUARANTINE_BENCH_MB", "1024"))
REPS = int(os.environ.get("QUARANTINE_BENCH_REPS", "2"))
PURGE_TABLES = int(os.environ.get("QUARANTINE_BENCH_PURGE_TABLES", "200"))
HOST = os.environ.get("PGHOST", "127.0.0.1")
PORT = int(os.environ.get("PGPORT", "5432"))
BIN = os.environ["PREDROP_BIN"]


def conninfo(db, port=None):
    return "host=%s port=%d dbname=%s user=postgres sslmode=disable" % (HOST if port is None else "127.0.0.1",
                                                                       port or PORT, db)


def connect(db, port=None):
    c = psycopg2.connect(conninfo(db, port))
    c.autocommit = True
    return c


def exec_sql(db, sql, port=None):
    c = connect(db, port)
    try:
        with c.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall() if cur.description else None
    finally:
        c.close()


class Bench:
    def __init__(self):
        tag = "%d_%04x" % (os.getpid(), random.randrange(1 << 16))
        self.db = "qbench_%s" % tag
        self.store_db = self.db + "_store"
        self.work = tempfile.mkdtemp(prefix="quarantine-bench.", dir=os.environ.get("BENCH_WORK") or "/tmp")
        os.chmod(self.work, 0o755)
        self.instances = []
        for d in (self.db, self.store_db):
            exec_sql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % d)
            exec_sql("postgres", "CREATE DATABASE %s TEMPLATE template0" % d)
        print("# quarantine bench: database %s, store %s, work dir %s" % (self.db, self.store_db, self.work))

    def predrop(self, label, rule):
        cfg = os.path.join(self.work, label + ".yaml")
        with open(cfg, "w") as f:
            f.write("rules:\n  - {kinds: [drop_table, drop_schema], action: %s}\n" % rule)
        p = Predrop(self.work, "--capture", "host=%s port=%d user=postgres" % (HOST, PORT),
                    "--store", conninfo(self.store_db), "--config", cfg, "--hold-timeout-ms", "60000")
        p.start()
        self.instances.append(p)
        print("# predrop %s: pid %d port %d (action: %s)" % (label, p.pid, p.port, rule))
        return p

    def cleanup(self):
        for p in self.instances:
            p.stop()
        if not os.environ.get("BENCH_WORK"):
            shutil.rmtree(self.work, ignore_errors=True)
        for d in (self.db, self.store_db):
            try:
                exec_sql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % d)
            except psycopg2.Error as e:
                print("# could not drop %s: %s" % (d, e))


def build_big(db, name):
    rows = MB * 1024 * 1024 // 1100
    c = connect(db)
    with c.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS %s" % name)
        cur.execute("CREATE TABLE %s (id bigint PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)" % name)
        cur.execute("INSERT INTO %s SELECT g, repeat(md5(g::text), 31) FROM generate_series(1, %d) g" % (name, rows))
        cur.execute("SELECT pg_total_relation_size('%s')" % name)
        size = cur.fetchone()[0]
        cur.execute("CHECKPOINT")
    c.close()
    return size


def timed_drop(db, name, port=None):
    c = connect(db, port)
    with c.cursor() as cur:
        t0 = time.monotonic()
        cur.execute("DROP TABLE %s" % name)
        ms = (time.monotonic() - t0) * 1000
    c.close()
    return ms


def drop_bench(b, snap, quar):
    times = {"direct": [], "snapshot": [], "quarantine": []}
    size = 0
    for rep in range(REPS):
        for way, port in (("direct", None), ("snapshot", snap.port), ("quarantine", quar.port)):
            name = "big_%s_%d" % (way, rep)
            size = build_big(b.db, name)
            times[way].append(timed_drop(b.db, name, port))
            print("# drop %s rep %d: %.1f ms (%d MB)" % (way, rep, times[way][-1], size // (1 << 20)))
    held = exec_sql(b.db, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "WHERE n.nspname = 'predrop_quarantine' AND c.relkind = 'r'")[0][0]
    med = {k: statistics.median(v) for k, v in times.items()}
    print("drop of a %d MB table, client's time (median of %d): direct %.1f ms, through predrop (snapshot) %.1f ms, "
          "through predrop (quarantine) %.1f ms; quarantine / snapshot %.2f; %d tables quarantined"
          % (size // (1 << 20), REPS, med["direct"], med["snapshot"], med["quarantine"],
             med["quarantine"] / med["snapshot"] if med["snapshot"] else float("nan"), held))
    record("drop", "table_mb", size // (1 << 20))
    for k, v in med.items():
        record("drop", k + "_ms", round(v, 2))
    record("drop", "quarantine_over_snapshot", round(med["quarantine"] / med["snapshot"], 3) if med["snapshot"] else "nan")
    record("drop", "quarantine_minus_snapshot_ms", round(med["quarantine"] - med["snapshot"], 2))
    # Reclaim the space before the purge bench.
    purge(b, "--older-than", "0s")


def purge(b, *args):
    cfg = os.path.join(b.work, "purge.yaml")
    with open(cfg, "w") as f:
        f.write("rules: []\n")
    t0 = time.monotonic()
    r = subprocess.run([BIN, "quarantine", "purge", "--config", cfg, "--capture",
                        "host=%s port=%d user=postgres" % (HOST, PORT), "--store", conninfo(b.store_db),
                        "--database", b.db, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    secs = time.monotonic() - t0
    if r.returncode != 0:
        print("# purge failed (%d): %s" % (r.returncode, r.stdout[-2000:]))
    return secs, r


def purge_bench(b, quar):
    c = connect(b.db, quar.port)
    with c.cursor() as cur:
        for i in range(PURGE_TABLES):
            cur.execute("CREATE TABLE small_%d (id int PRIMARY KEY, v text)" % i)
            cur.execute("INSERT INTO small_%d SELECT g, 'x' FROM generate_series(1, 100) g" % i)
            cur.execute("DROP TABLE small_%d" % i)
    c.close()
    held = exec_sql(b.db, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "WHERE n.nspname = 'predrop_quarantine' AND c.relkind = 'r'")[0][0]
    secs, r = purge(b, "--older-than", "0s")
    left = exec_sql(b.db, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "WHERE n.nspname = 'predrop_quarantine' AND c.relkind = 'r'")[0][0]
    rate = (held - left) / secs if secs > 0 else float("nan")
    print("purge: %d quarantined tables, %d purged in %.2f s (%.0f tables/s, the CLI's start included); %d left"
          % (held, held - left, secs, rate, left))
    record("purge", "tables", held)
    record("purge", "purged", held - left)
    record("purge", "seconds", round(secs, 3))
    record("purge", "tables_per_s", round(rate, 1))


def main():
    b = Bench()
    try:
        snap = b.predrop("snapshot", "snapshot")
        quar = b.predrop("quarantine", "quarantine")
        drop_bench(b, snap, quar)
        purge_bench(b, quar)
    finally:
        b.cleanup()
    write_results("quarantine")


if __name__ == "__main__":
    main()
