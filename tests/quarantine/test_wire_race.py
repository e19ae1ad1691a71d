#!/usr/bin/python3
"""Two sessions DROP one table at once, through psycopg2 (issue 16's quarantine, its outcome checks).

Session A drops the table in a transaction: its move holds the table's lock. Session B's DROP of the
same table is held and snapshotted meanwhile (the catalog still shows the table where it was), then
waits for that lock. Then A finishes:
- COMMIT: B's DROP fails (the table is no longer where it looked), as it does direct. Both outcome
  checks find the table in the quarantine schema; the held row must name A's DROP, whose move stood,
  and B's ledger row must say not_dropped, as its client saw an error.
- ROLLBACK: B's DROP goes on and quarantines the table. A's check may come after B's move committed
  and find the table quarantined too; the held row must name B's DROP, and A's ledger row must say
  not_dropped.
- COMMIT, with B's DROP TABLE IF EXISTS: B's statement succeeds (a notice: nothing to drop) and
  moves nothing. Its check finds the table quarantined all the same, with a later event id than
  A's; the comment's hold (quarantine/move_sql.hpp) says the move is A's, so the held row names A's
  DROP and B's ledger row says not_dropped.
What each session saw is compared with direct.

And one session's two DROPs of a table in one transaction, DROP TABLE then DROP TABLE IF EXISTS:
the second moves nothing, and its check (the later event id) must leave the row to the first.
The same two in one Query's text are one hold: the table has one ledger row, quarantined.
"""
import threading

import psycopg2

import wirelib

SETUP = ("CREATE TABLE t_race (a int); CREATE TABLE t_race_rb (a int); CREATE TABLE t_race_ie (a int);"
         " CREATE TABLE t_twice (a int); CREATE TABLE t_once (a int);")


def race(w, port, db, table, finish, second_drop="DROP TABLE"):
    """A: BEGIN; DROP TABLE; B: SECOND_DROP (waits for A's lock); A: FINISH. What each session saw."""
    a = psycopg2.connect(host=w.host, port=port, dbname=db, user="postgres", application_name="race_a")
    b = psycopg2.connect(host=w.host, port=port, dbname=db, user="postgres", application_name="race_b")
    b.autocommit = True
    seen = {}
    try:
        ca = a.cursor()
        ca.execute("DROP TABLE %s" % table)
        seen["a"] = [ca.statusmessage]

        def second():
            try:
                cb = b.cursor()
                cb.execute("%s %s" % (second_drop, table))
                seen["b"] = ("ok", cb.statusmessage)
            except psycopg2.Error as e:
                seen["b"] = (e.pgcode, e.pgerror)
        t = threading.Thread(target=second)
        t.start()
        # B's backend waits for A's lock (through predrop, once its hold has let the DROP go).
        waiting = w.wait_for(lambda: w.q("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid "
                                         "WHERE NOT l.granted AND s.datname = %s AND s.application_name = 'race_b'",
                                         (db,), db=db)[0][0] > 0, timeout=20)
        w.check(waiting, "%s %s: B's DROP waits for A's lock" % (db, table))
        getattr(a, finish)()
        seen["a"].append(finish)
        t.join(60)
        w.check(not t.is_alive(), "%s %s: B's DROP ended once A did %s" % (db, table, finish))
    finally:
        a.close()
        b.close()
    return seen


def twice(w, port, db):
    """One transaction: DROP TABLE t_twice; DROP TABLE IF EXISTS t_twice; COMMIT. What it saw."""
    c = psycopg2.connect(host=w.host, port=port, dbname=db, user="postgres", application_name="twice")
    try:
        cur = c.cursor()
        seen = []
        for sql in ("DROP TABLE t_twice", "DROP TABLE IF EXISTS t_twice"):
            cur.execute(sql)
            seen.append(cur.statusmessage)
        c.commit()
        return seen
    finally:
        c.close()


def once(w, port, db):
    """One Query's text: DROP TABLE t_once; DROP TABLE IF EXISTS t_once. What it saw."""
    c = psycopg2.connect(host=w.host, port=port, dbname=db, user="postgres", application_name="once")
    c.autocommit = True
    try:
        cur = c.cursor()
        cur.execute("DROP TABLE t_once; DROP TABLE IF EXISTS t_once")
        return [cur.statusmessage, [n.strip() for n in c.notices]]
    finally:
        c.close()


def test(w):
    w.setup(SETUP)
    w.start()
    oid = {n: w.oid("public." + n) for n in ("t_race", "t_race_rb", "t_race_ie", "t_twice", "t_once")}

    for table, finish, second_drop in (("t_race", "commit", "DROP TABLE"), ("t_race_rb", "rollback", "DROP TABLE"),
                                       ("t_race_ie", "commit", "DROP TABLE IF EXISTS")):
        d = race(w, w.port, w.direct_db, table, finish, second_drop)
        v = race(w, w.p.port, w.db, table, finish, second_drop)
        w.same("psycopg2: A drops %s in a transaction, B's %s waits for it, A does %s" % (table, second_drop, finish),
               d, v)

        w.check_quarantined("public." + table, oid[table], ledger=False)
        held = w.wait_for(lambda: w.sq("SELECT id::text, event_id::text, state FROM predrop.quarantine "
                                       "WHERE database_name = %s AND table_oid = %s", (w.db, oid[table])), timeout=15)
        w.check(len(held) == 1 and held[0][2] == "held", "%s: predrop.quarantine has one held row" % table, held)
        got = w.held_drops(oid[table], 2)
        w.check(len(got) == 2, "%s: two held DROPs, each with its outcome" % table, got)
        if len(got) != 2 or len(held) != 1:
            continue
        stood = "race_a" if finish == "commit" else "race_b"
        want = [(app, "quarantined" if app == stood else "not_dropped", held[0][0] if app == stood else None)
                for app in ("race_a", "race_b")]
        w.check([g[:3] for g in got] == want,
                "%s: the ledger says quarantined for %s's DROP, whose move stood, and not_dropped for the other's"
                % (table, stood), got)
        winner = [g[3] for g in got if g[0] == stood]
        w.check(held[0][1] == winner[0], "%s: the held row names %s's DROP" % (table, stood), (held, got))

    w.same("psycopg2: DROP TABLE then DROP TABLE IF EXISTS of one table in a transaction",
           twice(w, w.port, w.direct_db), twice(w, w.p.port, w.db))
    w.check_quarantined("public.t_twice", oid["t_twice"], ledger=False)
    w.check_first_stood(oid["t_twice"], "t_twice")

    w.same("psycopg2: DROP TABLE then DROP TABLE IF EXISTS of one table in one Query",
           once(w, w.port, w.direct_db), once(w, w.p.port, w.db))
    # One hold for the whole text, its targets merged: the table has one ledger row, quarantined,
    # and the held row names it.
    w.check_quarantined("public.t_once", oid["t_once"])
    got = w.held_drops(oid["t_once"], 1)
    w.check(len(got) == 1, "t_once: one ledger row for the table's two DROPs in one Query", got)


if __name__ == "__main__":
    wirelib.main(test, "wire_race")
