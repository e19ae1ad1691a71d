#!/usr/bin/python3
"""The store as it grows (issue 21): no assertions, figures only.

1. Per-write time against the store's size: the recreate cycle (CREATE, INSERT 200, ANALYZE,
   DROP) through predrop for STORE_SECONDS (default 8) with one client, on an empty store, then
   again after STORE_ROWS (default 1,000,000) snapshot rows and as many ledger rows were loaded
   into it (10,000 table names, 100 versions each, befores and paired afters), first with the
   loaded store never analysed, by the predrop that ran on the empty store (its statements were
   prepared there: capture/pg_async.cpp, replan_due) and by a fresh one, then after ANALYZE.
   Printed: the DROP's latency at the client (pgbench -r), the hold's p50/p99 from the ledger,
   cycles per second, and how long predrop's background store work went on after the run.
2. Bytes per snapshot: STORE_TABLES (default 200) analysed 20-column tables of 2,000 rows dropped
   through predrop, of two kinds (TABLE_KINDS: every common type, and the reference platform's
   open-data shape); the snapshot rows' average size (pg_column_size of the row) and the table's
   growth with its indexes and TOAST, per snapshot (spec 023 SC-006: about 4 KB).

Environment: PGHOST PGPORT PREDROP_BIN; BENCH_WORK (results in store-results.tsv).
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import pct, record, write_results, bench_hold, settle, load_store  # noqa: E402

SECONDS = int(os.environ.get("STORE_SECONDS", "8"))
ROWS = int(os.environ.get("STORE_ROWS", "1000000"))
TABLES = int(os.environ.get("STORE_TABLES", "200"))

SCRIPT = """\
CREATE TABLE store_churn (id int, provincia text, monto numeric, fecha date);
INSERT INTO store_churn SELECT g, 'provincia ' || (g % 24), g * 1.5, date '2026-01-01' + g % 365 FROM generate_series(1, 200) g;
ANALYZE store_churn;
DROP TABLE store_churn;
"""


def churn(h, label, script, p=None):
    """One cell; p: a running predrop to use (and leave running), else a fresh one."""
    h.exec("DROP TABLE IF EXISTS store_churn")
    own = p is None
    if own:
        p = h.start_predrop("--hold-timeout-ms", "60000", admin=False)
    started = h.sq("SELECT now()")[0][0]
    r = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(p.port), "-U", "postgres", "-n", "-c", "1", "-T",
                        str(SECONDS), "-r", "-M", "simple", "-f", script, h.db],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tps = re.search(r"tps = ([0-9.]+)", r.stdout)
    drop = re.search(r"^\s+([0-9.]+)\s+\d+\s+DROP TABLE", r.stdout, re.M)
    # The background store work (outcomes, copied afters) that the run left behind: on a store its
    # plans read whole, it runs on long after the client stopped.
    lag = settle(h)
    holds = [x[0] for x in h.sq("SELECT hold_ms FROM predrop.drop_events WHERE occurred_at >= %s AND hold_ms IS NOT NULL "
                                "AND table_name = 'store_churn'", (started,))]
    if own:
        h.stop_predrop(p)
    rows = h.sq("SELECT count(*) FROM predrop.schema_snapshots")[0][0]
    print("  %-34s store %9d rows: %7.1f cycles/s, DROP %5s ms at the client, hold p50 %.2f ms p99 %.2f ms, "
          "store work done %.1f s after the run"
          % (label, rows, float(tps.group(1)) if tps else float("nan"), drop.group(1) if drop else "-",
             pct(holds, 50), pct(holds, 99), lag))
    key = label.replace(" ", "_").replace(",", "")
    record("store", key + "_cycles_per_s", tps.group(1) if tps else "nan")
    record("store", key + "_drop_ms", drop.group(1) if drop else "nan")
    record("store", key + "_hold_p50_ms", "%.2f" % pct(holds, 50))
    record("store", key + "_hold_p99_ms", "%.2f" % pct(holds, 99))
    record("store", key + "_store_lag_s", "%.1f" % lag)


# Two kinds of analysed 20-column table. "every type": one column of each common type, three of
# them hex (md5 text, uuid, bytea) whose 20 histogram values lz4 (the server's TOAST compressor)
# cannot shrink. "open data": the shape of the reference platform's ingested tables, whose own
# measurement SC-006 is (spec 023: ~4 KB per snapshot over its real tables): names, codes, free
# text, amounts, dates and coordinates, as a CSV from a public body has them.
TABLE_KINDS = [
    ("every type",
     ["bigint", "int", "smallint", "bigint", "numeric", "real", "double precision", "text", "varchar(40)",
      "char(8)", "boolean", "date", "timestamp", "timestamptz", "uuid", "jsonb", "bytea", "inet", "interval",
      "int[]"],
     "g, g, (g %% 100)::smallint, g * 7, g * 1.5, g / 3.0, g / 7.0, 'provincia ' || (g %% 24), md5(g::text), "
     "'x' || (g %% 10), g %% 2 = 0, date '2026-01-01' + g %% 365, timestamp '2026-01-01' + g * interval '1 min', "
     "now(), gen_random_uuid(), jsonb_build_object('k', g %% 5), decode(md5(g::text), 'hex'), "
     "('10.0.' || (g %% 250) || '.1')::inet, g * interval '1 s', ARRAY[g, g + 1]"),
    ("open data",
     ["bigint", "bigint", "text", "text", "text", "character varying(8)", "text", "character varying(255)",
      "text", "double precision", "numeric(14,2)", "integer", "date", "timestamp", "smallint", "smallint",
      "boolean", "double precision", "double precision", "character varying(255)"],
     "g, 20000000000 + (g * 7919) %% 9999999999, 'Provincia ' || (g %% 24), 'Departamento ' || (g * 29 %% 527), "
     "'Localidad ' || (g * 17 %% 1800), 'B' || lpad((1000 + g * 13 %% 8000)::text, 4, '0') || 'ABC', "
     "'Ministerio de ' || (ARRAY['Economia','Salud','Educacion','Obras Publicas','Desarrollo Social',"
     "'Transporte','Seguridad','Cultura'])[1 + g %% 8], 'Programa ' || (g %% 97) || ' - Asistencia financiera', "
     "'Transferencia para obra ' || (g * 7919 %% 100000) || ' en ' || 'Localidad ' || (g * 17 %% 1800), "
     "(g * 7919 %% 1000000) / 7.0, ((g * 104729) %% 10000000) / 100.0, g %% 500, date '2020-01-01' + g %% 2000, "
     "timestamp '2026-01-01' + g * interval '37 s', (2020 + g %% 7)::smallint, (1 + g %% 12)::smallint, g %% 3 > 0, "
     "-22.0 - (g * 7 %% 3300) / 100.0, -54.0 - (g * 11 %% 1400) / 100.0, "
     "'https://datos.gob.ar/dataset/' || (ARRAY['presupuesto','obras','salud','transporte'])[1 + g %% 4]"),
]


def bytes_per_snapshot(h, label, types, vals, schema):
    cols = ", ".join(["c%d %s" % (i, t) for i, t in enumerate(types)])
    h.exec("CREATE SCHEMA %s; DO $$BEGIN FOR i IN 1..%d LOOP EXECUTE format('CREATE TABLE %s.t%%s (%s)', i); "
           "EXECUTE format('INSERT INTO %s.t%%s SELECT %s FROM generate_series(1, 2000) g', i); END LOOP; END$$; "
           "ANALYZE;" % (schema, TABLES, schema, cols, schema, vals.replace("'", "''")))
    p = h.start_predrop("--hold-timeout-ms", "60000", admin=False)  # migrates the store first
    before = h.sq("SELECT pg_total_relation_size('predrop.schema_snapshots')")[0][0]
    c = h.pconnect()
    with c.cursor() as cur:
        for i in range(1, TABLES + 1):
            cur.execute("DROP TABLE %s.t%d" % (schema, i))
    c.close()
    time.sleep(1)
    h.stop_predrop(p)
    n, avg_row, avg_profile, avg_json = h.sq(
        "SELECT count(*), avg(pg_column_size(s.*)), avg(pg_column_size(s.columns_profile)), "
        "avg(octet_length(s.columns_profile::text)) "
        "FROM predrop.schema_snapshots s WHERE schema_name = %s AND reason = 'pre_drop'", (schema,))[0]
    after = h.sq("SELECT pg_total_relation_size('predrop.schema_snapshots')")[0][0]
    print("  %-10s %d analysed 20-column tables dropped: %d snapshots, %.0f bytes a row (columns_profile %.0f as "
          "stored, %.0f as JSON text), %.0f bytes a snapshot with indexes and TOAST"
          % (label, TABLES, n, avg_row or 0, avg_profile or 0, avg_json or 0, (after - before) / max(n, 1)))
    key = label.replace(" ", "_")
    record("store", "bytes_per_snapshot_row_" + key, "%.0f" % (avg_row or 0))
    record("store", "bytes_per_snapshot_with_indexes_" + key, "%.0f" % ((after - before) / max(n, 1)))


def main():
    h, script = bench_hold("store", SCRIPT)
    try:
        print("per-write time against the store's size (one client recreating one table):")
        # One predrop through the empty store and on after the load: its store connections prepared
        # their statements on the empty store, as a sidecar started with a new store does.
        running = h.start_predrop("--hold-timeout-ms", "60000", admin=False)
        churn(h, "empty store", script, running)
        t0 = time.monotonic()
        load_store(h, ROWS)
        print("  (loaded %d snapshot and %d ledger rows in %.0f s, not analysed)" % (ROWS, ROWS, time.monotonic() - t0))
        churn(h, "loaded, running since empty", script, running)
        h.stop_predrop(running)
        churn(h, "loaded, never analysed", script)
        h.exec("ANALYZE predrop.schema_snapshots; ANALYZE predrop.drop_events", db=h.store_db)
        churn(h, "loaded, analysed", script)
        print("bytes per snapshot (spec 023 SC-006: about 4 KB):")
        for i, (label, types, vals) in enumerate(TABLE_KINDS):
            bytes_per_snapshot(h, label, types, vals, "sz%d" % i)
    finally:
        h.cleanup()
    write_results("store")


if __name__ == "__main__":
    main()
