#!/usr/bin/python3
"""The connections a fleet of sidecars holds against one server (issue 21): FLEET_INSTANCES predrop
instances (default 20), each with its own capture and store pools, as a sidecar per worker pod
runs. No assertions; the counts are read from pg_stat_activity (application_name predrop-capture /
predrop-store) at four moments:

  1. idle, just started: nothing opened yet
  2. under churn: every instance relays one client recreating its table (CREATE, INSERT, ANALYZE,
     DROP) for FLEET_SECONDS (default 10)
  3. right after the churn: what the pools keep
  4. after capture.idle_close_s (FLEET_IDLE_CLOSE_S, default 3, set low here to see it; the
     default is 60) plus a second: what a quiet fleet holds

The same is run with capture.idle_close_s: 0 (connections kept, as before) for comparison.
Environment: PGHOST PGPORT PREDROP_BIN; BENCH_WORK (results in fleet-results.tsv).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import record, write_results, bench_hold  # noqa: E402

INSTANCES = int(os.environ.get("FLEET_INSTANCES", "20"))
SECONDS = int(os.environ.get("FLEET_SECONDS", "10"))
IDLE_CLOSE = int(os.environ.get("FLEET_IDLE_CLOSE_S", "3"))

SCRIPT = """\
CREATE TABLE fleet_:client_id (id int, provincia text, monto numeric, fecha date);
INSERT INTO fleet_:client_id SELECT g, 'provincia ' || (g % 24), g * 1.5, date '2026-01-01' + g % 365 FROM generate_series(1, 200) g;
ANALYZE fleet_:client_id;
DROP TABLE fleet_:client_id;
"""


def counts(h):
    rows = h.q("SELECT application_name, count(*) FROM pg_stat_activity "
               "WHERE application_name IN ('predrop-capture', 'predrop-store') GROUP BY 1", db="postgres")
    d = dict(rows)
    return d.get("predrop-capture", 0), d.get("predrop-store", 0)


def run(h, idle_close, script):
    label = "idle_close_%ds" % idle_close
    instances = []
    for i in range(INSTANCES):
        # Each sidecar churns its own schema, as workers do their own tables.
        h.exec("CREATE SCHEMA IF NOT EXISTS w%d" % i)
        instances.append(h.start_predrop("--hold-timeout-ms", "60000", admin=False,
                                         config="capture:\n  idle_close_s: %d\n" % idle_close))
    time.sleep(1)
    seen = [("idle, just started", counts(h))]
    procs = []
    for i, p in enumerate(instances):
        env = dict(os.environ, PGOPTIONS="-c search_path=w%d" % i)
        procs.append(subprocess.Popen(["pgbench", "-h", "127.0.0.1", "-p", str(p.port), "-U", "postgres", "-n", "-c", "1",
                                       "-T", str(SECONDS), "-M", "simple", "-f", script, h.db],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    time.sleep(SECONDS / 2)
    peak = counts(h)
    for _ in range(int(SECONDS / 2)):
        time.sleep(0.5)
        c = counts(h)
        peak = (max(peak[0], c[0]), max(peak[1], c[1]))
    tps = 0.0
    for pr in procs:
        out = pr.communicate()[0]
        for line in out.splitlines():
            if line.startswith("tps = "):
                tps += float(line.split()[2])
    seen.append(("under churn (peak)", peak))
    seen.append(("right after the churn", counts(h)))
    if idle_close:
        time.sleep(idle_close + 1.5)
        seen.append(("after idle_close_s + 1.5 s", counts(h)))
    print("%d sidecars, capture.idle_close_s %d, one churning client each (%.0f cycles/s in all):"
          % (INSTANCES, idle_close, tps))
    for what, (cap, store) in seen:
        print("  %-28s capture %4d  store %4d  total %4d" % (what, cap, store, cap + store))
        record("fleet", "%s_%s_connections" % (label, what.split(" (")[0].replace(" ", "_").replace(",", "")),
               "%d" % (cap + store))
    for p in instances:
        h.stop_predrop(p)


def main():
    h, script = bench_hold("fleet", SCRIPT)
    try:
        run(h, IDLE_CLOSE, script)
        run(h, 0, script)
    finally:
        h.cleanup()
    write_results("fleet")


if __name__ == "__main__":
    main()
