#!/usr/bin/python3
"""Soak with ground truth: pgbench-style reads and writes from --clients clients while droppers
create, fill, ANALYZE and drop tables in covered schemas at --drops-per-s DROP statements a second,
first straight to PostgreSQL, then through predrop. The server records every real drop itself (an
sql_drop event trigger, tests/hold/holdlib.py), and each dropped relation of the predrop phase must
be accounted for: a snapshot of that OID captured before the drop, or a ledger row
(predrop.drop_events) with a fail-open reason. Reports tps through predrop vs direct, the
accounting, client-visible errors, and predrop's RSS (idle, after warm-up, at the end of the load).

    soak.py --clients 60 --drops-per-s 5 --seconds 35 [--direct-seconds 10] [--max-rss-growth-pct 10]

Exits 1 on any unaccounted drop, client-visible error through predrop, crash, or RSS growth above
--max-rss-growth-pct when given (growth from the sample after 20 % of the run, when every client is
connected and warm, to the last sample of the load); the figures are printed and, with BENCH_WORK
set, written to $BENCH_WORK/soak-results.tsv. PREDROP_SOAK_ARGS (environment) is appended to the arguments, so a
caller can shorten a run without editing the test's command line (scripts/test.sh does under TSan).

Environment: PGHOST PGPORT (superuser postgres, trust), PREDROP_BIN, PREDROP_TEST_WORKDIR or
BENCH_WORK for the work dir.
"""
import argparse
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("PREDROP_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "hold"))
from predrop_harness import Predrop  # noqa: E402
from holdlib import TRUTH_SQL  # noqa: E402

READ_SQL = """\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
"""
# One account row and one history row a transaction: writes without pgbench_branches' single-row
# hot spot, so hundreds of clients measure the relay and not one lock queue.
WRITE_SQL = """\\set aid random(1, 100000 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""
FAIL_OPEN = ("timeout", "capture_error", "store_error", "table_missing", "unresolved", "disabled", "policy_skip",
             "deduplicated")


def log(msg):
    print("soak: " + msg, flush=True)


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Schedule:
    """The drop rate, shared by all droppers: ticket n is due n / rate seconds after the start, and
    whichever dropper is free takes the next one, so slow cycles are absorbed by more droppers in
    flight instead of lowering the rate."""

    def __init__(self, rate):
        self.rate, self.start, self.n, self.lock = rate, time.monotonic(), 0, threading.Lock()

    def next(self):
        with self.lock:
            n = self.n
            self.n += 1
        return n, self.start + n / self.rate


class Dropper(threading.Thread):
    """One dropping client taking tickets from the schedule, over psycopg2 or (use_psql) psql."""

    def __init__(self, idx, conninfo, schedule, stop, use_psql):
        super().__init__(daemon=True)
        self.idx, self.conninfo, self.schedule, self.stop, self.use_psql = idx, conninfo, schedule, stop, use_psql
        self.statements = 0      # DROP statements that succeeded
        self.relations = 0       # tables those statements dropped
        self.errors = []
        self.cycle_ms = []
        self.conn = None

    def sql_for(self, c):
        """The statements of cycle c and the number of tables its DROP removes."""
        schema = "soak_s%d" % self.idx
        cols = "(id int PRIMARY KEY, v text, n numeric, d date)"
        fill = "INSERT INTO %s SELECT g, md5(g::text), g * 1.5, DATE '2020-01-01' + g FROM generate_series(1, 200) g"
        kind = c % 10
        if kind <= 6:   # one table
            t = "%s.t_%d" % (schema, c)
            return ["CREATE TABLE %s %s" % (t, cols), fill % t, "ANALYZE %s" % t, "DROP TABLE %s" % t], 1
        if kind <= 8:   # two tables in one statement
            a, b = "%s.a_%d" % (schema, c), "%s.b_%d" % (schema, c)
            return (["CREATE TABLE %s %s" % (a, cols), "CREATE TABLE %s %s" % (b, cols), fill % a, fill % b,
                     "ANALYZE %s, %s" % (a, b), "DROP TABLE %s, %s" % (a, b)], 2)
        s = "soak_x%d_%d" % (self.idx, c)   # a schema with three tables, dropped with CASCADE
        stmts = ["CREATE SCHEMA %s" % s]
        for i in range(3):
            stmts += ["CREATE TABLE %s.t%d %s" % (s, i, cols), fill % ("%s.t%d" % (s, i))]
        return stmts + ["ANALYZE %s" % ", ".join("%s.t%d" % (s, i) for i in range(3)), "DROP SCHEMA %s CASCADE" % s], 3

    def run_cycle(self, c):
        stmts, tables = self.sql_for(c)
        if self.use_psql:
            cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.conninfo]
            for s in stmts:
                cmd += ["-c", s]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError("psql exit %d: %s" % (r.returncode, r.stderr.strip()[:300]))
        else:
            if self.conn is None:
                self.conn = psycopg2.connect(self.conninfo)
                self.conn.autocommit = True
            with self.conn.cursor() as cur:
                for s in stmts:
                    cur.execute(s)
        self.statements += 1
        self.relations += tables

    def run(self):
        while not self.stop.is_set():
            c, due = self.schedule.next()
            wait = due - time.monotonic()
            if wait > 0 and self.stop.wait(wait):
                break
            t0 = time.monotonic()
            try:
                self.run_cycle(c)
            except Exception as e:  # noqa: BLE001
                self.errors.append("dropper %d cycle %d: %s" % (self.idx, c, str(e).strip()[:300]))
                if self.conn is not None:
                    try:
                        self.conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                    self.conn = None
            self.cycle_ms.append((time.monotonic() - t0) * 1000)
        if self.conn is not None:
            self.conn.close()


class Soak:
    def __init__(self, a):
        self.a = a
        self.host, self.port = os.environ["PGHOST"], int(os.environ["PGPORT"])
        os.environ["PGUSER"] = "postgres"
        for v in ("PGPASSWORD", "PGSSLMODE", "PGSERVICE", "PGOPTIONS", "PGDATABASE"):
            os.environ.pop(v, None)
        os.environ["PSQLRC"] = "/dev/null"
        base = os.environ.get("BENCH_WORK") or os.environ.get("PREDROP_TEST_WORKDIR") or "/tmp"
        self.work = tempfile.mkdtemp(prefix="soak.", dir=base)
        os.chmod(self.work, 0o755)
        tag = "%d_%04x" % (os.getpid(), random.randrange(1 << 16))
        self.db, self.store = "soak_" + tag, "soak_%s_store" % tag
        self.p = None
        self.failures = []
        self.results = []

    def conninfo(self, db=None, port=None):
        return "host=%s port=%d dbname=%s user=postgres sslmode=disable" % (
            self.host if port is None else "127.0.0.1", port or self.port, db or self.db)

    def direct(self, sql, db=None, fetch=False):
        c = psycopg2.connect(self.conninfo(db))
        c.autocommit = True
        try:
            with c.cursor() as cur:
                cur.execute("SET client_min_messages = warning")
                cur.execute(sql)
                return cur.fetchall() if fetch else None
        finally:
            c.close()

    def result(self, metric, direct, predrop, note=""):
        self.results.append((metric, str(direct), str(predrop), note))

    def check(self, cond, msg):
        log(("ok: " if cond else "FAIL: ") + msg)
        if not cond:
            self.failures.append(msg)

    # ---- set-up ----

    def setup(self):
        for db in (self.db, self.store):
            self.direct("DROP DATABASE IF EXISTS %s WITH (FORCE)" % db, "postgres")
            self.direct("CREATE DATABASE %s TEMPLATE template0" % db, "postgres")
        self.direct(TRUTH_SQL)
        r = subprocess.run(["pgbench", "-i", "-q", "-s", str(self.a.scale), "-h", self.host, "-p", str(self.port),
                            "-U", "postgres", self.db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("pgbench -i failed: " + r.stdout[-500:])
        self.direct("VACUUM ANALYZE")
        for i in range(self.droppers):
            self.direct("CREATE SCHEMA soak_s%d" % i)
        for name, text in (("read.sql", READ_SQL), ("write.sql", WRITE_SQL)):
            with open(os.path.join(self.work, name), "w") as f:
                f.write(text)
        cap = "host=%s port=%d user=postgres" % (self.host, self.port)
        self.p = Predrop(self.work, "--capture", cap, "--store", self.conninfo(self.store),
                         *shlex.split(self.a.predrop_args))
        self.p.start()
        log("database %s, store %s, work dir %s, predrop pid %d on port %d"
            % (self.db, self.store, self.work, self.p.pid, self.p.port))

    def warm_parse_cache(self, statements):
        """Send STATEMENTS distinct destructive statements that destroy nothing (DROP TABLE IF EXISTS of
        absent tables, in the postgres database, so they touch neither the accounting nor the hold
        figures) through predrop before the load. Every DROP of the load has a name of its own, so
        predrop's parse cache (bounded by entry count) and the heap under it grow until the cache is
        full: measured flat from about 10,000 distinct statements on. Filling it first makes the RSS
        comparison measure the steady state, not a bounded cache filling up."""
        def worker(first, last):
            c = psycopg2.connect(self.conninfo("postgres", port=self.p.port))
            c.autocommit = True
            try:
                with c.cursor() as cur:
                    cur.execute("SET client_min_messages = warning")
                    for i in range(first, last):
                        cur.execute("DROP TABLE IF EXISTS predrop_soak_absent_%d" % i)
            finally:
                c.close()
        before = rss_kb(self.p.pid)
        t0 = time.monotonic()
        n = 8
        threads = [threading.Thread(target=worker, args=(k * statements // n, (k + 1) * statements // n)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        log("parse cache warmed with %d distinct DROP TABLE IF EXISTS statements in %.1f s: RSS %s -> %s kB"
            % (statements, time.monotonic() - t0, before, rss_kb(self.p.pid)))

    @property
    def droppers(self):
        # A cycle (create, fill, ANALYZE, held DROP) next to hundreds of busy clients can take a second
        # or two on a loaded 2-core box: enough droppers that cycles of up to 3 s keep the rate.
        return self.a.droppers or max(2, math.ceil(self.a.drops_per_s * 3))

    # ---- one phase: the load and the droppers against one port ----

    def phase(self, label, port, seconds):
        self.direct("TRUNCATE truth.drops")
        stop = threading.Event()
        schedule = Schedule(self.a.drops_per_s)
        ds = [Dropper(i, self.conninfo(port=port), schedule, stop, use_psql=(i == 0 and self.droppers > 1))
              for i in range(self.droppers)]
        rss = []
        sampler = None
        if label == "predrop":
            def sample():
                t0 = time.monotonic()
                while not stop.is_set():
                    v = rss_kb(self.p.pid)
                    if v is not None:
                        rss.append((time.monotonic() - t0, v))
                    stop.wait(1.0)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
        out = os.path.join(self.work, "pgbench-%s.log" % label)
        cmd = ["pgbench", "-n", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", str(self.a.clients),
               "-j", "2", "-T", str(seconds), "-P", str(max(5, seconds // 10)),
               "-f", os.path.join(self.work, "read.sql") + "@%d" % self.a.read_weight,
               "-f", os.path.join(self.work, "write.sql") + "@1", self.db]
        for d in ds:
            d.start()
        t0 = time.monotonic()
        with open(out, "w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
        wall = time.monotonic() - t0
        stop.set()
        for d in ds:
            d.join(180)
        if sampler:
            sampler.join(5)
        text = open(out, errors="replace").read()

        def grab(pat):
            m = re.search(pat, text, re.M)
            return m.group(1) if m else None
        ph = {
            "rc": rc,
            "tps": float(grab(r"^tps = ([0-9.]+) \(without initial connection time\)") or 0),
            "latency": grab(r"^latency average = ([0-9.]+) ms"),
            "processed": int(grab(r"^number of transactions actually processed: ([0-9]+)") or 0),
            "failed": grab(r"^number of failed transactions: ([0-9]+)"),
            "aborted": len(re.findall(r"client \d+ aborted", text)),
            "pgbench_errors": [l for l in text.splitlines() if "error" in l.lower() or "aborted" in l][:5],
            "statements": sum(d.statements for d in ds),
            "relations": sum(d.relations for d in ds),
            "drop_errors": [e for d in ds for e in d.errors],
            "wall": wall,
            "rss": rss,
            "cycle_ms": sorted(ms for d in ds for ms in d.cycle_ms),
        }
        cyc = ph["cycle_ms"]
        log("%s: pgbench rc %d, %.0f tps, latency %s ms, %d transactions, failed %s, aborted clients %d; "
            "%d DROP statements (%.1f/s) removing %d tables, %d dropper errors; drop cycle p50 %.0f ms max %.0f ms"
            % (label, rc, ph["tps"], ph["latency"], ph["processed"], ph["failed"], ph["aborted"], ph["statements"],
               ph["statements"] / wall, ph["relations"], len(ph["drop_errors"]),
               cyc[len(cyc) // 2] if cyc else 0, cyc[-1] if cyc else 0))
        for e in ph["pgbench_errors"] + ph["drop_errors"][:5]:
            log("  %s: %s" % (label, e))
        return ph

    # ---- the accounting of the predrop phase ----

    def account(self, expected_relations):
        truth = self.direct("SELECT schema_name, object_name, objid::bigint, dropped_at FROM truth.drops "
                            "WHERE object_type = 'table'", fetch=True)

        def unsettled():
            return self.direct("SELECT count(*) FROM predrop.drop_events WHERE database_name = '%s' "
                               "AND outcome = 'written' AND drop_outcome IS NULL" % self.db, self.store, fetch=True)[0][0]
        deadline = time.monotonic() + 30
        while unsettled() and time.monotonic() < deadline:
            time.sleep(0.5)
        snaps = self.direct("SELECT table_oid, captured_at FROM predrop.schema_snapshots WHERE database_name = '%s'"
                            % self.db, self.store, fetch=True)
        events = self.direct("SELECT table_oid, schema_name, table_name, outcome, drop_outcome FROM predrop.drop_events "
                             "WHERE database_name = '%s' OR database_name IS NULL" % self.db, self.store, fetch=True)
        snap_at = {}
        for oid, at in snaps:
            snap_at.setdefault(oid, []).append(at)
        ev_oid, ev_name = {}, {}
        for oid, schema, table, outcome, _ in events:
            ev_oid.setdefault(oid, []).append(outcome)
            ev_name.setdefault((schema, table), []).append(outcome)
        captured, reasons, unaccounted = 0, {}, []
        for schema, name, oid, dropped_at in truth:
            if any(at <= dropped_at for at in snap_at.get(oid, [])):
                captured += 1
                continue
            why = [o for o in ev_oid.get(oid, []) + ev_name.get((schema, name), []) if o in FAIL_OPEN]
            if why:
                reasons[why[0]] = reasons.get(why[0], 0) + 1
            else:
                unaccounted.append("%s.%s (oid %s, dropped %s, ledger %s)"
                                   % (schema, name, oid, dropped_at, ev_oid.get(oid) or ev_name.get((schema, name))))
        not_dropped = sum(1 for e in events if e[4] == "not_dropped")
        fail_open = sum(reasons.values())
        log("accounting: trigger saw %d dropped tables = %d with a snapshot before the drop + %d fail-open %s; "
            "%d unaccounted; ledger rows %d (%d marked not_dropped)"
            % (len(truth), captured, fail_open, reasons or "", len(unaccounted), len(events), not_dropped))
        for u in unaccounted[:10]:
            log("  unaccounted: " + u)
        self.check(len(truth) > 0, "the trigger recorded drops during the predrop phase (%d)" % len(truth))
        self.check(len(truth) == expected_relations,
                   "trigger's count %d = tables the droppers dropped through predrop %d" % (len(truth), expected_relations))
        self.check(not unaccounted, "0 unaccounted drops (%d)" % len(unaccounted))
        self.result("drops_seen_by_trigger", "-", len(truth))
        self.result("drops_with_snapshot_before", "-", captured)
        self.result("drops_fail_open", "-", fail_open, " ".join("%s=%d" % kv for kv in sorted(reasons.items())))
        self.result("drops_unaccounted", "-", len(unaccounted))
        holds = sorted(float(r[0]) for r in self.direct(
            "SELECT hold_ms FROM predrop.drop_events WHERE database_name = '%s' AND hold_ms IS NOT NULL" % self.db,
            self.store, fetch=True))
        if holds:
            def pct(q):
                return holds[min(len(holds) - 1, int(q * len(holds)))]
            log("hold_ms recorded by predrop: p50 %.0f, p99 %.0f, max %.0f (%d ledger rows)"
                % (pct(0.5), pct(0.99), holds[-1], len(holds)))
            self.result("hold_ms_p50_p99_max", "-", "%.0f / %.0f / %.0f" % (pct(0.5), pct(0.99), holds[-1]))

    def run(self):
        a = self.a
        self.setup()
        if a.warm_parse_cache:
            self.warm_parse_cache(a.warm_parse_cache)
        rss_idle = rss_kb(self.p.pid)
        log("%d clients, %d droppers at %.1f DROP statements/s, %d s direct then %d s through predrop"
            % (a.clients, self.droppers, a.drops_per_s, a.direct_seconds, a.seconds))
        d = self.phase("direct", self.port, a.direct_seconds) if a.direct_seconds > 0 else None
        p = self.phase("predrop", self.p.port, a.seconds)
        alive = self.p.alive()
        self.account(p["relations"])
        self.check(alive, "predrop still running after the load (pid %s)" % self.p.pid)
        errors = p["aborted"] + len(p["drop_errors"]) + (0 if p["failed"] == "0" else 1) + (1 if p["rc"] else 0)
        self.check(errors == 0, "0 client-visible errors through predrop (pgbench rc %d, failed %s, aborted clients %d, "
                   "dropper errors %d)" % (p["rc"], p["failed"], p["aborted"], len(p["drop_errors"])))
        if d is not None and (d["rc"] or d["drop_errors"] or d["aborted"]):
            log("note: the direct phase itself had errors (rc %d, aborted %d, dropper errors %d): not predrop's"
                % (d["rc"], d["aborted"], len(d["drop_errors"])))
        rss = p["rss"]
        warm_at = max(5.0, a.seconds * 0.2)
        warm = next((v for t, v in rss if t >= warm_at), rss[-1][1] if rss else None)
        end = rss[-1][1] if rss else None
        after = rss_kb(self.p.pid)
        growth = (end - warm) * 100.0 / warm if warm and end else None
        log("predrop RSS: %s kB idle, %s kB after %.0f s of load, %s kB at the end of the load (%s), %s kB after it"
            % (rss_idle, warm, warm_at, end, "growth %+.1f %%" % growth if growth is not None else "n/a", after))
        if a.max_rss_growth_pct is not None:
            self.check(growth is not None and growth <= a.max_rss_growth_pct,
                       "predrop RSS growth during the load %s <= %s %%"
                       % ("%.1f %%" % growth if growth is not None else "n/a", a.max_rss_growth_pct))
        if d is not None and d["tps"] > 0:
            log("tps: %.0f direct, %.0f through predrop (%.0f %% of direct)" % (d["tps"], p["tps"], p["tps"] * 100 / d["tps"]))
        self.result("clients", a.clients, a.clients)
        self.result("seconds", a.direct_seconds, a.seconds)
        self.result("tps", "%.0f" % d["tps"] if d else "-", "%.0f" % p["tps"],
                    "%.0f %% of direct" % (p["tps"] * 100 / d["tps"]) if d and d["tps"] else "")
        self.result("latency_ms", d["latency"] if d else "-", p["latency"])
        self.result("drop_statements_per_s", "%.1f" % (d["statements"] / d["wall"]) if d else "-",
                    "%.1f" % (p["statements"] / p["wall"]), "target %.1f" % a.drops_per_s)
        self.result("client_errors", (d["aborted"] + len(d["drop_errors"]) + (1 if d["rc"] else 0)) if d else "-", errors)
        self.result("predrop_rss_kb", "-", "%s / %s / %s" % (warm, end, after),
                    "after warm-up / end of load / after; idle %s; growth %s" % (
                        rss_idle, "%.1f %%" % growth if growth is not None else "n/a"))
        self.result("predrop_alive", "-", "yes" if alive else "NO")

    def finish(self):
        if self.p is not None:
            if not self.p.stop(30):
                self.failures.append("predrop did not stop on SIGTERM within 30 s")
            if self.failures:
                tail = self.p.log_text().splitlines()[-30:]
                print("----- tail of %s -----\n%s\n-----" % (self.p.log, "\n".join(tail)))
        for db in (self.db, self.store):
            try:
                self.direct("DROP DATABASE IF EXISTS %s WITH (FORCE)" % db, "postgres")
            except Exception as e:  # noqa: BLE001
                log("could not drop %s: %s" % (db, e))
        bench = os.environ.get("BENCH_WORK")
        if bench and self.results:
            with open(os.path.join(bench, "soak-results.tsv"), "w") as f:
                f.write("metric\tdirect\tpredrop\tnote\n")
                for r in self.results:
                    f.write("\t".join(r) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=60)
    ap.add_argument("--drops-per-s", type=float, default=5)
    ap.add_argument("--droppers", type=int, default=0, help="dropping clients (default: 3 per drop/s)")
    ap.add_argument("--seconds", type=int, default=35, help="length of the predrop phase")
    ap.add_argument("--direct-seconds", type=int, default=None, help="length of the direct phase (default --seconds)")
    ap.add_argument("--scale", type=int, default=5)
    ap.add_argument("--read-weight", type=int, default=4, help="read transactions per write transaction")
    ap.add_argument("--max-rss-growth-pct", type=float, default=None)
    ap.add_argument("--warm-parse-cache", type=int, default=0,
                    help="distinct statements that fill predrop's parse cache before the load (see warm_parse_cache)")
    ap.add_argument("--predrop-args", default="", help="extra predrop serve arguments")
    a = ap.parse_args(sys.argv[1:] + shlex.split(os.environ.get("PREDROP_SOAK_ARGS", "")))
    if a.direct_seconds is None:
        a.direct_seconds = a.seconds
    if not os.environ.get("PGHOST") or not os.environ.get("PGPORT"):
        print("FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)")
        sys.exit(1)
    if not os.environ.get("PREDROP_BIN"):
        print("FAIL: PREDROP_BIN unset")
        sys.exit(1)
    s = Soak(a)
    try:
        s.run()
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        s.failures.append("%s: %s" % (type(e).__name__, e))
    finally:
        s.finish()
    if s.failures:
        log("%d check(s) failed: %s" % (len(s.failures), "; ".join(s.failures)))
        sys.exit(1)
    log("all checks passed")


if __name__ == "__main__":
    main()
