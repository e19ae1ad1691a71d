#!/usr/bin/python3
"""quarantine.max_tables is enforced when a new table would pass it, not at the purger's next round
(issue 16): with purge_interval_s a day, three tables quarantined one after another through
predrop leave the newest two, the oldest purged within seconds of the third DROP's commit (the
outcome check that finds it quarantined wakes the purger inside serve). Scheduled rounds start at
multiples of the interval since the epoch, and the first walks every database: a day, the longest
interval there is, keeps one out of the test's seconds unless they span midnight UTC (an hour let
one in at 12:00:00, and it opened a session in the direct database).

Such a kicked round works in the database its kicks named, on sessions it keeps for the next kicked
round until capture.idle_close_s pass (issue 21): the cluster's other databases see no session of
the purger, the fourth DROP's purge runs on the third's sessions, and they close once idle. It
measures only the held tables whose store rows give no size."""
import time

import wirelib

from predrop_harness import settled_sessions  # noqa: E402 (holdlib puts tests/support on the path)

CONFIG = wirelib.CONFIG + """
quarantine:
  max_tables: 2
  purge_interval_s: 86400
capture:
  idle_close_s: 4
"""
PURGER = "predrop-quarantine-purger"


def sessions_of(w, db):
    n = settled_sessions(lambda: w.q("SELECT sessions FROM pg_stat_database WHERE datname = %s", (db,))[0][0])
    if n is None:
        w.fail("pg_stat_database.sessions of %s never settled" % db)
    return n


def purger_pids(w):
    return {r[0] for r in w.q("SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
                              (PURGER, w.db))}


def test(w):
    # The purge is a real DROP: the ground truth's event trigger records it as whichever role purges.
    w.setup("CREATE TABLE c1 (a int); CREATE TABLE c2 (a int); CREATE TABLE c3 (a int); CREATE TABLE c4 (a int);"
            "GRANT USAGE ON SCHEMA truth TO PUBLIC; GRANT INSERT ON truth.drops TO PUBLIC;")
    w.start_predrop("--hold-timeout-ms", "10000", config=CONFIG)
    # The direct database is another connectable database of the cluster, ours to watch.
    other_sessions = sessions_of(w, w.direct_db)
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

    kept = purger_pids(w)
    w.check(len(kept) > 0, "the kicked round keeps its session to the database it purged in", kept)
    oid4 = w.oid("public.c4")
    r = w.psql("DROP TABLE c4")
    w.check(r.rc == 0, "psql through predrop: DROP TABLE c4", r)
    gone = w.wait_for(lambda: w.in_quarantine(oids[1]) is None and w.in_quarantine(oid4) is not None, timeout=15)
    w.check(gone, "the fourth DROP's round purges c2, and c4 is held",
            [w.in_quarantine(o) for o in oids + [oid4]])
    after = purger_pids(w)
    w.check(bool(kept) and kept <= after, "the fourth DROP's round ran on the sessions the third's kept", (kept, after))
    w.check(sessions_of(w, w.direct_db) == other_sessions,
            "no kicked round opened a session in a database no kick named (%s)" % w.direct_db,
            (other_sessions, sessions_of(w, w.direct_db)))
    closed = w.wait_for(lambda: not purger_pids(w), timeout=20)
    w.check(closed, "the purger's sessions close once capture.idle_close_s (4) pass without a round", purger_pids(w))

    # A kicked round takes a held table's size from its store row (the outcome check measured it as
    # it recorded it) and measures only the tables no row gives: a new serve, which has measured
    # nothing, counts c4 at the size its row says (set here to a terabyte, which no table of the test
    # is), not at the size of the table itself.
    w.stop_predrop()
    w.exec("UPDATE predrop.quarantine SET bytes = 1000000000000 WHERE database_name = %s AND table_name = 'c4'",
           w.store_db, (w.db,))
    w.start_predrop("--hold-timeout-ms", "10000", config=CONFIG)
    w.exec("CREATE TABLE c5 (a int)")
    r = w.psql("DROP TABLE c5")
    w.check(r.rc == 0, "psql through predrop (a new serve): DROP TABLE c5", r)
    counted = w.wait_for(lambda: (lambda b: b if b is not None and b >= 1e12 else None)(
        w.metric("predrop_quarantine_bytes")), timeout=15)
    w.check(counted is not None and w.in_quarantine(oid4) is not None,
            "the new serve's kicked round counts c4 at its store row's size, without measuring it",
            (w.metric("predrop_quarantine_bytes"), w.metric("predrop_quarantine_tables")))


if __name__ == "__main__":
    wirelib.main(test, "wire_cap")
