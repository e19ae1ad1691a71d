#!/usr/bin/python3
"""The baseline inside serve (baseline.interval_s) and what no baseline touches.

- predrop baseline of the store's own database leaves predrop.* and the store table alone, even
  when asked for --schema predrop; baseline.exclude applies to the command line too.
- check-config refuses baseline.interval_s without baseline.databases, and a malformed exclude.
- Two predrop serve against one store, rounds every second: one started with interval_s 0 and
  turned on by SIGHUP; in every round exactly one of them walks (the advisory lock), the other logs
  that it skipped; a table changed between rounds gets one new baseline row, not two; excluded
  tables and predrop.* never get a row; each row written is announced on predrop_snapshots with the
  agreed keys; both stop on SIGTERM.
Uses tests/hold/holdlib.py."""
import collections
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
import holdlib  # noqa: E402

PAYLOAD_KEYS = {"id", "database", "schema", "table", "reason", "schema_hash", "pair_of", "captured_at"}
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ info baseline of (\S+): (\d+) tables, (\d+) candidates, "
                  r"(\d+) captured, \d+ skipped, [0-9.]+ s, round (\d+)")


def run(h, *args):
    return subprocess.run([h.bin, *args], capture_output=True, text=True, timeout=60)


def baseline_rows(h, where="TRUE", params=None):
    return h.sq("SELECT database_name, schema_name, table_name FROM predrop.schema_snapshots "
                "WHERE reason = 'baseline' AND " + where, params)


def write_config(h, name, interval, extra=""):
    path = os.path.join(h.work, name)
    with open(path, "w") as f:
        f.write("logging:\n  level: debug\nbaseline:\n  interval_s: %d\n  databases: [%s, %s]\n"
                "  exclude: [\"audit.*\", \"*.tmp_?\"]\n%s" % (interval, h.db, h.store_db, extra))
    return path


def test_cli(h):
    r = run(h, "migrate", "--store", h.store_conninfo())
    h.check(r.returncode == 0, "migrate the store", r.stderr)
    h.exec("CREATE TABLE public.keep_me (a int, b text)", db=h.store_db)
    r = run(h, "baseline", "--target", h.store_conninfo(), "--store", h.store_conninfo())
    h.check(r.returncode == 0, "baseline of the store's own database", r.stdout + r.stderr)
    own = baseline_rows(h, "schema_name = 'predrop'")
    h.check(own == [], "baseline of the store's database: no snapshot of predrop.* itself", own)
    h.check(baseline_rows(h, "table_name = 'keep_me'") == [(h.store_db, "public", "keep_me")],
            "baseline of the store's database: its other tables are baselined")
    r = run(h, "baseline", "--target", h.store_conninfo(), "--store", h.store_conninfo(), "--schema", "predrop")
    own = baseline_rows(h, "schema_name = 'predrop'")
    h.check(r.returncode == 0 and own == [], "baseline --schema predrop: still nothing of predrop.*", (r.stdout, own))

    h.exec("CREATE SCHEMA audit; CREATE TABLE audit.cli_log (x int); CREATE TABLE public.cli_keep (x int)")
    cfg = write_config(h, "cli.yaml", 0)
    r = run(h, "baseline", "--config", cfg, "--target", h.conninfo(), "--store", h.store_conninfo())
    h.check(r.returncode == 0, "baseline --config with baseline.exclude", r.stdout + r.stderr)
    h.check(baseline_rows(h, "table_name = 'cli_log'") == [], "baseline --config: audit.* excluded")
    h.check(len(baseline_rows(h, "table_name = 'cli_keep'")) == 1, "baseline --config: the rest baselined")


def test_check_config(h):
    path = os.path.join(h.work, "bad.yaml")
    with open(path, "w") as f:
        f.write("baseline:\n  interval_s: 60\n  exclude: [nodot]\n")
    r = run(h, "check-config", path)
    h.check(r.returncode == 1 and "baseline.databases is empty" in r.stderr and "'nodot' is not schema.table" in r.stderr,
            "check-config: interval_s without databases, and an exclude that is no schema.table", r.stderr)


def passes_by_round(logs):
    """(round, database) -> how many of the logs ran that database's pass for that round."""
    seen = collections.Counter()
    for text in logs:
        for line in text.splitlines():
            m = LINE.match(line)
            if m:
                seen[(m.group(5), m.group(1))] += 1
    return seen


def test_serve(h):
    h.exec("CREATE TABLE public.orders (id int, total numeric); CREATE TABLE public.tmp_1 (x int);"
           "CREATE TABLE audit.serve_log (x int); CREATE TABLE public.customers (id int, name text)")
    listener = h.connect(h.store_db)
    with listener.cursor() as cur:
        cur.execute("LISTEN predrop_snapshots")

    cfg_a = write_config(h, "a.yaml", 1)
    cfg_b = write_config(h, "b.yaml", 0)
    pa = h.start_predrop("--config", cfg_a, admin=False)
    pb = h.start_predrop("--config", cfg_b, admin=False)

    h.check(h.wait_for(lambda: len(baseline_rows(h, "table_name = 'orders'")) == 1, timeout=15),
            "serve baselines public.orders within a few rounds", baseline_rows(h))
    time.sleep(2.5)
    h.check(not any(LINE.match(l) for l in pb.log_text().splitlines()),
            "serve with baseline.interval_s 0: no pass", pb.log_text()[-2000:])

    write_config(h, "b.yaml", 1)
    os.kill(pb.pid, signal.SIGHUP)
    h.check(h.wait_for(lambda: "baseline lock" in pb.log_text() or any(LINE.match(l) for l in pb.log_text().splitlines()),
                       timeout=10), "after SIGHUP with interval_s 1: the second serve takes part in the rounds",
            pb.log_text()[-2000:])

    time.sleep(3)
    h.exec("ALTER TABLE public.customers ADD COLUMN email text")
    h.check(h.wait_for(lambda: len(baseline_rows(h, "table_name = 'customers'")) == 2, timeout=10),
            "a changed table is baselined again", baseline_rows(h, "table_name = 'customers'"))
    # Rounds enough that both serves had their chances: three rounds of both databases. Waited for,
    # not slept for: under the loaded start of a full make test one round of these few tables took
    # up to 3.75 s, and 4 s had brought five passes, not six.
    h.wait_for(lambda: len(passes_by_round([pa.log_text(), pb.log_text()])) >= 6, timeout=60)

    la, lb = pa.log_text(), pb.log_text()
    seen = passes_by_round([la, lb])
    twice = {k: v for k, v in seen.items() if v > 1}
    h.check(len(seen) >= 6 and not twice,
            "every round's pass ran in exactly one serve (the advisory lock and the round claimed in the store)",
            (len(seen), twice))
    claimed = h.sq("SELECT extract(epoch FROM round_start)::bigint FROM predrop.schedule_rounds "
                   "WHERE schedule = 'baseline' AND store_table = 'predrop.schema_snapshots'")
    newest = max(int(r) for (r, _) in seen) if seen else None
    h.check(claimed and int(claimed[0][0]) >= newest, "the store records the newest round walked", (claimed, newest))
    h.check(any(LINE.match(l) for l in la.splitlines()) or any(LINE.match(l) for l in lb.splitlines()),
            "pass lines logged")
    skipped = sum(log.count(why) for log in (la, lb)
                  for why in ("another predrop holds the baseline lock", "another predrop walked this round already"))
    h.check(skipped >= 3, "the serve that lost a round logged the skip at debug", skipped)
    dbs = {db for (_, db) in seen}
    h.check(dbs == {h.db, h.store_db}, "both configured databases baselined", dbs)

    h.check(len(baseline_rows(h, "table_name = 'customers'")) == 2,
            "one new baseline row for the changed table, not one per serve")
    dup = h.sq("SELECT database_name, schema_name, table_name, count(*) FROM predrop.schema_snapshots "
               "WHERE reason = 'baseline' GROUP BY 1, 2, 3, schema_hash HAVING count(*) > 1")
    h.check(dup == [], "no table has two baseline rows of one shape", dup)
    h.check(baseline_rows(h, "schema_name = 'predrop'") == [], "serve never baselines predrop.*")
    h.check(baseline_rows(h, "table_name IN ('serve_log', 'tmp_1')") == [], "excluded tables never baselined",
            baseline_rows(h, "table_name IN ('serve_log', 'tmp_1')"))
    h.check(baseline_rows(h, "database_name = %s AND table_name = 'keep_me'", (h.store_db,)) != [],
            "the store's database is baselined except predrop's own tables")

    notes = []
    deadline = time.time() + 2
    while time.time() < deadline:
        if select.select([listener], [], [], 0.2)[0]:
            listener.poll()
            notes += listener.notifies
            listener.notifies.clear()
    payloads = [json.loads(n.payload) for n in notes if n.channel == "predrop_snapshots"]
    cust = [p for p in payloads if p.get("table") == "customers"]
    h.check(len(cust) == 2, "each baseline row of customers announced on predrop_snapshots",
            [n.payload for n in notes][:5])
    if cust:
        p = cust[-1]
        ids = [r[0] for r in h.sq("SELECT id::text FROM predrop.schema_snapshots WHERE table_name = 'customers'")]
        h.check(set(p) == PAYLOAD_KEYS and p["reason"] == "baseline" and p["schema"] == "public"
                and p["database"] == h.db and p["pair_of"] is None and p["id"] in ids and p["schema_hash"]
                and p["captured_at"], "the payload: the agreed keys and the row's values", p)
    listener.close()

    for p in (pa, pb):
        h.stop_predrop(p)


def test(h):
    test_check_config(h)
    test_cli(h)
    test_serve(h)


if __name__ == "__main__":
    holdlib.main(test, "evidence_baseline_schedule")
