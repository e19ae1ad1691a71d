#!/usr/bin/python3
"""A quarantined table blocks nothing that its DROP would have let go (issue 22).

Each later statement that failed under a quarantine rule before (the quarantined table still used
the function, the other table, the sequence, the type, the domain or the role) runs in one psql script after the DROP,
direct and through predrop with a quarantine rule; the transcripts (tags, SQLSTATEs, messages,
notices: \\set VERBOSITY verbose) must be equal, and every table dropped through predrop must be in
quarantine, with what it detached recorded for undrop (tests/quarantine/test_detach.py). Three of
the cases run again through psycopg2, each statement's status, notices or error fields compared.
"""
import psycopg2

import wirelib
from test_wire_python import run as psycopg2_run

SETUP = r"""
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE t_trig (a int);
CREATE TRIGGER t_trig_stamp BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION stamp();

CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int, parent_id int REFERENCES parent (id));

CREATE TABLE audit (what text);
CREATE TABLE t_rule (a int);
CREATE RULE t_rule_log AS ON DELETE TO t_rule DO ALSO INSERT INTO audit VALUES ('delete');

CREATE SEQUENCE shared_ids;
CREATE FUNCTION positive(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > 0';
CREATE TABLE t_expr (id int DEFAULT nextval('shared_ids'), n int CHECK (positive(n)));

CREATE FUNCTION stamp2() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE t_casc (a int);
CREATE TRIGGER t_casc_stamp BEFORE INSERT ON t_casc FOR EACH ROW EXECUTE FUNCTION stamp2();

CREATE TABLE t_grant (a int);

CREATE FUNCTION stamp_y() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE y_trig (a int);
CREATE TRIGGER y_trig_stamp BEFORE INSERT ON y_trig FOR EACH ROW EXECUTE FUNCTION stamp_y();
CREATE TABLE y_parent (id int PRIMARY KEY);
CREATE TABLE y_child (id int, parent_id int REFERENCES y_parent (id));

CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE DOMAIN pos AS int CHECK (VALUE > 0);
CREATE TABLE t_types (m mood DEFAULT 'happy', ms mood[], p pos, note text);
INSERT INTO t_types VALUES ('sad', '{happy,sad}', 3, 'x');
CREATE TABLE row_src (a int, b text);
CREATE TABLE t_rowtype (r row_src);
INSERT INTO t_rowtype VALUES (ROW(1, 'one'));
CREATE TYPE pair AS (x int, y int);
CREATE TABLE t_comp (p pair, q int);
CREATE TYPE region AS ENUM ('north', 'south');
CREATE TABLE t_pk (r region, v int) PARTITION BY LIST (r);
CREATE TABLE t_pk_north PARTITION OF t_pk FOR VALUES IN ('north');

CREATE TABLE ref_tbl (a int);
CREATE TABLE t_pol (a int);
ALTER TABLE t_pol ENABLE ROW LEVEL SECURITY;
CREATE POLICY p1 ON t_pol USING (a IN (SELECT a FROM ref_tbl));
CREATE TYPE tt AS (a int, b text);
CREATE TABLE t_typed OF tt;
CREATE TABLE t_st (a int, b int);
CREATE STATISTICS public.st_ab ON a, b FROM t_st;
CREATE TABLE t_pub (a int PRIMARY KEY);
CREATE PUBLICATION pub_y FOR TABLE t_pub;
CREATE COLLATION my_c (locale = 'C');
CREATE TABLE t_coll (a text);
CREATE INDEX t_coll_i ON t_coll (a COLLATE my_c);
CREATE SCHEMA colls;
CREATE COLLATION colls.c2 (locale = 'C');
CREATE TABLE t_colcoll (a text COLLATE colls.c2, b int);
INSERT INTO t_colcoll VALUES ('x', 1);
CREATE FUNCTION twice(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
CREATE TABLE t_gen (a int, b int GENERATED ALWAYS AS (twice(a)) STORED);
"""

# Roles are cluster-wide: each side (and each client) drops a role of its own.
ROLES = {"direct": None, "via": None}
Y_ROLES = {"direct": None, "via": None}


def test(w):
    w.setup(SETUP)
    for roles, kind in ((ROLES, "leaver"), (Y_ROLES, "yleaver")):
        for side in roles:
            roles[side] = "%s_%s_%s" % (w.db, kind, side)
            w._admin_conn('DROP ROLE IF EXISTS "%s"' % roles[side])
            w._admin_conn('CREATE ROLE "%s"' % roles[side])
    for side, db in (("direct", w.direct_db), ("via", w.db)):
        w.exec('GRANT SELECT ON t_grant TO "%s"; CREATE TABLE t_left (a int); ALTER TABLE t_left OWNER TO "%s"'
               % (ROLES[side], ROLES[side]), db=db)
        w.exec('CREATE TABLE y_left (a int); ALTER TABLE y_left OWNER TO "%s"' % Y_ROLES[side], db=db)
    w.start()
    names = ["t_trig", "child", "t_rule", "t_expr", "t_casc", "t_grant", "t_left", "y_trig", "y_child", "y_left",
             "t_types", "t_rowtype", "t_comp", "t_pol", "t_typed", "t_st", "t_pub", "t_coll", "t_colcoll", "t_gen"]
    oid = {n: w.oid("public." + n) for n in names}
    pk_oid = w.oid("public.t_pk")

    def form(label, script, **kw):
        d, v = w.psql_both(script, **kw)
        return w.same("psql " + label, d, v)

    form("DROP FUNCTION after its table's trigger", "DROP TABLE t_trig;\nDROP FUNCTION stamp();\n")
    form("DROP TABLE parent after the table whose foreign key referenced it",
         "DROP TABLE child;\nDROP TABLE parent;\n")
    form("DROP TABLE after a table whose rule wrote to it", "DROP TABLE t_rule;\nDROP TABLE audit;\n")
    form("DROP SEQUENCE and DROP FUNCTION after a table's default and check",
         "DROP TABLE t_expr;\nDROP SEQUENCE shared_ids;\nDROP FUNCTION positive(int);\n")
    form("DROP FUNCTION ... CASCADE after its table's trigger (no notice naming the quarantine)",
         "DROP TABLE t_casc;\nDROP FUNCTION stamp2() CASCADE;\n")
    form("DROP TYPE and DROP DOMAIN after the table whose columns had them",
         "DROP TABLE t_types;\nDROP TYPE mood;\nDROP DOMAIN pos;\n")
    form("DROP TABLE after a table with a column of its row type", "DROP TABLE t_rowtype;\nDROP TABLE row_src;\n")
    form("DROP TYPE ... CASCADE after a table with a column of it (no notice naming the quarantine)",
         "DROP TABLE t_comp;\nDROP TYPE pair CASCADE;\n")
    form("DROP TABLE after a table whose row security policy read it", "DROP TABLE t_pol;\nDROP TABLE ref_tbl;\n")
    form("DROP TYPE after a typed table (OF type)", "DROP TABLE t_typed;\nDROP TYPE tt;\n")
    form("the extended statistics and the publication let the table go",
         "DROP TABLE t_st;\nSELECT stxname FROM pg_statistic_ext WHERE stxname = 'st_ab';\n"
         "DROP TABLE t_pub;\nSELECT count(*) FROM pg_publication_tables WHERE pubname = 'pub_y';\n")
    form("DROP COLLATION after a table with an index using it", "DROP TABLE t_coll;\nDROP COLLATION my_c;\n")
    form("DROP FUNCTION after a table with a column generated by it", "DROP TABLE t_gen;\nDROP FUNCTION twice(int);\n")
    form("DROP SCHEMA ... CASCADE of a collation a dropped table's column had (no notice naming the quarantine)",
         "DROP TABLE t_colcoll;\nDROP SCHEMA colls CASCADE;\n")
    # Partitioned by the enum: the key cannot change type, so the table is dropped for real.
    form("DROP TYPE after a table partitioned by it", "DROP TABLE t_pk;\nDROP TYPE region;\n")
    form("DROP ROLE after the tables it had a grant on and owned",
         "DROP TABLE t_grant;\nDROP TABLE t_left;\nDROP ROLE :\"leaver\";\n",
         variables=lambda side: [("leaver", ROLES[side])])

    # The same through a driver (psycopg2): each statement's status, notices, or error and its fields.
    seen = []
    for side, host, port, db in w.sides():
        c = psycopg2.connect(host=host, port=port, dbname=db, user="postgres", application_name="wire_yield")
        c.autocommit = True
        try:
            seen.append(psycopg2_run(c, ["DROP TABLE y_trig", "DROP FUNCTION stamp_y()", "DROP TABLE y_child",
                                         "DROP TABLE y_parent", "DROP TABLE y_left",
                                         'DROP ROLE "%s"' % Y_ROLES[side]]))
        finally:
            c.close()
    # The role's name differs by side; the rest must be equal.
    seen[1] = [tuple(x.replace(Y_ROLES["via"], Y_ROLES["direct"]) if isinstance(x, str) else x for x in r)
               for r in seen[1]]
    w.same("psycopg2 DROP FUNCTION, DROP TABLE and DROP ROLE after the tables that used them", seen[0], seen[1])
    for n in names:
        w.check_quarantined("public." + n, oid[n], ledger=False)
    w.check(w.via_dropped(pk_oid), "t_pk (partitioned by the enum it let go): dropped for real through predrop")
    cols = w.q("SELECT count(*) FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
               (oid["t_colcoll"],))
    w.check(cols == [(2,)], "the quarantined table kept its column whose collation's schema was dropped", cols)
    # (The least-privilege run's capture role has grants of its own on every table: also let go.)
    rows = w.q("SELECT d.description::jsonb->>'table', p->>'kind', p->>'name' "
               "FROM pg_description d JOIN pg_class c ON c.oid = d.objoid JOIN pg_namespace n ON n.oid = c.relnamespace, "
               "jsonb_array_elements(d.description::jsonb->'detached') p "
               "WHERE n.nspname = %s AND d.objsubid = 0", (wirelib.QSCHEMA,))
    detached = sorted((t, k, name) for t, k, name in rows if k != "grant" or name.strip('"') == ROLES["via"])
    w.check(detached == [("child", "foreign_key", "child_parent_id_fkey"), ("t_casc", "trigger", "t_casc_stamp"),
                         ("t_colcoll", "column_type", "a"), ("t_coll", "index", "t_coll_i"),
                         ("t_comp", "column_type", "p"),
                         ("t_expr", "check", "t_expr_n_check"), ("t_expr", "default", "id"), ("t_gen", "generated", "b"),
                         ("t_grant", "grant", ROLES["via"]), ("t_pol", "policy", "p1"),
                         ("t_pub", "publication", "pub_y"), ("t_rowtype", "column_type", "r"),
                         ("t_rule", "rule", "t_rule_log"), ("t_st", "statistics", "st_ab"),
                         ("t_trig", "trigger", "t_trig_stamp"), ("t_typed", "of_type", "public.tt"),
                         ("t_types", "column_type", "m"), ("t_types", "column_type", "ms"),
                         ("t_types", "column_type", "p"), ("t_types", "default", "m"), ("y_child", "foreign_key", "y_child_parent_id_fkey"),
                         ("y_trig", "trigger", "y_trig_stamp")],
            "each quarantined table recorded what it let go", detached)
    for role in list(ROLES.values()) + list(Y_ROLES.values()):
        w._admin_conn('DROP ROLE IF EXISTS "%s"' % role)


if __name__ == "__main__":
    wirelib.main(test, "wire_yield")
