#!/usr/bin/python3
"""quarantine.max_tables is enforced when a new table would pass it, not at the purger's next round
(issue 16): with purge_interval_s an hour, three tables quarantined one after another through
predrop leave the newest two, the oldest purged within seconds of the third DROP's commit (the
outcome check that finds it quarantined wakes the purger inside serve)."""
import time

import wirelib

CONFIG = wirelib.CONFIG + """
quarantine:
  max_tables: 2
  purge_interval_s: 3600
"""


def test(w):
    # The purge is a real DROP: the ground truth's event trigger records it as whichever role purges.
    w.setup("CREATE TABLE c1 (a int); CREATE TABLE c2 (a int); CREATE TABLE c3 (a int);"
            "GRANT USAGE ON SCHEMA truth TO PUBLIC; GRANT INSERT ON truth.drops TO PUBLIC;")
    w.start_predrop("--hold-timeout-ms", "10000", config=CONFIG)
    oids = [w.oid("public.c%d" % i) for i in (1, 2, 3)]
    for i in (1, 2, 3):
        r = w.psql("DROP TABLE c%d" % i)
        w.check(r.rc == 0, "psql through predrop: DROP TABLE c%d" % i, r)
        time.sleep(1.1)   # quarantine names and ages are in seconds: a clear oldest
    held = w.wait_for(lambda: (lambda q: q if q == [None, True, True] else None)(
        [w.in_quarantine(o) is not None or None for o in oids]), timeout=15)
    w.check(held is not None, "within seconds of the third DROP the oldest (c1) is purged, c2 and c3 held",
            [w.in_quarantine(o) for o in oids])
    rows = w.wait_for(lambda: w.sq("SELECT table_name, state, state_reason FROM predrop.quarantine "
                                   "WHERE database_name = %s AND state = 'purged'", (w.db,)), timeout=15)
    w.check(rows == [("c1", "purged", "cap")], "the store says c1 was purged for the cap", rows)


if __name__ == "__main__":
    wirelib.main(test, "wire_cap")
