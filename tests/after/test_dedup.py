#!/usr/bin/python3
"""snapshots.dedup_window_s and afters: a DROP's before is never deduplicated against the after of
the CREATE before it (same shape, inside the window), or the recreate's pair would be an after;
a second DROP of the same shape is deduplicated against the first DROP's before, as it always was."""
import afterlib


def test(h):
    h.reset_truth()
    h.start(extra_config="snapshots:\n  dedup_window_s: 3600\n")
    h.through("CREATE TABLE dd (a int, b text)")
    created = h.wait_after("table_name = 'dd' AND reason = 'post_create'")
    h.check(bool(created), "the CREATE's after is written first")
    h.through("DROP TABLE dd")
    h.through("CREATE TABLE dd (a int, b text)")
    h.wait_for(lambda: len(h.snapshots("table_name = 'dd' AND reason = 'post_create'")) >= 2)
    h.through("DROP TABLE dd")
    befores = h.snapshots("table_name = 'dd' AND reason = 'pre_drop'")
    h.check(len(befores) == 1, "one before of the shape: the first DROP's (the second is deduplicated)", len(befores))
    outcomes = [e["outcome"] for e in h.events("table_name = 'dd'")]
    h.check(outcomes == ["written", "deduplicated"],
            "the ledger: the first DROP written (not deduplicated against the after), the second deduplicated",
            outcomes)
    afters = h.snapshots("table_name = 'dd' AND reason = 'post_create'")
    h.check(len(afters) >= 2 and afters[1]["pair_of"] == (befores[0]["id"] if befores else None),
            "the recreate's after pairs with the first DROP's before", [a["pair_of"] for a in afters])


if __name__ == "__main__":
    afterlib.main(test, "after_dedup")
