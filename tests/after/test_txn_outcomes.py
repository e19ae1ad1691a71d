#!/usr/bin/python3
"""What did not commit leaves no after, what did leaves one: rolled-back CREATE and ALTER, a
savepoint rolled back inside a committed transaction, a failed statement in a libpq pipeline
(extended protocol, three Syncs; a COMMIT followed by a failure in one Sync is
test_pipeline_commit_error.py) and in psycopg2 multi-statement strings (simple protocol, implicit
blocks, a COMMIT in the middle). Compared with truth.ddl, the event trigger's record of what
committed; a change wrongly taken for committed would find its table (the rolled-back ones are of
tables that exist) or leave a ledger row, so both are checked."""
import time

import afterlib
from libpq_pipeline import pipeline

def test(h):
    existing = ["rb_a", "rb_d", "sp_base", "sp_late", "f_a", "pl_base", "pl_gone", "m_gone"]
    h.exec("".join("CREATE TABLE %s (a int, b text); INSERT INTO %s VALUES (1, 'x');" % (t, t) for t in existing))
    h.reset_truth()
    h.start()
    # Changes that must leave no after; each one's table exists, so a wrong after would find it.
    gone = ["rb_c", "rb_a", "rb_d", "sp_gone", "sp_late", "f_a", "f_new", "pl_x", "pl_y", "pl_gone",
            "m_a", "m_b", "m_gone", "m_d"]

    c = h.pconnect(autocommit=False)
    with c.cursor() as cur:
        cur.execute("CREATE TABLE rb_c (a int)")
    c.rollback()
    with c.cursor() as cur:
        cur.execute("ALTER TABLE rb_a ADD COLUMN z int")
        cur.execute("ALTER TABLE rb_a RENAME COLUMN b TO b2")
    c.rollback()
    with c.cursor() as cur:   # a recreate rolled back: the old table stays
        cur.execute("DROP TABLE rb_d")
        cur.execute("CREATE TABLE rb_d (other bigint)")
    c.rollback()
    h.check(h.exists("public.rb_d") and not h.exists("public.rb_c"), "rolled back: rb_d kept, rb_c never made")

    # A savepoint rolled back inside a committed transaction: before it kept, after it undone.
    with c.cursor() as cur:
        cur.execute("CREATE TABLE sp_keep (a int)")
        cur.execute("ALTER TABLE sp_base RENAME COLUMN b TO b_kept")
        cur.execute("SAVEPOINT s1")
        cur.execute("CREATE TABLE sp_gone (a int)")
        cur.execute("ALTER TABLE sp_late ADD COLUMN undone int")
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("SAVEPOINT s2")
        cur.execute("CREATE TABLE sp_fail (a int)")
        try:
            cur.execute("SELECT 1/0")
        except Exception:  # noqa: BLE001
            pass
        cur.execute("ROLLBACK TO SAVEPOINT s2")
        cur.execute("CREATE TABLE sp_after (a int)")
        cur.execute("RELEASE SAVEPOINT s2")
    c.commit()
    gone.append("sp_fail")
    # A failed statement, then COMMIT (the server answers ROLLBACK).
    with c.cursor() as cur:
        cur.execute("ALTER TABLE f_a ADD COLUMN q int")
        cur.execute("CREATE TABLE f_new (a int)")
        try:
            cur.execute("SELECT 1/0")
        except Exception:  # noqa: BLE001
            pass
    c.commit()
    c.close()

    # psycopg2 multi-statement strings: one implicit block, unless a COMMIT ends it early.
    c = h.pconnect(autocommit=True)
    for sql in ("CREATE TABLE m_a (a int); ALTER TABLE m_gone ADD COLUMN z int; SELECT 1/0; CREATE TABLE m_b (a int)",
                "CREATE TABLE m_c (a int); COMMIT; CREATE TABLE m_d (a int); SELECT 1/0"):
        try:
            with c.cursor() as cur:
                cur.execute(sql)
            h.fail("psycopg2 %r: no error" % sql)
        except Exception as e:  # noqa: BLE001
            h.ok("psycopg2 multi-statement failed as it should: %s" % str(e).splitlines()[0])
    c.close()
    h.check(h.exists("public.m_c") and not h.exists("public.m_d"), "multi-statement: m_c committed, m_d not")

    # A libpq pipeline: a failure aborts the rest of its Sync's implicit block.
    res = pipeline(h.proxy_conninfo(), [
        ["CREATE TABLE pl_x (a int)", "ALTER TABLE pl_gone ADD COLUMN z int", "SELECT 1/0", "CREATE TABLE pl_y (a int)"],
        ["CREATE TABLE pl_ok (a int)", "ALTER TABLE pl_base ADD COLUMN y int"],
        ["BEGIN", "CREATE TABLE pl_d (a int)", "COMMIT", "SELECT 1"],
    ])
    print("# pipeline results: %s" % res)
    h.check(res == [["COMMAND_OK", "COMMAND_OK", "FATAL_ERROR/22012", "PIPELINE_ABORTED"],
                    ["COMMAND_OK", "COMMAND_OK"],
                    ["COMMAND_OK", "COMMAND_OK", "COMMAND_OK", "TUPLES_OK"]],
            "libpq pipeline: the failures where expected", res)

    # A last committed change, after everything else was requested: once its after is in, a stray
    # after of what did not commit would have had its time to arrive too.
    r = h.psql("CREATE TABLE zz_last (a int)")
    h.check(r.rc == 0, "psql: CREATE TABLE zz_last", r)
    h.wait_after("table_name = 'zz_last'")
    time.sleep(0.5)
    committed = {"sp_keep", "sp_base", "sp_after", "m_c", "pl_ok", "pl_base", "pl_d", "zz_last"}
    truth_names = {r[0] for r in h.q("SELECT DISTINCT objid::regclass::text FROM truth.ddl")}
    h.check(truth_names == committed, "truth: exactly the expected changes committed", sorted(truth_names))
    h.check_afters_match_truth("rollbacks, savepoints, failed batches")
    names = lambda rows: sorted({r["table_name"] for r in rows})  # noqa: E731
    got = names(h.afters())
    h.check(set(got) == committed, "afters by name: %s" % sorted(committed), got)
    stray = h.events("reason IN ('post_create', 'post_alter') AND table_name = ANY(%s)", (gone,))
    h.check(not stray, "no ledger row of an after for what did not commit",
            [(e["table_name"], e["outcome"], e["error"]) for e in stray])


if __name__ == "__main__":
    afterlib.main(test, "after_txn_outcomes")
