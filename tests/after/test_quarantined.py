#!/usr/bin/python3
"""An after waiting for statistics whose table a quarantine rule then moves: the DROP's before keeps
the table's shape, and the quarantined table, analysed later in the quarantine schema, gets no
snapshot of its own (it is not the user's table any more; `predrop ages` would list it as a table
of the quarantine schema)."""
import time

import afterlib


def test(h):
    h.reset_truth()
    h.start(extra_config="rules:\n  - {schema: public, kinds: [drop_table], action: quarantine}\n")
    h.through("CREATE TABLE qa (a int, b text)")
    created = h.wait_after("table_name = 'qa' AND reason = 'post_create'")
    h.check(bool(created) and created[0]["stats_available"] is False,
            "the CREATE's after is written without statistics (it waits for them)", created)
    h.through("DROP TABLE qa")
    moved = h.wait_for(lambda: h.q("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                   " WHERE n.nspname = 'predrop_quarantine' AND c.relname LIKE '%qa'"), timeout=15)
    h.check(bool(moved), "the DROP moved the table into the quarantine", moved)
    if not moved:
        return
    h.exec('INSERT INTO predrop_quarantine."%s" VALUES (1, \'x\'); ANALYZE predrop_quarantine."%s"'
           % (moved[0][0], moved[0][0]))
    time.sleep(2)   # ten polls for statistics (capture.stats_poll_ms 200)
    inside = h.snapshots("schema_name = 'predrop_quarantine'")
    h.check(inside == [], "no snapshot of the quarantined table, analysed in the quarantine schema",
            [(s["reason"], s["table_name"]) for s in inside])
    befores = h.snapshots("table_name = 'qa' AND reason = 'pre_drop'")
    h.check(len(befores) == 1 and befores[0]["drop_outcome"] == "quarantined", "the DROP's before, quarantined",
            [(b["reason"], b["drop_outcome"]) for b in befores])


if __name__ == "__main__":
    afterlib.main(test, "after_quarantined")
