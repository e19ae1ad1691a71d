#!/usr/bin/python3
"""psql through a quarantine rule sees what the server says to the DROP itself (issue 16).

Each form is one psql script (\\set VERBOSITY verbose, ON_ERROR_STOP off, -a: the whole transcript of
tags, SQLSTATEs, messages, DETAIL, HINT, CONTEXT and LOCATION), run on the direct database and through
predrop; the two transcripts must be equal. Then what the server did: direct the table is dropped
(truth.drops), through predrop its OID is in the quarantine schema and truth.drops never saw it go,
and the ledger says quarantined. The forms the server refuses, and ROLLBACK, a rolled-back savepoint
and a failing multi-statement Query leave the table where it was (2PC: test_wire_2pc.py).
"""
import wirelib

SETUP = r"""
CREATE TABLE t_plain (id int PRIMARY KEY, v text); INSERT INTO t_plain VALUES (1, 'a');
CREATE TABLE t_dep (a int); CREATE VIEW v_dep AS SELECT a FROM t_dep;
CREATE TABLE t_casc (a int); CREATE VIEW v_casc AS SELECT a FROM t_casc;
CREATE TABLE t_owned (a int);
CREATE TABLE t_theirs (a int, b text); CREATE INDEX ON t_theirs (b); ALTER TABLE t_theirs OWNER TO OTHER;
GRANT USAGE ON SCHEMA truth TO OTHER; GRANT INSERT ON truth.drops TO OTHER; GRANT CREATE ON SCHEMA public TO OTHER;
CREATE TABLE t_base (a int); CREATE VIEW v_plain AS SELECT a FROM t_base;
CREATE TABLE m_a (a int); CREATE TABLE m_b (b int); CREATE TABLE m_c (c int);
CREATE TABLE m_x (a int); CREATE TABLE m_y (a int);
CREATE TABLE t_multi (a int); CREATE TABLE t_multi_f (a int);
CREATE TABLE t_rb (a int);
CREATE TABLE t_sp (a int); CREATE TABLE t_sp2 (a int);
CREATE SCHEMA s_cas; CREATE TABLE s_cas.a (a int); CREATE TABLE s_cas.b (b int);
CREATE VIEW s_cas.v AS SELECT a FROM s_cas.a; CREATE SEQUENCE s_cas.loose;
ANALYZE;
"""


def test(w):
    w.setup(SETUP)
    w.start()
    names = ["t_plain", "t_dep", "t_casc", "t_owned", "t_theirs", "t_base", "m_a", "m_b", "m_c", "m_x", "m_y", "t_multi", "t_multi_f",
             "t_rb", "t_sp", "t_sp2"]
    oid = {n: w.oid("public." + n) for n in names}
    oid.update({"s_cas." + n: w.oid("s_cas." + n) for n in ("a", "b")})

    def form(label, script, **kw):
        d, v = w.psql_both(script, **kw)
        return w.same("psql " + label, d, v)

    form("DROP TABLE t", "DROP TABLE t_plain;\n")
    w.check_quarantined("public.t_plain", oid["t_plain"])

    form("DROP TABLE IF EXISTS missing", "DROP TABLE IF EXISTS t_missing;\nSELECT 'after' AS after;\n")
    form("DROP TABLE missing (42P01)", "DROP TABLE t_missing;\nDROP TABLE public.t_missing;\n")

    form("dependents without CASCADE (2BP01)", "DROP TABLE t_dep;\n")
    w.check_kept("public.t_dep", oid["t_dep"], "2BP01")

    form("DROP TABLE ... CASCADE", "DROP TABLE t_casc CASCADE;\n")
    w.check_quarantined("public.t_casc", oid["t_casc"])
    w.check(w.oid("public.v_casc") is None and w.dq("SELECT to_regclass('public.v_casc')")[0][0] is None,
            "CASCADE: the view v_casc is gone on both sides")

    form("not the owner (42501)", "SELECT current_user = 'postgres' AS superuser;\nDROP TABLE t_owned;\n",
         user=w.other)
    w.check_kept("public.t_owned", oid["t_owned"], "42501")
    # The move runs as the client's role: an ordinary owner's DROP is quarantined too (without CREATE
    # on the table's schema: test_wire_privilege.py).
    form("an ordinary role drops its own table", "DROP TABLE t_theirs;\nDROP TABLE t_theirs;\n", user=w.other)
    w.check_quarantined("public.t_theirs", oid["t_theirs"])

    form("a view named in DROP TABLE (42809)", "DROP TABLE v_plain;\nDROP TABLE IF EXISTS v_plain;\n")
    w.check(w.oid("public.v_plain") is not None, "42809: the view is still there")

    form("a temporary table", "CREATE TEMP TABLE tt (a int);\nDROP TABLE tt;\nDROP TABLE tt;\n")
    tt = w.q("SELECT schema_name FROM truth.drops WHERE object_name = 'tt'")
    w.check(len(tt) == 1 and tt[0][0].startswith("pg_temp"), "temporary table: really dropped through predrop", tt)
    w.check(len(w.dq("SELECT 1 FROM truth.drops WHERE object_name = 'tt'")) == 1,
            "temporary table: really dropped direct")
    w.check(w.quarantine_count() == 3, "temporary table: nothing more in quarantine (t_plain, t_casc, t_theirs)",
            w.quarantine_count())

    form("DROP TABLE a, b, c", "DROP TABLE m_a, m_b, public.m_c;\n")
    for n in ("m_a", "m_b", "m_c"):
        w.check_quarantined("public." + n, oid[n])

    form("DROP TABLE t, missing (42P01 for the whole statement)", "DROP TABLE m_x, t_missing;\n")
    w.check_kept("public.m_x", oid["m_x"], "DROP TABLE t, missing")
    form("DROP TABLE IF EXISTS missing, t", "DROP TABLE IF EXISTS t_missing, m_y;\n")
    w.check_quarantined("public.m_y", oid["m_y"])

    form("multi-statement Query", "CREATE TABLE x_new (); \\; DROP TABLE t_multi \\; SELECT 1 AS one;\n"
         "SELECT to_regclass('x_new') IS NOT NULL AS x_new_exists;\n")
    w.check_quarantined("public.t_multi", oid["t_multi"])

    form("multi-statement Query failing after the DROP",
         "CREATE TABLE x_new2 (); \\; DROP TABLE t_multi_f \\; SELECT 1/0;\n"
         "SELECT to_regclass('x_new2') IS NULL AS rolled_back;\n")
    w.check_kept("public.t_multi_f", oid["t_multi_f"], "failing multi-statement Query")

    form("BEGIN; DROP; ROLLBACK", "BEGIN;\nDROP TABLE t_rb;\nSELECT to_regclass('t_rb') IS NULL AS gone;\nROLLBACK;\n"
         "SELECT to_regclass('t_rb') IS NOT NULL AS back;\n")
    w.check_kept("public.t_rb", oid["t_rb"], "ROLLBACK")

    form("savepoint rolled back to", "BEGIN;\nSAVEPOINT a;\nDROP TABLE t_sp;\nROLLBACK TO SAVEPOINT a;\n"
         "DROP TABLE t_sp2;\nDROP TABLE t_sp2;\nROLLBACK TO a;\nDROP TABLE t_sp2;\nCOMMIT;\n")
    w.check_kept("public.t_sp", oid["t_sp"], "ROLLBACK TO SAVEPOINT")
    w.check_quarantined("public.t_sp2", oid["t_sp2"])

    form("DROP SCHEMA s CASCADE", "DROP SCHEMA s_cas;\nDROP SCHEMA s_cas CASCADE;\n")
    w.check(w.q("SELECT count(*) FROM pg_namespace WHERE nspname = 's_cas'")[0][0] == 0 and
            w.dq("SELECT count(*) FROM pg_namespace WHERE nspname = 's_cas'")[0][0] == 0,
            "DROP SCHEMA: the schema is gone on both sides")
    for n in ("a", "b"):
        w.check_quarantined("s_cas." + n, oid["s_cas." + n])

    quarantined = ["t_plain", "t_casc", "t_theirs", "m_a", "m_b", "m_c", "m_y", "t_multi", "t_sp2", "s_cas.a", "s_cas.b"]
    w.check(w.quarantine_count() == len(quarantined), "%d tables in quarantine, no more" % len(quarantined),
            w.q("SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'",
                (wirelib.QSCHEMA,)))
    w.check(w.q("SELECT count(*) FROM truth.drops WHERE object_type = 'table'")[0][0] == 1,
            "through predrop, truth.drops has one table really dropped (the temporary one)",
            w.q("SELECT schema_name, object_name FROM truth.drops"))


if __name__ == "__main__":
    wirelib.main(test, "wire_psql")
