#!/usr/bin/python3
"""After-capture benchmarks (no assertions; figures only): run by run-after-bench.sh.

1. churn: pgbench, AFTER_BENCH_CLIENTS clients, each transaction three autocommit statements on a table
   of its own (CREATE TABLE, INSERT 20 rows, DROP), for AFTER_BENCH_SECONDS per run, AFTER_BENCH_REPS
   runs per target, on and off side by side in each: predrop with capture.after on, predrop with
   capture.after off (both hold the DROP for its before), direct and PgBouncer. The after runs off the
   client's path, so the on/off throughput ratio is what it costs the client; predrop's and the
   cluster's CPU per transaction (/proc) say what it costs the host. Between runs the bench waits until the after-on
   instance's queue is empty, so no run inherits another's afters.
2. commit to after: AFTER_BENCH_SAMPLES single CREATE TABLE statements through predrop, spaced out,
   then the same number back to back (burst); for each, the client's monotonic time from the
   statement's completion (ReadyForQuery) to the arrival of its post_create NOTIFY predrop_snapshots
   on a LISTEN connection to the store in the same process. p50, p99, max.
3. statistics watcher: AFTER_BENCH_WAITING tables created through a predrop with
   capture.stats_poll_ms = AFTER_BENCH_POLL_MS, autovacuum off for them and no ANALYZE, so every after
   keeps waiting; over AFTER_BENCH_WATCH_S seconds the admin metrics give the checks per period and
   the tables waiting; the same query predrop runs (capture/after_capture.cpp, poll_database) over
   those OIDs under EXPLAIN ANALYZE gives the server's time per check, and predrop's CPU over the
   watch its own.
Results as TSV lines (section, metric, value) after the human-readable lines, and in
$BENCH_WORK/after-results.tsv when BENCH_WORK is set.
"""
import json
import os
import random
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import psycopg2
import psycopg2.extensions

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
from predrop_harness import Predrop  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import cpu_ticks, free_port, pct, postmaster_pid, record, server_ticks, write_results  # noqa: E402

SECONDS = int(os.environ.get("AFTER_BENCH_SECONDS", "8"))
CLIENTS = int(os.environ.get("AFTER_BENCH_CLIENTS", "8"))
REPS = int(os.environ.get("AFTER_BENCH_REPS", "5"))
SAMPLES = int(os.environ.get("AFTER_BENCH_SAMPLES", "200"))
SPACING_MS = float(os.environ.get("AFTER_BENCH_SPACING_MS", "30"))
WAITING = int(os.environ.get("AFTER_BENCH_WAITING", "1000"))
POLL_MS = int(os.environ.get("AFTER_BENCH_POLL_MS", "500"))
WATCH_S = float(os.environ.get("AFTER_BENCH_WATCH_S", "10"))
SKIP = os.environ.get("AFTER_BENCH_SKIP", "").split()
HOST = os.environ["PGHOST"]
PORT = int(os.environ["PGPORT"])
PGB_PORT = int(os.environ["PGB_PORT"]) if os.environ.get("PGB_PORT") else None
CLK_TCK = os.sysconf("SC_CLK_TCK")






def conninfo(db, port=None):
    return "host=%s port=%d dbname=%s user=postgres sslmode=disable" % (HOST if port is None else "127.0.0.1",
                                                                       port or PORT, db)


def connect(db, port=None):
    c = psycopg2.connect(conninfo(db, port))
    c.autocommit = True
    return c


def exec_sql(db, sql, params=None, port=None):
    c = connect(db, port)
    try:
        with c.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None
    finally:
        c.close()


def cluster_postmaster():
    try:
        return postmaster_pid(exec_sql("postgres", "SHOW data_directory")[0][0])
    except psycopg2.Error:
        return None


class Instance:
    """One predrop with capture and store and an admin endpoint; ENV sets its configuration."""

    def __init__(self, bench, label, env):
        self.label = label
        self.admin = "127.0.0.1:%d" % free_port()
        e = dict(os.environ)
        e.update(env)
        self.p = Predrop(bench.work, "--capture", "host=%s port=%d user=postgres" % (HOST, PORT),
                         "--store", conninfo(bench.store_db), "--admin", self.admin,
                         "--hold-timeout-ms", "60000", env=e)
        self.p.start()
        bench.instances.append(self)
        print("# predrop %s: pid %d port %d admin %s (%s)" % (label, self.p.pid, self.p.port, self.admin,
                                                            " ".join("%s=%s" % kv for kv in env.items()) or "defaults"))

    def metrics(self):
        with urllib.request.urlopen("http://%s/metrics" % self.admin, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for m in re.finditer(r"^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$", text, re.M):
            out.setdefault(m.group(1), 0.0)
            out[m.group(1)] += float(m.group(3))
        return out

    def metric(self, name):
        return self.metrics().get(name)

    def wait_drained(self, timeout=120):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if (self.metric("predrop_afters_queued") or 0) == 0:
                return time.monotonic() - t0
            time.sleep(0.1)
        return None




class Bench:
    def __init__(self):
        tag = "%d_%04x" % (os.getpid(), random.randrange(1 << 16))
        self.db = "afterbench_%s" % tag
        self.stats_db = self.db + "_stats"
        self.store_db = self.db + "_store"
        self.work = tempfile.mkdtemp(prefix="after-bench.", dir=os.environ.get("BENCH_WORK") or "/tmp")
        os.chmod(self.work, 0o755)
        self.instances = []
        for d in (self.db, self.stats_db, self.store_db):
            exec_sql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % d)
            exec_sql("postgres", "CREATE DATABASE %s TEMPLATE template0" % d)
        print("# after bench: database %s (churn, latency), %s (statistics watcher), store %s, work dir %s"
              % (self.db, self.stats_db, self.store_db, self.work))

    def cleanup(self):
        for i in self.instances:
            i.p.stop()
        # Inside `make bench` the work dir goes with the bench's; alone, the logs go unless kept.
        if not os.environ.get("BENCH_WORK") and os.environ.get("AFTER_BENCH_KEEP") != "1":
            shutil.rmtree(self.work, ignore_errors=True)
        for d in (self.db, self.stats_db, self.store_db):
            try:
                exec_sql("postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % d)
            except psycopg2.Error as e:
                print("# could not drop %s: %s" % (d, e))


CHURN_SCRIPT = """\\set t :client_id * 1000000000 + random(1, 999999999)
CREATE TABLE churn_:t (id int, v text);
INSERT INTO churn_:t SELECT g, md5(g::text) FROM generate_series(1, 20) g;
DROP TABLE churn_:t;
"""


def pgbench_churn(db, port, script, seconds=None):
    r = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n", "-r", "-M", "simple",
                        "-c", str(CLIENTS), "-j", "2", "-T", str(seconds or SECONDS), "-f", script, db],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tps = re.search(r"tps = ([0-9.]+) \((?:without|excluding)", r.stdout)
    lat = re.search(r"latency average = ([0-9.]+) ms", r.stdout)
    done = re.search(r"number of transactions actually processed: (\d+)", r.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", r.stdout)
    per = {}
    for m in re.finditer(r"^\s+([0-9.]+)\s+(?:\d+\s+)?(CREATE|INSERT|DROP)\b", r.stdout, re.M):
        per[m.group(2)] = float(m.group(1))
    return {"tps": float(tps.group(1)) if tps else float("nan"), "lat": float(lat.group(1)) if lat else float("nan"),
            "tx": int(done.group(1)) if done else 0, "failed": failed.group(1) if failed else "?",
            "rc": r.returncode, "per": per, "out": r.stdout}


def churn(b, on, off):
    script = os.path.join(b.work, "churn.sql")
    with open(script, "w") as f:
        f.write(CHURN_SCRIPT)
    targets = [("after_on", on.p.port, on), ("after_off", off.p.port, off), ("direct", PORT, None)]
    if PGB_PORT:
        targets.append(("pgbouncer", PGB_PORT, None))
    print("churn: pgbench -c %d -j 2 -T %d -M simple, a transaction = CREATE TABLE + INSERT 20 rows + DROP "
          "(three autocommit statements, a table of its own each time), %d runs per target:" % (CLIENTS, SECONDS, REPS))
    # Warm-up, then ANALYZE the store, as autovacuum does within a minute of a new store's first
    # writes: until then the store statements' generic plans, prepared on an empty table, may pick an
    # index by database alone and read every row of it (4-7 ms of server CPU per after were seen in
    # runs without this). ANALYZE replans them; the runs measure the store as it is after that.
    for _, port, _ in targets[:2]:
        pgbench_churn(b.db, port, script, seconds=2)
    on.wait_drained()
    exec_sql(b.store_db, "ANALYZE predrop.schema_snapshots")
    exec_sql(b.store_db, "ANALYZE predrop.drop_events")
    runs = {}
    pm = cluster_postmaster()
    for rep in range(REPS):
        # On and off side by side in every repetition (the host's speed drifts), each first in turn.
        order = targets if rep % 2 == 0 else targets[::-1]
        for name, port, inst in order:
            before = on.metrics()
            pid = inst.p.pid if inst else None
            c0 = cpu_ticks(pid) if pid else None
            s0 = server_ticks(pm)
            r = pgbench_churn(b.db, port, script)
            c1 = cpu_ticks(pid) if pid else None
            drained = on.wait_drained()
            time.sleep(0.2)   # the last afters' connections go idle
            s1 = server_ticks(pm)
            server = "-"
            if s0 is not None and s1 is not None and r["tx"]:
                r["server_us"] = (s1 - s0) * 1e6 / CLK_TCK / r["tx"]
                server = "%.0f" % r["server_us"]
            cpu = "-"
            if c0 is not None and c1 is not None and r["tx"]:
                r["cpu_us"] = (c1 - c0) * 1e6 / CLK_TCK / r["tx"]
                cpu = "%.0f" % r["cpu_us"]
            after = on.metrics()
            extra = ""
            if name == "after_on":
                req = after.get("predrop_afters_requested_total", 0) - before.get("predrop_afters_requested_total", 0)
                wr = after.get("predrop_afters_written_total", 0) - before.get("predrop_afters_written_total", 0)
                lost = after.get("predrop_afters_lost_total", 0) - before.get("predrop_afters_lost_total", 0)
                r["afters"] = (req, wr, lost)
                extra = "  afters requested %d written %d lost %d (the rest: table dropped first); queue empty %.1f s after" % (
                    req, wr, lost, drained if drained is not None else float("nan"))
            runs.setdefault(name, []).append(r)
            per = " ".join("%s %.2f" % (k, r["per"][k]) for k in ("CREATE", "INSERT", "DROP") if k in r["per"])
            print("  rep %d %-10s tps %7.1f  latency %6.2f ms  (%s ms)  CPU/tx predrop %s us server %s us  failed %s%s%s" % (
                rep + 1, name, r["tps"], r["lat"], per, cpu, server, r["failed"],
                "" if r["rc"] == 0 else "  (pgbench exit %d: %s)" % (r["rc"], r["out"].strip().splitlines()[-1:]), extra))
    med = lambda name, key: statistics.median([r[key] for r in runs[name]]) if runs.get(name) else float("nan")
    for name in runs:
        record("churn", name + "_tps", "%.1f" % med(name, "tps"))
        record("churn", name + "_latency_ms", "%.2f" % med(name, "lat"))
        for k in ("CREATE", "INSERT", "DROP"):
            xs = [r["per"][k] for r in runs[name] if k in r["per"]]
            if xs:
                record("churn", "%s_%s_ms" % (name, k.lower()), "%.2f" % statistics.median(xs))
    paired = [a["tps"] / o["tps"] for a, o in zip(runs["after_on"], runs["after_off"]) if o["tps"]]
    print("  medians: " + ", ".join("%s %.1f tps" % (n, med(n, "tps")) for n in runs))
    # Paired by run (on and off back to back): the host's speed moves between repetitions by more
    # than the difference measured, so the ratio of the two medians can pair a fast run with a slow one.
    print("  throughput after-on / after-off: median of paired runs %.3f (by run %s; ratio of the medians %.3f; "
          "target >= 0.97)" % (statistics.median(paired), " ".join("%.3f" % x for x in paired),
                               med("after_on", "tps") / med("after_off", "tps")))
    record("churn", "tps_on_over_off_median_of_runs", "%.3f" % statistics.median(paired))
    record("churn", "tps_on_over_off_ratio_of_medians", "%.3f" % (med("after_on", "tps") / med("after_off", "tps")))
    cpu = {n: statistics.median([r["cpu_us"] for r in runs[n] if "cpu_us" in r]) for n in ("after_on", "after_off")
           if any("cpu_us" in r for r in runs[n])}
    if len(cpu) == 2:
        print("  predrop CPU per transaction: after-on %.0f us, after-off %.0f us (x%.2f; medians of runs)" % (
            cpu["after_on"], cpu["after_off"], cpu["after_on"] / cpu["after_off"]))
        record("churn", "after_on_predrop_cpu_us_per_tx", "%.0f" % cpu["after_on"])
        record("churn", "after_off_predrop_cpu_us_per_tx", "%.0f" % cpu["after_off"])
    srv = {n: statistics.median([r["server_us"] for r in runs[n] if "server_us" in r]) for n in runs
           if any("server_us" in r for r in runs[n])}
    if srv:
        print("  PostgreSQL CPU per transaction (whole cluster, medians of runs): " +
              ", ".join("%s %.0f us" % (n, v) for n, v in srv.items()))
        for n, v in srv.items():
            record("churn", n + "_server_cpu_us_per_tx", "%.0f" % v)
    for ref in ("direct", "pgbouncer"):
        if runs.get(ref):
            print("  after-on / %s %.3f, after-off / %s %.3f" % (ref, med("after_on", "tps") / med(ref, "tps"), ref,
                                                                 med("after_off", "tps") / med(ref, "tps")))
            record("churn", "tps_on_over_" + ref, "%.3f" % (med("after_on", "tps") / med(ref, "tps")))
            record("churn", "tps_off_over_" + ref, "%.3f" % (med("after_off", "tps") / med(ref, "tps")))
    req = sum(r["afters"][0] for r in runs["after_on"])
    wr = sum(r["afters"][1] for r in runs["after_on"])
    record("churn", "after_on_afters_requested", "%d" % req)
    record("churn", "after_on_afters_written", "%d" % wr)


class Listener(threading.Thread):
    """LISTEN predrop_snapshots on the store; the monotonic arrival time of each payload."""

    def __init__(self, store_db):
        super().__init__(daemon=True)
        self.conn = connect(store_db)
        with self.conn.cursor() as cur:
            cur.execute("LISTEN predrop_snapshots")
        self.arrived = {}   # (database, table, reason) -> monotonic seconds
        self.cv = threading.Condition()
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            if select.select([self.conn], [], [], 0.2)[0]:
                self.conn.poll()
                now = time.monotonic()
                with self.cv:
                    while self.conn.notifies:
                        n = self.conn.notifies.pop(0)
                        p = json.loads(n.payload)
                        self.arrived.setdefault((p.get("database"), p.get("table"), p.get("reason")), now)
                    self.cv.notify_all()

    def wait(self, key, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while key not in self.arrived and time.monotonic() < deadline:
                self.cv.wait(deadline - time.monotonic())
            return self.arrived.get(key)

    def close(self):
        self.stop = True
        self.join(2)
        self.conn.close()


def commit_to_after(b, on):
    lst = Listener(b.store_db)
    c = connect(b.db, on.p.port)
    print("commit to after: CREATE TABLE (id int, v text) through predrop (capture.after on), completion at the "
          "client to its post_create NOTIFY on a LISTEN connection to the store:")
    try:
        for variant in ("spaced", "burst"):
            commits = {}
            with c.cursor() as cur:
                for i in range(SAMPLES):
                    name = "lat_%s_%d" % (variant, i)
                    cur.execute("CREATE TABLE %s (id int, v text)" % name)
                    commits[name] = time.monotonic()
                    if variant == "spaced":
                        lst.wait((b.db, name, "post_create"), 10)
                        time.sleep(SPACING_MS / 1000.0)
            lat, missing = [], []
            for name, t in commits.items():
                got = lst.wait((b.db, name, "post_create"), 30)
                if got is None:
                    missing.append(name)
                else:
                    lat.append((got - t) * 1000)
            label = "%s (%s)" % (variant, "one at a time, %g ms apart" % SPACING_MS if variant == "spaced"
                                 else "%d back to back on one connection" % SAMPLES)
            print("  %-44s p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (n=%d%s)" % (
                label, pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan"), len(lat),
                ", %d without a NOTIFY within 30 s: %s" % (len(missing), " ".join(missing[:10])) if missing else ""))
            record("commit_to_after", variant + "_p50_ms", "%.1f" % pct(lat, 50))
            record("commit_to_after", variant + "_p99_ms", "%.1f" % pct(lat, 99))
            record("commit_to_after", variant + "_max_ms", "%.1f" % (max(lat) if lat else float("nan")))
            record("commit_to_after", variant + "_missing", "%d" % len(missing))
    finally:
        c.close()
        lst.close()


CHECK_SQL = ("SELECT o::bigint, EXISTS (SELECT 1 FROM pg_stat_user_tables s WHERE s.relid = o"
             " AND coalesce(s.last_analyze, s.last_autoanalyze) IS NOT NULL)"
             " FROM unnest(%s::oid[]) AS o WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = o)")


def statistics_watcher(b):
    inst = Instance(b, "stats", {"PREDROP_CAPTURE_STATS_POLL_MS": str(POLL_MS)})
    print("statistics watcher: %d tables created through predrop (capture.stats_poll_ms %d, autovacuum off for "
          "them, no ANALYZE):" % (WAITING, POLL_MS))
    c = connect(b.stats_db, inst.p.port)
    t0 = time.monotonic()
    with c.cursor() as cur:
        for i in range(WAITING):
            cur.execute("CREATE TABLE st_%d (id int, v text) WITH (autovacuum_enabled = off)" % i)
    c.close()
    created = time.monotonic() - t0
    t1 = time.monotonic()
    m = inst.metrics()
    while time.monotonic() - t1 < 120:
        m = inst.metrics()
        if m.get("predrop_afters_waiting_for_statistics", 0) >= WAITING and m.get("predrop_afters_queued", 1) == 0:
            break
        time.sleep(0.1)
    settled = time.monotonic() - t1
    print("  created in %.1f s; %d afters written, %d waiting for statistics, %.1f s after the last CREATE" % (
        created, m.get("predrop_afters_written_total", 0), m.get("predrop_afters_waiting_for_statistics", 0), settled))
    record("stats_watcher", "afters_written", "%d" % m.get("predrop_afters_written_total", 0))
    record("stats_watcher", "seconds_to_all_waiting", "%.1f" % settled)

    first = inst.metrics()
    c0 = cpu_ticks(inst.p.pid)
    w0 = time.monotonic()
    samples = []
    while time.monotonic() - w0 < WATCH_S:
        time.sleep(1)
        mm = inst.metrics()
        samples.append((time.monotonic() - w0, mm.get("predrop_statistics_checks_total", 0),
                        mm.get("predrop_afters_waiting_for_statistics", 0)))
    elapsed = time.monotonic() - w0
    c1 = cpu_ticks(inst.p.pid)
    last = inst.metrics()
    checks = last.get("predrop_statistics_checks_total", 0) - first.get("predrop_statistics_checks_total", 0)
    periods = elapsed * 1000.0 / POLL_MS
    waiting = [s[2] for s in samples]
    cpu_ms = (c1 - c0) * 1000.0 / CLK_TCK if c0 is not None and c1 is not None else float("nan")
    print("  over %.1f s (%.1f periods of %d ms): %d statistics checks, %.2f per period for 1 database; waiting "
          "min %d max %d" % (elapsed, periods, POLL_MS, checks, checks / periods, min(waiting), max(waiting)))
    print("  predrop CPU over the watch %.0f ms (%.2f ms per check, everything included)" % (
        cpu_ms, cpu_ms / checks if checks else float("nan")))
    record("stats_watcher", "checks_per_period", "%.2f" % (checks / periods))
    record("stats_watcher", "waiting", "%d" % max(waiting))
    record("stats_watcher", "predrop_cpu_ms_per_check", "%.2f" % (cpu_ms / checks if checks else float("nan")))

    oids = [r[0] for r in exec_sql(b.stats_db, "SELECT oid::bigint FROM pg_class WHERE relname ~ '^st_[0-9]+$'")]
    arr = "{" + ",".join(str(o) for o in oids) + "}"
    d = connect(b.stats_db)
    exec_ms, plan_ms, wall_ms = [], [], []
    with d.cursor() as cur:
        for _ in range(10):
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + CHECK_SQL, (arr,))
            text = "\n".join(r[0] for r in cur.fetchall())
            exec_ms.append(float(re.search(r"Execution Time: ([0-9.]+) ms", text).group(1)))
            plan_ms.append(float(re.search(r"Planning Time: ([0-9.]+) ms", text).group(1)))
        for _ in range(20):
            t = time.monotonic()
            cur.execute(CHECK_SQL, (arr,))
            rows = cur.fetchall()
            wall_ms.append((time.monotonic() - t) * 1000)
    d.close()
    print("  one check over %d OIDs (%d rows), direct: server execution %.2f ms + planning %.2f ms (median of 10 "
          "EXPLAIN ANALYZE), client round trip %.2f ms (median of 20)" % (
              len(oids), len(rows), statistics.median(exec_ms), statistics.median(plan_ms), statistics.median(wall_ms)))
    print("  i.e. %.1f ms of server time per second of polling at %d ms" % (
        (statistics.median(exec_ms) + statistics.median(plan_ms)) * 1000.0 / POLL_MS, POLL_MS))
    record("stats_watcher", "check_execution_ms", "%.2f" % statistics.median(exec_ms))
    record("stats_watcher", "check_planning_ms", "%.2f" % statistics.median(plan_ms))
    record("stats_watcher", "check_round_trip_ms", "%.2f" % statistics.median(wall_ms))


def main():
    b = Bench()
    try:
        on = Instance(b, "after_on", {})
        off = Instance(b, "after_off", {"PREDROP_CAPTURE_AFTER": "false"})
        if "churn" not in SKIP:
            churn(b, on, off)
        if "latency" not in SKIP:
            commit_to_after(b, on)
        if "stats" not in SKIP:
            statistics_watcher(b)
    finally:
        b.cleanup()
    write_results("after")


if __name__ == "__main__":
    main()
