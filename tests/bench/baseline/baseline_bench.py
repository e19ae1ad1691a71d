#!/usr/bin/python3
"""`predrop baseline` of analysed tables into an empty store (issue 21: >= 3,000 tables/s for 300
analysed tables): no assertions, figures only.

BASELINE_TABLES (300) tables of BASELINE_COLUMNS (12) columns and 200 rows each, analysed, in a
schema of their own; each run empties the store and baselines them with the command's defaults
(--schema of that schema only). Printed per run and as medians: the command's own figure
(tables/s, from --format json) and its wall time, process start and connections included.
BASELINE_BINS="label=/path/to/predrop ..." compares builds in one run, interleaved, the order
reversed every other round (before and after a change).

Environment: PGHOST PGPORT PREDROP_BIN; BASELINE_TABLES, BASELINE_COLUMNS, BASELINE_REPS (8),
BASELINE_BINS; BENCH_WORK (results in baseline-results.tsv).
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import builds, record, write_results  # noqa: E402
import holdlib  # noqa: E402

TABLES = int(os.environ.get("BASELINE_TABLES", "300"))
COLUMNS = max(4, int(os.environ.get("BASELINE_COLUMNS", "12")))
REPS = int(os.environ.get("BASELINE_REPS", "8"))
SCHEMA = "baseline_bench"


def make_tables(h):
    # The churn bench's shape (tests/bench/churn/churn_bench.py), widened with text columns.
    extra = range(5, COLUMNS + 1)
    cols = "id int, provincia text, monto numeric, fecha date" + "".join(", c%d text" % i for i in extra)
    # mod(), not %: the text goes through format(), where % is a specifier.
    vals = ("g, ''provincia '' || mod(g, 24), g * 1.5, date ''2026-01-01'' + mod(g, 365)"
            + "".join(", ''v'' || mod(g, %d)" % (i % 34 + 7) for i in extra))
    h.exec("CREATE SCHEMA %s" % SCHEMA)
    h.exec("DO $$BEGIN FOR i IN 1..%d LOOP "
           "EXECUTE format('CREATE TABLE %s.t%%s (%s)', i); "
           "EXECUTE format('INSERT INTO %s.t%%s SELECT %s FROM generate_series(1, 200) g', i); "
           "END LOOP; END$$" % (TABLES, SCHEMA, cols, SCHEMA, vals))
    h.exec("ANALYZE")


def run_once(h, path):
    h.exec("TRUNCATE predrop.schema_snapshots", db=h.store_db)
    t0 = time.monotonic()
    r = subprocess.run([path, "baseline", "--store", h.store_conninfo(), "--target", h.conninfo(),
                        "--schema", SCHEMA, "--format", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError("predrop baseline exited %d: %s" % (r.returncode, r.stdout[-2000:]))
    out = json.loads(r.stdout[r.stdout.index("{"):])
    if out["captured"] != TABLES:
        raise RuntimeError("predrop baseline captured %s of %d tables: %s" % (out["captured"], TABLES, r.stdout[-2000:]))
    return out["tables_per_s"], wall


def main():
    h = holdlib.Hold("baseline")
    try:
        r = subprocess.run([os.environ["PREDROP_BIN"], "migrate", "--store", h.store_conninfo()],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("predrop migrate: " + r.stdout)
        make_tables(h)
        targets = builds("BASELINE_BINS", "predrop")
        rates, walls = {}, {}
        print("predrop baseline of %d analysed %d-column tables (200 rows each) into an empty store, %d rounds:"
              % (TABLES, COLUMNS, REPS))
        for rep in range(REPS):
            for label, path in (targets if rep % 2 == 0 else targets[::-1]):
                rate, wall = run_once(h, path)
                rates.setdefault(label, []).append(rate)
                walls.setdefault(label, []).append(wall)
                print("  round %d %-12s %7.0f tables/s (its own figure)  %6.0f ms wall" % (rep + 1, label, rate, wall * 1e3),
                      flush=True)
        for label, _ in targets:
            rate, wall = statistics.median(rates[label]), statistics.median(walls[label])
            print("  %-12s median %7.0f tables/s (range %.0f-%.0f)  %6.0f ms wall  (issue 21: >= 3,000 tables/s)"
                  % (label, rate, min(rates[label]), max(rates[label]), wall * 1e3), flush=True)
            record("baseline", "%s_tables_per_s" % label, "%.0f" % rate)
            record("baseline", "%s_wall_ms" % label, "%.0f" % (wall * 1e3))
    finally:
        h.cleanup()
    write_results("baseline")


if __name__ == "__main__":
    main()
