#!/usr/bin/python3
"""`predrop watch --format json` against the store, while another client's DDL goes through
predrop: every snapshot written (befores, afters, post_analyze) is printed once, with the row's
fields, in commit order (a pair's before ahead of its after)."""
import json
import signal
import subprocess
import threading
import time

import afterlib


def test(h):
    h.exec("CREATE TABLE w_drop (a int, b text); INSERT INTO w_drop SELECT g, 'v' || g FROM generate_series(1, 50) g;"
           "CREATE TABLE w_alt (a int, b text, c int); INSERT INTO w_alt SELECT g, 'v' || g, g FROM generate_series(1, 50) g;"
           "ANALYZE;")
    h.reset_truth()
    h.start()
    w = subprocess.Popen([h.bin, "watch", "--store", h.store_conninfo(), "--format", "json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines, err = [], []

    def read(stream, into):
        for line in stream:
            into.append(line)
    threading.Thread(target=read, args=(w.stdout, lines), daemon=True).start()
    threading.Thread(target=read, args=(w.stderr, err), daemon=True).start()
    if not h.wait_for(lambda: any("listening" in e for e in err), timeout=15):
        h.fail("predrop watch did not say it listens: %r" % err)
    try:
        steps = ["CREATE TABLE w_new (a int, b text)",
                 "ALTER TABLE w_alt RENAME COLUMN b TO b2",
                 "ALTER TABLE w_alt ADD COLUMN d int",
                 "BEGIN; DROP TABLE w_drop; CREATE TABLE w_drop (a int, e text); INSERT INTO w_drop VALUES (1, 'x'); COMMIT",
                 "CREATE TABLE w_ctas AS SELECT g AS n FROM generate_series(1, 20) g",
                 "ALTER TABLE w_new ALTER COLUMN a TYPE bigint",
                 "ANALYZE w_drop",
                 "DROP TABLE w_ctas"]
        for s in steps:
            if s == "ANALYZE w_drop":
                # The recreate's after is written first (it waits up to a second for a hold to absorb
                # it): then it has no statistics yet, and this ANALYZE brings its post_analyze.
                h.wait_for(lambda: h.snapshots("reason = 'post_create' AND table_name = 'w_drop'"), timeout=15)
            r = h.psql(s)
            h.check(r.rc == 0, "psql through predrop: %s" % s, r)
        h.check_afters_match_truth("watched DDL")
        # Every after of the run and the post_analyze of w_drop, then nothing more coming.
        h.wait_for(lambda: h.snapshots("reason = 'post_analyze' AND table_name = 'w_drop'"), timeout=15)
        time.sleep(1.0)
        rows = h.snapshots()
        h.wait_for(lambda: len(lines) >= len(rows), timeout=10)
    finally:
        w.send_signal(signal.SIGTERM)
        try:
            rc = w.wait(10)
        except subprocess.TimeoutExpired:
            w.kill()
            rc = w.wait()
    h.check(rc == 0, "predrop watch ends with 0 on SIGTERM", (rc, err[-3:]))
    time.sleep(0.2)
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            h.fail("watch printed a line that is not JSON: %r" % line)
    print("# watch saw %d, the store has %d: %s" % (len(events), len(rows),
                                                     [(e.get("table"), e.get("reason")) for e in events]))
    # NOTIFY is delivered in commit order. captured_at is each write's transaction start, and two
    # writers (a hold's before, another table's after) may commit in the other order, so the
    # order promised is the one a consumer relies on: each snapshot once, and a pair's before
    # before its after (the after's write found the before committed).
    printed = [e.get("id") for e in events]
    h.check(sorted(printed) == sorted(str(r["id"]) for r in rows) and len(set(printed)) == len(printed),
            "watch printed every snapshot of the store once",
            "watch %s\nstore %s" % ([(e.get("table"), e.get("reason"), e.get("captured_at")) for e in events],
                                    [(r["table_name"], r["reason"], str(r["captured_at"])) for r in rows]))
    position = {i: n for n, i in enumerate(printed)}
    late_pairs = [(r["table_name"], r["reason"]) for r in rows
                  if r["pair_of"] and str(r["pair_of"]) in position and str(r["id"]) in position
                  and position[str(r["pair_of"])] > position[str(r["id"])]]
    h.check(not late_pairs, "every paired after was printed after its before", late_pairs)
    by_id = {str(r["id"]): r for r in rows}
    mismatched = []
    for e in events:
        r = by_id.get(e.get("id"))
        if r is None:
            continue
        want = {"database": r["database_name"], "schema": r["schema_name"], "table": r["table_name"],
                "reason": r["reason"], "schema_hash": r["schema_hash"],
                "pair_of": str(r["pair_of"]) if r["pair_of"] else None}
        got = {k: e.get(k) for k in want}
        if got != want:
            mismatched.append((got, want))
        if r["pair_of"] and "diff" not in e and "diff_error" not in e:
            mismatched.append(("no diff member", e))
    h.check(not mismatched, "each printed event has its row's fields (and a paired after its diff)", mismatched)
    reasons = sorted(e.get("reason") for e in events)
    h.check(reasons.count("post_create") == 3 and reasons.count("post_alter") == 3
            and reasons.count("post_analyze") >= 1 and reasons.count("pre_drop") >= 5,
            "watch saw the befores, the 3 post_create, 3 post_alter and the post_analyze", reasons)


if __name__ == "__main__":
    afterlib.main(test, "after_watch")
