#!/usr/bin/python3
"""psycopg2 through a quarantine rule sees what the server says to the DROP itself (issue 16).

For every statement the client's view is its statusmessage and the notices it brought, or the
error's pgcode, pgerror and every diag field; the lists are compared direct and through predrop.
The forms: DROP, IF EXISTS of a missing table, 42P01, 2BP01, CASCADE, 42809, not the owner (42501),
DROP a, b, c, a multi-statement execute (and one failing after its DROP), a transaction rolled
back, a savepoint rolled back to and DROP SCHEMA CASCADE (2PC: test_wire_2pc.py).
"""
import psycopg2
import psycopg2.extensions

import wirelib

DIAG = ("severity", "severity_nonlocalized", "sqlstate", "message_primary", "message_detail", "message_hint",
        "statement_position", "internal_position", "internal_query", "context", "schema_name", "table_name",
        "column_name", "datatype_name", "constraint_name", "source_file", "source_line", "source_function")

SETUP = r"""
CREATE TABLE y_plain (id int PRIMARY KEY); CREATE TABLE y_dep (a int); CREATE VIEW y_dep_v AS SELECT a FROM y_dep;
CREATE TABLE y_casc (a int); CREATE VIEW y_casc_v AS SELECT a FROM y_casc; CREATE VIEW y_casc_vv AS SELECT a FROM y_casc_v;
CREATE TABLE y_owned (a int); CREATE TABLE y_a (a int); CREATE TABLE y_b (a int); CREATE TABLE y_c (a int);
CREATE TABLE y_multi (a int); CREATE TABLE y_multi_f (a int); CREATE TABLE y_rb (a int);
CREATE TABLE y_sp (a int); CREATE TABLE y_sp2 (a int);
CREATE SCHEMA y_s; CREATE TABLE y_s.one (a int PRIMARY KEY); CREATE TABLE y_s.two (a int REFERENCES y_s.one (a));
"""


def run(conn, statements):
    """Each statement through CONN: what psycopg2 let the client see."""
    seen = []
    for sql in statements:
        if isinstance(sql, tuple):          # a method of the connection: ("commit",), ("rollback",)
            getattr(conn, sql[0])(*sql[1:])
            seen.append((sql[0], conn.notices[:]))
            del conn.notices[:]
            continue
        cur = conn.cursor()
        try:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else None
            seen.append(("ok", sql, cur.statusmessage, cur.rowcount, rows, conn.notices[:]))
        except psycopg2.Error as e:
            seen.append(("error", sql, e.pgcode, e.pgerror, {k: getattr(e.diag, k) for k in DIAG}, conn.notices[:]))
            if not conn.autocommit:
                conn.rollback()
        del conn.notices[:]
        cur.close()
    return seen


def test(w):
    w.setup(SETUP)
    w.start()
    names = ["y_plain", "y_dep", "y_casc", "y_owned", "y_a", "y_b", "y_c", "y_multi", "y_multi_f", "y_rb",
             "y_sp", "y_sp2"]
    oid = {n: w.oid("public." + n) for n in names}
    oid.update({"y_s." + n: w.oid("y_s." + n) for n in ("one", "two")})

    def connect(side, host, port, db, user="postgres", autocommit=True):
        c = psycopg2.connect(host=host, port=port, dbname=db, user=user, application_name="wire_python")
        c.autocommit = autocommit
        return c

    def both(label, statements, user="postgres", autocommit=True):
        seen = []
        for side, host, port, db in w.sides():
            c = connect(side, host, port, db, user, autocommit)
            try:
                seen.append(run(c, statements))
            finally:
                c.close()
        return w.same("psycopg2 " + label, seen[0], seen[1])

    both("autocommit forms", [
        "DROP TABLE y_plain", "DROP TABLE IF EXISTS y_missing", "DROP TABLE y_missing", "DROP TABLE y_dep",
        "DROP TABLE y_casc CASCADE", "DROP TABLE y_dep_v", "DROP TABLE y_a, y_b, y_c",
        "CREATE TABLE y_new (); DROP TABLE y_multi; SELECT 1",
        "CREATE TABLE y_new2 (); DROP TABLE y_multi_f; SELECT 1/0",
        "SELECT to_regclass('y_new2') IS NULL AS rolled_back",
        "DROP SCHEMA y_s", "DROP SCHEMA y_s CASCADE"])
    for n in ("y_plain", "y_casc", "y_a", "y_b", "y_c", "y_multi"):
        w.check_quarantined("public." + n, oid[n])
    for n in ("one", "two"):
        w.check_quarantined("y_s." + n, oid["y_s." + n])
    w.check_kept("public.y_dep", oid["y_dep"], "2BP01")
    w.check_kept("public.y_multi_f", oid["y_multi_f"], "failing multi-statement execute")
    w.check(w.oid("public.y_casc_vv") is None and w.dq("SELECT to_regclass('y_casc_vv')")[0][0] is None,
            "CASCADE: the view on the view is gone on both sides")

    both("not the owner (42501)", ["DROP TABLE y_owned", "DROP TABLE IF EXISTS y_owned"], user=w.other)
    w.check_kept("public.y_owned", oid["y_owned"], "42501")

    both("transactions", [
        "DROP TABLE y_rb", ("rollback",), "SELECT to_regclass('y_rb') IS NOT NULL AS back",
        "SAVEPOINT a", "DROP TABLE y_sp", "ROLLBACK TO SAVEPOINT a", "DROP TABLE y_sp2", ("commit",)],
         autocommit=False)
    w.check_kept("public.y_rb", oid["y_rb"], "ROLLBACK")
    w.check_kept("public.y_sp", oid["y_sp"], "ROLLBACK TO SAVEPOINT")
    w.check_quarantined("public.y_sp2", oid["y_sp2"])

    w.check(w.quarantine_count() == 9, "nine tables in quarantine, no more", w.quarantine_count())
    w.check(not w.q("SELECT 1 FROM truth.drops WHERE object_type = 'table'"),
            "through predrop, truth.drops has no table really dropped",
            w.q("SELECT schema_name, object_name FROM truth.drops"))


if __name__ == "__main__":
    wirelib.main(test, "wire_python")
