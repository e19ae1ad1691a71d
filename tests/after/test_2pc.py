#!/usr/bin/python3
"""Two-phase commit through predrop: the shape changes of a PREPARE TRANSACTION become afters only
when another session's COMMIT PREPARED commits them; a ROLLBACK PREPARED leaves none. The cluster
of scripts/pg-cluster.sh has max_prepared_transactions = 20."""
import time

import afterlib


def test(h):
    mpt = int(h.q("SHOW max_prepared_transactions")[0][0])
    if not h.check(mpt > 0, "the cluster allows prepared transactions (max_prepared_transactions %d)" % mpt):
        return
    h.exec("CREATE TABLE tp_alt (a int, b text); INSERT INTO tp_alt VALUES (1, 'x');"
           "CREATE TABLE tp_re (a int); INSERT INTO tp_re VALUES (1);"
           "CREATE TABLE tp_rb (a int); ANALYZE;")
    h.reset_truth()
    o_alt, o_re_old, o_rb = h.oid("public.tp_alt"), h.oid("public.tp_re"), h.oid("public.tp_rb")
    h.start()

    a = h.pconnect(autocommit=True)
    with a.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("CREATE TABLE tp_new (a int, b text)")
        cur.execute("ALTER TABLE tp_alt RENAME COLUMN b TO b2")
        cur.execute("DROP TABLE tp_re")
        cur.execute("CREATE TABLE tp_re (a int, c date)")
        cur.execute("PREPARE TRANSACTION 'after_g1'")
    a.close()
    # Prepared, not committed: nothing yet (two statistics polls and more).
    time.sleep(1.5)
    h.check(h.afters() == [], "PREPARE TRANSACTION: no after before the commit",
            [(s["table_name"], s["reason"]) for s in h.afters()])
    b = h.pconnect(autocommit=True)
    with b.cursor() as cur:
        cur.execute("COMMIT PREPARED 'after_g1'")
    o_new, o_re = h.oid("public.tp_new"), h.oid("public.tp_re")
    new = h.wait_after("table_oid = %s AND reason = 'post_create'", (o_new,))
    h.check(len(new) == 1 and new[0]["pair_of"] is None, "COMMIT PREPARED: tp_new's post_create (unpaired)",
            [(s["reason"], s["pair_of"]) for s in new])
    alt = h.wait_after("table_oid = %s AND reason = 'post_alter'", (o_alt,))
    h.check_pair("COMMIT PREPARED: tp_alt", "pre_drop", alt[0] if alt else None, oid=o_alt)
    if alt:
        h.check(h.snapshot_columns(alt[0]) == ["a", "b2"], "tp_alt's after has the renamed column", h.snapshot_columns(alt[0]))
    re_ = h.wait_after("table_oid = %s AND reason = 'post_create'", (o_re,))
    before = h.check_pair("COMMIT PREPARED: tp_re recreated", "pre_drop", re_[0] if re_ else None)
    if before:
        h.check(int(before["table_oid"]) == o_re_old, "tp_re's before is the dropped table's", before["table_oid"])
    h.check_afters_match_truth("COMMIT PREPARED")
    n_after_commit = len(h.afters())

    a = h.pconnect(autocommit=True)
    with a.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("ALTER TABLE tp_rb ADD COLUMN z int")
        cur.execute("CREATE TABLE tp_never (a int)")
        cur.execute("PREPARE TRANSACTION 'after_g2'")
    a.close()
    with b.cursor() as cur:
        cur.execute("ROLLBACK PREPARED 'after_g2'")
    # A later committed change of the same session shows capture still runs.
    with b.cursor() as cur:
        cur.execute("CREATE TABLE tp_last (a int)")
    h.wait_after("table_name = 'tp_last'")
    b.close()
    h.check(not h.afters("table_oid = %s OR table_name = 'tp_never'", (o_rb,)),
            "ROLLBACK PREPARED: no after of tp_rb or tp_never")
    h.check(len(h.afters()) == n_after_commit + 1, "ROLLBACK PREPARED: only tp_last's after came since",
            [(s["table_name"], s["reason"]) for s in h.afters()])
    h.check_afters_match_truth("ROLLBACK PREPARED")


if __name__ == "__main__":
    afterlib.main(test, "after_2pc")
