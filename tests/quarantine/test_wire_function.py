#!/usr/bin/python3
"""The move's function through predrop (issue 21): the first quarantined DROP of a database has the
capture install it and moves inline; every later one calls it. If the function is taken away after
that, the next DROP's call refuses: that DROP runs for real (after its snapshot) with the server's
own answer, the ledger says not_quarantined and why, and the DROPs after it move inline again.

The calls are counted by the server (track_functions = 'pl' on predrop's database)."""
import wirelib

FN_SCHEMA = "predrop_quarantine_move"


def test(w):
    w.setup("CREATE TABLE f1 (a int); CREATE TABLE f2 (a int); CREATE TABLE f3 (a int); CREATE TABLE f4 (a int);")
    w._admin_conn("ALTER DATABASE %s SET track_functions = 'pl'" % w.db)
    w.start()
    oid = {n: w.oid("public." + n) for n in ("f1", "f2", "f3", "f4")}

    def calls():
        rows = w.q("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE schemaname = %s", (FN_SCHEMA,))
        return int(rows[0][0])

    def drop(name):
        d, v = w.psql_both("DROP TABLE %s;\n" % name)
        w.same("psql DROP TABLE %s" % name, d, v)

    drop("f1")
    w.check_quarantined("public.f1", oid["f1"])
    w.check(w.q("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s", (FN_SCHEMA,))[0][0] == 1, "the first DROP had the capture install the move")
    drop("f2")
    w.check_quarantined("public.f2", oid["f2"])
    n = w.wait_for(lambda: calls() or None, timeout=5)
    w.check(n == 1, "the second DROP called it (once)", n)

    # Taken away behind predrop's back: one DROP runs for real, the next ones move inline.
    w.exec("DROP SCHEMA %s CASCADE" % FN_SCHEMA, db=w.db)
    drop("f3")
    w.check_really_dropped("public", "f3", oid["f3"], "the call refused")
    ev = w.wait_for(lambda: w.events("outcome = 'not_quarantined'"), timeout=15)
    w.check(ev and "the move function is missing or out of reach" in (ev[0].get("error") or ""),
            "the ledger says not_quarantined, and why", ev)
    drop("f4")
    w.check_quarantined("public.f4", oid["f4"])

    # A partitioned table: one quarantine, one store row (its partitions' comments only point at it).
    w.setup("CREATE TABLE fp (id int, at date) PARTITION BY RANGE (at);"
            "CREATE TABLE fp_2025 PARTITION OF fp FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');"
            "CREATE TABLE fp_2026 PARTITION OF fp FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');")
    fp = w.oid("public.fp")
    drop("fp")
    w.check_quarantined("public.fp", fp)
    rows = w.wait_for(lambda: w.sq("SELECT table_name, state FROM predrop.quarantine WHERE database_name = %s "
                                   "AND table_name LIKE 'fp%%'", (w.db,)), timeout=15)
    w.check(rows == [("fp", "held")], "one store row for the partitioned table, none for its partitions", rows)
    w.check("quarantine record failed" not in w.p.log_text(), "no store write failed on the way",
            [l for l in w.p.log_text().splitlines() if "record failed" in l][:3])


if __name__ == "__main__":
    wirelib.main(test, "wire_function")
