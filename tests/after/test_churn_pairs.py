#!/usr/bin/python3
"""A recreate churn in autocommit, as the reference platform's workers run it (CREATE TABLE, INSERT,
DROP TABLE, each its own transaction), by a few clients on tables of their own. Each CREATE's after
is absorbed by the DROP that follows it (it waits a second for that), so it is written as a copy of
that DROP's before, several in one statement. Every recreate's post_create must pair with the
pre_drop of the table the previous cycle dropped, and be dated before its own source, as its
statement was (capture/store_writer.cpp kCopyAfterSql); the first cycle's has no pair.

Judged against truth.ddl (the event trigger's OIDs in commit order). On the build before the copy's
date and its in-statement pairing were fixed, most copies paired with an older cycle's before, or
with none.

`racing` (argument): capture.after_delay_ms 0, so each after is read as its DROP comes and the
DROP's before is written while the after runs; the after must still be dated before that before
(it is the later statement's), and if it finds its table gone, be written as that before's copy
(capture/after_capture.cpp, befores_meanwhile). On the build before, about one cycle in two had an
after dated after its DROP's before, the next cycle's after then paired with nothing, and a few
cycles had no after at all."""
import collections
import sys
import threading

import afterlib

CLIENTS = 3
CYCLES = 10
RACING = sys.argv[1:] == ["racing"]


def test(h):
    h.reset_truth()
    h.start(extra_config="  after_delay_ms: 0\n" if RACING else "")
    errors = []

    def client(i):
        try:
            c = h.pconnect()
            with c.cursor() as cur:
                for k in range(CYCLES):
                    cur.execute("CREATE TABLE churn_%d (id int, v text, r%d int)" % (i, k))
                    cur.execute("INSERT INTO churn_%d SELECT g, 'v', %d FROM generate_series(1, 50) g" % (i, k))
                    cur.execute("DROP TABLE churn_%d" % i)
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append((i, str(e)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    h.check(not errors, "%d clients x %d cycles: no statement failed" % (CLIENTS, CYCLES), errors)

    created = collections.defaultdict(list)   # table -> OIDs in commit order
    for r in h.ddl_truth():
        if r["command_tag"] == "CREATE TABLE":
            created[r["object_identity"].split(".")[-1]].append(int(r["objid"]))
    h.check(sorted(len(v) for v in created.values()) == [CYCLES] * CLIENTS, "truth: every cycle's CREATE committed",
            {k: len(v) for k, v in created.items()})

    def state():
        befores = {int(s["table_oid"]): s for s in h.snapshots("reason = 'pre_drop'")}
        afters = {int(s["table_oid"]): s for s in h.afters("reason = 'post_create'")}
        return befores, afters

    total = CLIENTS * CYCLES
    h.wait_for(lambda: (lambda b, a: len(b) == total and len(a) == total)(*state()), timeout=30)
    befores, afters = state()
    missing = ["%s cycle %d: no %s" % (name, k, " and no ".join(w for w, got in (("pre_drop", befores), ("post_create", afters))
                                                           if oid not in got))
               for name, oids in sorted(created.items()) for k, oid in enumerate(oids)
               if oid not in befores or oid not in afters]
    h.check(len(befores) == total and len(afters) == total,
            "a pre_drop and a post_create of every cycle's table", (len(befores), len(afters), missing[:6]))
    wrong = []
    for name, oids in sorted(created.items()):
        for k, oid in enumerate(oids):
            a, b = afters.get(oid), befores.get(oid)
            if a is None or b is None:
                continue
            want = befores.get(oids[k - 1]) if k > 0 else None
            got = a["pair_of"]
            if (want is None and got is not None) or (want is not None and got != want["id"]):
                wrong.append("%s cycle %d: pair_of %s, want %s" % (name, k, got, want and want["id"]))
            if not a["captured_at"] < b["captured_at"]:
                wrong.append("%s cycle %d: its after %s is dated %s, not before its DROP's before %s (%s)"
                             % (name, k, a["id"], a["captured_at"], b["id"], b["captured_at"]))
            if "r%d" % k not in h.snapshot_columns(a):
                wrong.append("%s cycle %d: its after has columns %s" % (name, k, h.snapshot_columns(a)))
    h.check(not wrong, "every recreate's after pairs with the previous cycle's before, and is dated before its own "
            "DROP's before (%d problems in %d cycles)" % (len(wrong), total), wrong[:6])


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["racing"]):
        print("FAIL: usage: test_churn_pairs.py [racing]")
        sys.exit(1)
    afterlib.main(test, "after_churn_pairs_racing" if RACING else "after_churn_pairs")
