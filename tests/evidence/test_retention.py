#!/usr/bin/python3
"""store.retention (issue 25, part 4): snapshots older than the window are pruned, except a table's
newest complete pair, the first snapshot of each of its shapes, its newest snapshot, and one a
quarantine row names. The store's clock is set by hand (captured_at written as the test wants):

  ventas   recreated every 50 days for 400 days, one shape then another: kept are the first of
           each shape, the newest pair (today's before and after); the other old ones go
  viejas   one shape, snapshots every 60 days for a year, no pair: kept are the first and the newest
  guardada an old snapshot a quarantine row names (and an old one nothing names)
  reciente everything within the window: nothing goes

predrop store stats / prune --dry-run count the same and delete nothing; prune deletes exactly the
rest; a second prune finds nothing; then serve with store.retention prunes on its own schedule and
/metrics says so. Uses tests/hold/holdlib.py."""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
import holdlib  # noqa: E402


def store_cmd(h, *args, fmt="json", rc=0):
    r = subprocess.run([h.bin, "store", *args, "--store", h.store_conninfo(), "--format", fmt],
                       capture_output=True, text=True, timeout=120)
    h.check(r.returncode == rc, "predrop store %s exits %d" % (" ".join(args), rc), (r.returncode, r.stdout, r.stderr))
    if r.returncode != 0:
        return r
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def test(h):
    m = subprocess.run([h.bin, "migrate", "--store", h.store_conninfo()], capture_output=True, text=True, timeout=60)
    h.check(m.returncode == 0, "predrop migrate", (m.returncode, m.stderr))
    c = h.connect(h.store_db)
    c.autocommit = True
    ids, age = {}, {}
    with c.cursor() as cur:
        def snap(label, table, reason, days_ago, shape, pair_of=None):
            cur.execute("INSERT INTO predrop.schema_snapshots (schema_name, table_name, reason, actor, schema_hash,"
                        " captured_at, database_name, pair_of) VALUES ('datos', %s, %s, 'test', %s,"
                        " now() - %s * interval '1 day', %s, %s) RETURNING id::text",
                        (table, reason, shape, days_ago, h.db, pair_of))
            ids[label] = cur.fetchone()[0]
            age[label] = days_ago
        # ventas: a recreate every 50 days, shape s1 until day 200, s2 after.
        for d in range(400, -1, -50):
            shape = "s1" if d > 200 else "s2"
            snap("ventas_before_%d" % d, "ventas", "pre_drop", d + 0.001, shape)
            snap("ventas_after_%d" % d, "ventas", "post_create", d, shape, ids["ventas_before_%d" % d])
        for d in range(360, -1, -60):
            snap("viejas_%d" % d, "viejas", "baseline", d, "v1")
        snap("guardada_named", "guardada", "pre_drop", 300, "g1")
        snap("guardada_other", "guardada", "baseline", 310, "g1")
        snap("guardada_now", "guardada", "baseline", 1, "g1")
        for d in (20, 10, 0):
            snap("reciente_%d" % d, "reciente", "baseline", d, "r%d" % d)
        cur.execute("INSERT INTO predrop.quarantine (id, database_name, schema_name, table_name, table_oid,"
                    " quarantine_schema, quarantine_table, dropped_at, expires_at, bytes, snapshot_id, state, state_at,"
                    " detail) VALUES (gen_random_uuid(), %s, 'datos', 'guardada', 1, 'predrop_quarantine', 'q1_1_guardada',"
                    " now(), now() + interval '7 days', 0, %s::uuid, 'held', now(), '{}')", (h.db, ids["guardada_named"]))
    total = len(ids)

    # Within the window, and of the old ones: the first of each shape (ventas' s1 before of day 400
    # and s2 before of day 200, viejas' first, guardada's first), the one a quarantine names. The
    # newest of each table and its newest pair are within the window here.
    keep = {label for label, d in age.items() if d < 180} | {
        "ventas_before_400", "ventas_before_200", "viejas_360", "guardada_other", "guardada_named"}
    expected_gone = set(ids) - keep

    stats = store_cmd(h, "stats", "--retention", "180d")
    h.check(stats.get("snapshots") == total and stats.get("prunable") == len(expected_gone) and stats.get("pruned") == 0,
            "store stats: %d snapshots, %d would be pruned" % (total, len(expected_gone)), stats)
    h.check(stats.get("kept", {}).get("quarantine") == 1 and stats.get("kept", {}).get("newest_pair") == 0,
            "the quarantine's snapshot counted as kept; the newest pair is within the window", stats)
    dry = store_cmd(h, "prune", "--retention", "180d", "--dry-run")
    h.check(dry.get("prunable") == len(expected_gone) and dry.get("pruned") == 0 and dry.get("dry_run") is True,
            "prune --dry-run counts the same and deletes nothing", dry)
    h.check(h.q("SELECT count(*) FROM predrop.schema_snapshots", db=h.store_db)[0][0] == total, "nothing deleted yet")
    off = store_cmd(h, "prune", rc=2, fmt="text")
    h.check("store.retention is off" in off.stderr, "prune without a retention says it is off", off.stderr)

    done = store_cmd(h, "prune", "--retention", "180d")
    h.check(done.get("pruned") == len(expected_gone), "prune deletes %d" % len(expected_gone), done)
    left = {r[0] for r in h.q("SELECT id::text FROM predrop.schema_snapshots", db=h.store_db)}
    by_id = {v: k for k, v in ids.items()}
    h.check({by_id[i] for i in left} == keep, "exactly what must stay stays",
            sorted({by_id[i] for i in left} ^ keep))
    again = store_cmd(h, "prune", "--retention", "180d")
    h.check(again.get("pruned") == 0 and again.get("prunable") == 0, "a second prune finds nothing", again)
    text = store_cmd(h, "stats", "--retention", "180d", fmt="text")
    h.check("0 would be pruned" in text and "snapshots" in text, "store stats in text", text)

    # A newest pair older than the window is kept whole; the window in serve, on its own schedule.
    with c.cursor() as cur:
        snap("vieja_pair_before", "vieja", "pre_drop", 400.001, "p1")
        snap("vieja_pair_after", "vieja", "post_create", 400, "p2", ids["vieja_pair_before"])
        snap("vieja_old", "vieja", "baseline", 500, "p1")
        snap("vieja_gone", "vieja", "baseline", 450, "p1")
    c.close()
    h.start_predrop("--hold-timeout-ms", "10000", config="store:\n  retention: 180d\n  prune_interval_s: 1\n")
    gone = h.wait_for(lambda: not h.q("SELECT 1 FROM predrop.schema_snapshots WHERE id = %s::uuid",
                                      (ids["vieja_gone"],), db=h.store_db), timeout=20)
    h.check(gone, "serve prunes on its own (store.prune_interval_s)")
    by_id.update({v: k for k, v in ids.items()})
    left = {by_id.get(i, i) for i in (r[0] for r in h.q("SELECT id::text FROM predrop.schema_snapshots "
                                                          "WHERE table_name = 'vieja'", db=h.store_db))}
    h.check(left == {"vieja_pair_before", "vieja_pair_after", "vieja_old"},
            "a table's newest pair is kept however old, and the first of its shape", left)
    metrics = urllib.request.urlopen("http://%s/metrics" % h.admin, timeout=10).read().decode()
    h.check("predrop_store_pruned_total 1" in metrics and "predrop_store_snapshots" in metrics,
            "/metrics: predrop_store_pruned_total and predrop_store_snapshots",
            [l for l in metrics.splitlines() if "store_" in l])


if __name__ == "__main__":
    holdlib.main(test, "retention")
