#!/usr/bin/python3
"""The recreate cycle, through predrop against direct (issue 21): no assertions, ratios only.

Every pgbench client recreates its own table in autocommit, as the reference platform's ingestion
does (spec 023): CREATE TABLE, INSERT 200 rows, ANALYZE, DROP TABLE. The same script runs against

  direct        the server itself
  pgbouncer     PgBouncer in session mode (PGB_PORT, when scripts/bench.sh started one)
  snapshot      predrop with the default rule (a snapshot before every DROP, its after)
  quarantine    predrop with rules: [{schema: "*", action: quarantine}]
  empty_q       predrop with a quarantine rule for a schema nothing is dropped in (an empty
                quarantine must cost nothing)
  skip          predrop with rules: [{schema: "*", action: skip}]: every DROP relayed unheld,
                its ledger row and the CREATE's after still written off the client's path (not
                in the default modes: the snapshot rule's cycle less this one's is the hold's)

for CHURN_CLIENTS clients, in interleaved rounds (the order rotates every round), CHURN_REPS rounds
of CHURN_SECONDS each; each cell is the median of its rounds and the ratio is the median of the
per-round ratios against the direct run of the same round. CHURN_DURABILITY ("off on") runs the
whole set with fsync and synchronous_commit off, then on (ALTER SYSTEM + reload).

For every predrop run the ledger gives the hold's p50/p99 (hold_ms) of that run's DROPs, its
/metrics the mean of each phase of the hold's capture (predrop_capture_phase_seconds: waiting for a
capture connection, the catalog read, waiting for a store connection, the store write; the rest of
the hold is predrop's own and the hand-offs between its threads), and
/proc gives predrop's CPU per cycle. For every run /proc also gives the server's CPU per cycle (all
of the cluster's processes, the backends that ended included: benchlib.ServerCpu) and, through
predrop, the share of predrop's own connections (capture and store), the work the hold and what
follows it cost the server. Every run also gives the share of the machine's time the hypervisor
stole meanwhile (benchlib.machine_ticks), and every median line the range of it over its runs: two
runs compare fairly only at a like steal. CHURN_BINS="label=/path/to/predrop ..." compares builds in one
run (before and after a change): each label gets its own instances, and cells are named
label:mode.

Environment: PGHOST PGPORT PREDROP_BIN (scripts/bench.sh), CHURN_CLIENTS ("1 8 32"),
CHURN_SECONDS (10), CHURN_REPS (3), CHURN_MODES ("snapshot quarantine empty_q"; a mode may carry
settings, "snapshot@capture.after=false"), CHURN_DURABILITY
("off on"), CHURN_COLUMNS (4), CHURN_BINS, CHURN_VERBOSE (1: each run's line also gives the dead
catalog rows it left), CHURN_STORE_ROWS (0: snapshot rows, and as many ledger rows, loaded into the
store before the first run, as tests/bench/store loads them, then analysed; the ledger is then
kept between durabilities), BENCH_WORK (results in churn-results.tsv).

Autovacuum is off while the bench runs, and every run starts on a vacuumed catalog and store
(vacuum_between_runs).
"""
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import (ServerCpu, builds, cpu_ticks, load_store, machine_ticks, pct, record, write_results,  # noqa: E402
                      bench_hold, settle, steal_pct)

CLIENTS = [int(c) for c in os.environ.get("CHURN_CLIENTS", "1 8 32").split()]
SECONDS = int(os.environ.get("CHURN_SECONDS", "10"))
REPS = int(os.environ.get("CHURN_REPS", "3"))
MODES = os.environ.get("CHURN_MODES", "snapshot quarantine empty_q").split()
DURABILITY = os.environ.get("CHURN_DURABILITY", "off on").split()
PGB_PORT = os.environ.get("PGB_PORT")
VERBOSE = os.environ.get("CHURN_VERBOSE") == "1"
STORE_ROWS = int(os.environ.get("CHURN_STORE_ROWS", "0"))

# CHURN_COLUMNS (4): the table's width. Past the first four, text columns of 7 to 40 distinct values
# (the reference platform's datasets have tens of columns; a hold's statistics are read per column).
COLUMNS = max(4, int(os.environ.get("CHURN_COLUMNS", "4")))
EXTRA = range(5, COLUMNS + 1)
SCRIPT = """\
CREATE TABLE churn_:client_id (id int, provincia text, monto numeric, fecha date%s);
INSERT INTO churn_:client_id SELECT g, 'provincia ' || (g %% 24), g * 1.5, date '2026-01-01' + g %% 365%s FROM generate_series(1, 200) g;
ANALYZE churn_:client_id;
DROP TABLE churn_:client_id;
""" % ("".join(", c%d text" % i for i in EXTRA), "".join(", 'v' || (g %% %d)" % (i % 34 + 7) for i in EXTRA))

CONFIGS = {
    "snapshot": None,
    # The purger keeps the quarantine at 200 tables, so that the catalog does not grow from run to run
    # (the direct runs would pay for it too); purging is the DROP's cost, deferred.
    "quarantine": "rules:\n  - schema: \"*\"\n    action: quarantine\nquarantine:\n  max_tables: 200\n",
    # Every DROP let through unheld: what the hold adds is the snapshot rule's cycle less this one's.
    "skip": "rules:\n  - schema: \"*\"\n    action: skip\n",
    "empty_q": "rules:\n  - schema: \"nothing_dropped_here\"\n    action: quarantine\n  - schema: \"*\"\n    action: snapshot\n",
}


def config_of(mode):
    """A mode is a CONFIGS name, optionally with settings: "snapshot@capture.after=false" runs the
    snapshot rule with that key set (section.key=value, comma-separated; a key nested deeper, such as
    snapshots.profile.max_values, is written as one leaf, which predrop refuses at start)."""
    name, _, settings = mode.partition("@")
    text = CONFIGS[name] or ""
    sections = {}
    for kv in filter(None, settings.split(",")):
        key, value = kv.split("=", 1)
        section, leaf = key.split(".", 1)
        sections.setdefault(section, []).append("  %s: %s\n" % (leaf, value))
    for section, lines in sections.items():
        if (section + ":\n") in text:
            text = text.replace(section + ":\n", section + ":\n" + "".join(lines), 1)
        else:
            text += section + ":\n" + "".join(lines)
    return text or None


PHASE = re.compile(r'^predrop_capture_phase_seconds_(sum|count)\{phase="(\w+)"\} (\S+)$', re.M)


def phase_totals(h, p):
    """{phase: [seconds, count]} of predrop_capture_phase_seconds on predrop P's admin endpoint."""
    out = {}
    for kind, phase, value in PHASE.findall(h.metrics(p.admin)):
        out.setdefault(phase, [0.0, 0.0])[0 if kind == "sum" else 1] = float(value)
    return out


def phase_means(before, after):
    """Each phase's mean in ms over what the run added, in the metric's order."""
    parts = []
    for phase, (s1, n1) in after.items():
        s0, n0 = before.get(phase, [0.0, 0.0])
        if n1 > n0:
            parts.append("%s %.2f" % (phase, (s1 - s0) * 1000 / (n1 - n0)))
    return ", ".join(parts)


def reset_tables(h, n):
    h.exec("DO $$BEGIN FOR i IN 0..%d LOOP EXECUTE format('DROP TABLE IF EXISTS churn_%%s', i); END LOOP; END$$" % n)


def catalog_dead(h):
    """Dead rows in the churn database's pg_attribute, pg_class, pg_type and pg_depend: what a run's
    CREATEs and DROPs left for the next one to step over."""
    return h.q("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_sys_tables "
               "WHERE relname IN ('pg_attribute', 'pg_class', 'pg_type', 'pg_depend')")[0][0]


def vacuum_between_runs(h):
    """Every run starts on a vacuumed catalog and store, so that no target steps over the dead rows
    of the one before it. A direct run of this workload leaves 30,000 to 120,000 dead rows in the
    catalog (pg_attribute, pg_class, pg_type, pg_depend; CHURN_VERBOSE=1 prints them), and with
    autovacuum on, which visits once a minute, pg_attribute alone reached 130,000 dead rows against
    8,000 live ones in the middle of a run. Autovacuum is off for the bench instead: its visits came
    in the middle of some runs and not of others."""
    h.exec("VACUUM")
    h.exec("VACUUM", db=h.store_db)


def round_order(targets, rep):
    """Round rep's order: rotated by one each round, and reversed every other round, so that two
    neighbours in the list (a build and its before, say) swap places from round to round."""
    k = rep % len(targets)
    order = targets[k:] + targets[:k]
    return order if rep % 2 == 0 else order[::-1]


def run_pgbench(h, port, clients, script):
    r = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n", "-c", str(clients),
                        "-j", str(min(clients, 2)), "-T", str(SECONDS), "-M", "simple", "-f", script, h.db],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = re.search(r"tps = ([0-9.]+) \((?:without|excluding)", r.stdout)
    fails = re.search(r"number of failed transactions: (\d+)", r.stdout)
    tps = float(m.group(1)) if m else float("nan")
    note = ""
    if r.returncode != 0 or not m:
        note = "  (pgbench exit %d: %s)" % (r.returncode, r.stdout.strip().splitlines()[-1:] if r.stdout else "")
    elif fails and fails.group(1) != "0":
        note = "  (failed transactions %s)" % fails.group(1)
    return tps, note


def main():
    h, script = bench_hold("churn", SCRIPT)
    try:
        targets = [("direct", h.port, None)]
        if PGB_PORT:
            targets.append(("pgbouncer", int(PGB_PORT), None))
        for label, path in builds("CHURN_BINS", ""):
            for mode in MODES:
                p = h.start_predrop("--hold-timeout-ms", "60000", config=config_of(mode), env={"PREDROP_BIN": path})
                targets.append(((label + ":" if label else "") + mode, p.port, p))
        if STORE_ROWS:
            loading = time.monotonic()
            load_store(h, STORE_ROWS)
            h.exec("ANALYZE predrop.schema_snapshots; ANALYZE predrop.drop_events", db=h.store_db)
            print("(the store holds %d loaded snapshot and ledger rows: %.0f s to load and analyse)"
                  % (STORE_ROWS, time.monotonic() - loading), flush=True)
        hz = os.sysconf("SC_CLK_TCK")
        server = ServerCpu(h)
        h.exec("ALTER SYSTEM SET autovacuum = off", db="postgres")
        for durability in DURABILITY:
            h.exec("ALTER SYSTEM SET fsync = %s" % durability, db="postgres")
            h.exec("ALTER SYSTEM SET synchronous_commit = %s" % durability, db="postgres")
            h.exec("SELECT pg_reload_conf()", db="postgres")
            time.sleep(0.5)
            print("recreate cycle (CREATE %d columns, INSERT 200, ANALYZE, DROP), fsync=%s synchronous_commit=%s, "
                  "%d s x %d rounds:" % (COLUMNS, durability, durability, SECONDS, REPS))
            for clients in CLIENTS:
                tps = {}
                holds = {}
                cpu = {}
                server_cpu = {}
                steal = {}
                for rep in range(REPS):
                    for name, port, p in round_order(targets, rep):
                        reset_tables(h, clients)
                        vacuum_between_runs(h)
                        t0 = cpu_ticks(p.pid) if p else None
                        started = h.sq("SELECT now()")[0][0] if p else None
                        s0 = server.sample(h)
                        phases0 = phase_totals(h, p) if p else None
                        m0 = machine_ticks()
                        v, note = run_pgbench(h, port, clients, script)
                        stolen = steal_pct(m0, machine_ticks())
                        tps.setdefault(name, []).append(v)
                        steal.setdefault(name, []).append(stolen)
                        line = "  c=%-3d round %d %-22s %8.1f tps%s  steal %2.0f%%" % (clients, rep + 1, name, v, note,
                                                                                 stolen)
                        if p:
                            t1 = cpu_ticks(p.pid)
                            if t0 is not None and t1 is not None and v > 0:
                                us = (t1 - t0) * 1e6 / hz / (v * SECONDS)
                                cpu.setdefault(name, []).append(us)
                                line += "  predrop CPU %5.0f us/cycle" % us
                            waited = settle(h)
                            if waited > 1:
                                line += "  (its store work went on %.1f s after the run)" % waited
                        else:
                            time.sleep(0.3)  # the backends that ended are reaped: their CPU is the postmaster's
                        # The store work a run left (settled above) is that run's.
                        srv = server.us_per(s0, server.sample(h), v * SECONDS if v == v else 0)
                        if srv:
                            server_cpu.setdefault(name, []).append(srv)
                            line += "  server CPU %5.0f us/cycle" % srv[0]
                            if p:
                                line += " (predrop's connections %.0f)" % srv[1]
                        if p:
                            hs = [r[0] for r in h.sq(
                                "SELECT hold_ms FROM predrop.drop_events WHERE occurred_at >= %s AND hold_ms IS NOT NULL "
                                "AND statement_kind = 'drop_table' AND outcome <> 'policy_skip'", (started,))]
                            holds.setdefault(name, []).extend(hs)
                            # A hold that failed open is fast: the cell is only worth its snapshots. A DROP
                            # the rule skips (the skip mode) is what the operator asked for, no miss.
                            written, skipped, drops = h.sq(
                                "SELECT count(*) FILTER (WHERE outcome IN ('written', 'deduplicated')), "
                                "count(*) FILTER (WHERE outcome = 'policy_skip'), count(*) "
                                "FROM predrop.drop_events WHERE occurred_at >= %s AND statement_kind = 'drop_table'",
                                (started,))[0]
                            line += "  snapshots %d of %d DROPs" % (written, drops)
                            means = phase_means(phases0, phase_totals(h, p))
                            if means:
                                line += "  capture phases (mean ms): " + means
                            if skipped:
                                line += ", %d skipped by the rule" % skipped
                            if written + skipped < drops:
                                line += " (MISSES: %d)" % (drops - written - skipped)
                        if VERBOSE:
                            # After predrop's CPU is read: a live session reports its counts at most
                            # once a second, so the count waits that long.
                            time.sleep(1.1)
                            line += "  catalog dead rows %d" % catalog_dead(h)
                        print(line, flush=True)
                direct = tps.get("direct", [])
                for name, _, p in targets:
                    vs = tps.get(name, [])
                    if not vs:
                        continue
                    ratios = [a / d for a, d in zip(vs, direct) if d and d == d and a == a]
                    ratio = statistics.median(ratios) if ratios else float("nan")
                    med = statistics.median(vs)
                    extra = ""
                    key = "fsync_%s_c%d_%s" % (durability, clients, name.replace(":", "_"))
                    if p and holds.get(name):
                        hs = holds[name]
                        extra += "  hold p50 %.2f ms p99 %.2f ms (n=%d)" % (pct(hs, 50), pct(hs, 99), len(hs))
                        record("churn", key + "_hold_p50_ms", "%.2f" % pct(hs, 50))
                        record("churn", key + "_hold_p99_ms", "%.2f" % pct(hs, 99))
                    if cpu.get(name):
                        extra += "  predrop CPU %.0f us/cycle" % statistics.median(cpu[name])
                        record("churn", key + "_predrop_cpu_us_per_cycle", "%.0f" % statistics.median(cpu[name]))
                    if server_cpu.get(name):
                        total = statistics.median(x[0] for x in server_cpu[name])
                        extra += "  server CPU %.0f us/cycle" % total
                        record("churn", key + "_server_cpu_us_per_cycle", "%.0f" % total)
                        if p:
                            own = statistics.median(x[1] for x in server_cpu[name])
                            extra += " (predrop's connections %.0f)" % own
                            record("churn", key + "_server_cpu_predrop_conns_us_per_cycle", "%.0f" % own)
                    if steal.get(name):
                        extra += "  steal %.0f-%.0f%%" % (min(steal[name]), max(steal[name]))
                        record("churn", key + "_steal_pct_max", "%.0f" % max(steal[name]))
                    print("  c=%-3d %-24s median %8.1f tps  %.2fx direct%s" % (clients, name, med, ratio, extra), flush=True)
                    record("churn", key + "_tps", "%.1f" % med)
                    record("churn", key + "_x_direct", "%.2f" % ratio)
            if not STORE_ROWS:
                h.exec("DELETE FROM predrop.drop_events", db=h.store_db)
    finally:
        h.exec("ALTER SYSTEM RESET autovacuum", db="postgres")
        h.exec("ALTER SYSTEM RESET fsync", db="postgres")
        h.exec("ALTER SYSTEM RESET synchronous_commit", db="postgres")
        h.exec("SELECT pg_reload_conf()", db="postgres")
        h.cleanup()
    write_results("churn")


if __name__ == "__main__":
    main()
