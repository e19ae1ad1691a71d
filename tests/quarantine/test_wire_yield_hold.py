#!/usr/bin/python3
"""What the quarantine cannot detach yields at the later statement (issue 22).

A quarantined table keeps what no ALTER can take from it: its owner when an ordinary role dropped
its own table (it may not give the table away), its table access method, its partition key's
operator class. A later DROP ROLE, DROP ACCESS METHOD or DROP OPERATOR CLASS would then fail through
predrop and succeed direct. predrop holds such a statement, purges the quarantined tables that use
what it drops (their snapshots stay), and releases it. Each case runs direct and through predrop
with a quarantine rule; the client's transcripts (psql, \\set VERBOSITY verbose) must be equal, and
through predrop:
- the table was in quarantine after its DROP and is gone after the later statement;
- the ledger has a `yielded` row for it naming the statement, and predrop.quarantine says purged;
- predrop_quarantine_yielded_total counts it under the statement's kind;
- `predrop undrop` of it says it was purged, and to what it yielded.
A DROP ROLE that fails direct too (the role still owns a live table) fails the same way, a DROP of
something that does not exist gets the server's own error or notice, and a later statement with
nothing quarantined in its way is only relayed. One case runs again through
psycopg2, each statement's status, notices or error fields compared.
"""
import subprocess

import psycopg2

import wirelib
from test_wire_python import run as psycopg2_run

SETUP = r"""
CREATE ACCESS METHOD heap_y TYPE TABLE HANDLER heap_tableam_handler;
CREATE TABLE t_am (a int) USING heap_y;
INSERT INTO t_am VALUES (1), (2);

CREATE OPERATOR CLASS y_int4_ops FOR TYPE int4 USING btree AS
  OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 btint4cmp(int4, int4);
CREATE TABLE t_opc (a int) PARTITION BY RANGE (a y_int4_ops);
CREATE TABLE t_opc_1 PARTITION OF t_opc FOR VALUES FROM (0) TO (10);
INSERT INTO t_opc VALUES (3);

CREATE TABLE t_keep (a int);
"""

# Roles are cluster-wide: each side has its own. owner: drops its own table, then is dropped.
# stays: owns a quarantined table and a live one (its DROP ROLE fails on both sides).
# d: the psycopg2 run's owner.
KINDS = ("owner", "stays", "drv")
# The test's grants (CREATE on public for the tables, the event trigger's truth.drops) would block
# DROP ROLE on both sides.
REVOKE = ('REVOKE CREATE ON SCHEMA public FROM :"role";\nREVOKE USAGE ON SCHEMA truth FROM :"role";\n'
          'REVOKE INSERT ON truth.drops FROM :"role";\n')


def same_names(value, name):
    """VALUE (psycopg2_run's tuples, dicts and strings) with NAME written as ROLE."""
    if isinstance(value, str):
        return value.replace(name, "ROLE")
    if isinstance(value, dict):
        return {k: same_names(v, name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(same_names(v, name) for v in value)
    return value


def test(w):
    w.setup(SETUP)
    roles = {k: {} for k in KINDS}
    for kind in KINDS:
        for side in ("direct", "via"):
            name = "%s_%s_%s" % (w.db, kind, side)
            roles[kind][side] = name
            w._admin_conn('DROP ROLE IF EXISTS "%s"' % name)
            w._admin_conn('CREATE ROLE "%s" LOGIN' % name)
    for side, db in (("direct", w.direct_db), ("via", w.db)):
        for kind in KINDS:
            w.exec('GRANT CREATE ON SCHEMA public TO "{0}"; GRANT USAGE ON SCHEMA truth TO "{0}"; '
                   'GRANT INSERT ON truth.drops TO "{0}"'.format(roles[kind][side]), db=db)
    w.start()
    if w.capture_role:
        # The purge is the capture role's DROP: the test's event trigger records it as that role.
        w.exec('GRANT USAGE ON SCHEMA truth TO "{0}"; GRANT INSERT ON truth.drops TO "{0}"'.format(w.capture_role))

    def as_role(kind, script):
        """SCRIPT as the role KIND of each side (direct, via): psql's transcripts, role names made equal."""
        out = []
        for side, _, port, db in w.sides():
            text = w.psql_run(script, port, db, user=roles[kind][side])
            out.append(text.replace(roles[kind][side], "ROLE"))
        return out

    def form(label, script, kind=None):
        variables = (lambda side: [("role", roles[kind][side])]) if kind else None
        d, v = w.psql_both(script, variables=variables)
        if kind:
            d, v = d.replace(roles[kind]["direct"], "ROLE"), v.replace(roles[kind]["via"], "ROLE")
        return w.same("psql " + label, d, v)

    def yielded_rows(oid):
        return w.events("table_oid = %s AND outcome = 'yielded'", (oid,))

    def check_yielded(label, qualified, oid, statement):
        w.check(w.in_quarantine(oid) is None and not w.exists(qualified),
                "%s: the quarantined %s (oid %s) was purged" % (label, qualified, oid))
        schema, table = qualified.split(".")
        rows = w.wait_for(lambda: yielded_rows(oid), timeout=15)
        w.check(len(rows) == 1 and rows[0]["schema_name"] == schema and rows[0]["table_name"] == table
                and ("yielded to " + statement) in (rows[0]["error"] or ""),
                "%s: the ledger says %s yielded to %s" % (label, qualified, statement),
                [(r["schema_name"], r["table_name"], r["error"]) for r in rows])
        state = w.wait_for(lambda: w.sq("SELECT state, state_reason FROM predrop.quarantine "
                                        "WHERE database_name = %s AND table_oid = %s AND state = 'purged'",
                                        (w.db, oid)), timeout=15)
        w.check(len(state) == 1 and state[0][1].startswith("yielded to " + statement),
                "%s: predrop.quarantine says purged, yielded to %s" % (label, statement), state)
        snaps = w.snapshots("table_oid = %s", (oid,))
        w.check(len(snaps) >= 1, "%s: the snapshot of %s stays" % (label, qualified), len(snaps))

    # 1. An ordinary owner drops its own table: it stays that role's in quarantine. DROP ROLE then.
    d, v = as_role("owner", "CREATE TABLE o_left (a int);\nINSERT INTO o_left VALUES (1);\n")
    w.same("psql the owner creates its table", d, v)
    o_oid = w.oid("public.o_left")
    d, v = as_role("owner", "DROP TABLE o_left;\n")
    w.same("psql the owner drops its own table", d, v)
    w.check_quarantined("public.o_left", o_oid)
    owner_of = w.q("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = %s", (o_oid,))
    w.check(owner_of == [(roles["owner"]["via"],)], "o_left: in quarantine it is still its owner's", owner_of)
    before = w.metric("predrop_quarantine_yielded_total", 'to="drop_role"') or 0
    form("DROP ROLE of the owner of a quarantined table", REVOKE + 'DROP ROLE :"role";\n', kind="owner")
    check_yielded("DROP ROLE", "public.o_left", o_oid, "DROP ROLE")
    after = w.wait_for(lambda: (w.metric("predrop_quarantine_yielded_total", 'to="drop_role"') or 0) > before and
                       w.metric("predrop_quarantine_yielded_total", 'to="drop_role"'), timeout=5)
    w.check(after == before + 1, "predrop_quarantine_yielded_total{to=\"drop_role\"} counted it", (before, after))
    # undrop of the purged version says so.
    r = subprocess.run([w.bin, "undrop", "public.o_left", "--capture", w.conninfo(), "--store", w.store_conninfo(),
                        "--database", w.db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    w.check(r.returncode != 0 and "purged" in r.stdout and "yielded to DROP ROLE" in r.stdout,
            "undrop of the purged version says it was purged and to what it yielded", r.stdout)

    # 2. A table access method.
    am_oid = w.oid("public.t_am")
    form("DROP TABLE of a table using an access method of its own", "DROP TABLE t_am;\n")
    w.check_quarantined("public.t_am", am_oid)
    form("DROP ACCESS METHOD after its table", "DROP ACCESS METHOD heap_y;\n")
    check_yielded("DROP ACCESS METHOD", "public.t_am", am_oid, "DROP ACCESS METHOD")

    # 3. A partition key's operator class: the partitioned table and its partition go together.
    opc_oid = w.oid("public.t_opc")
    part_oid = w.oid("public.t_opc_1")
    form("DROP TABLE of a table partitioned with an operator class of its own", "DROP TABLE t_opc;\n")
    w.check_quarantined("public.t_opc", opc_oid)
    form("DROP OPERATOR CLASS after the table its partition key used",
         "DROP OPERATOR CLASS y_int4_ops USING btree;\nDROP OPERATOR FAMILY y_int4_ops USING btree;\n")
    check_yielded("DROP OPERATOR CLASS", "public.t_opc", opc_oid, "DROP OPERATOR CLASS")
    w.check(w.in_quarantine(part_oid) is None, "its partition went with it")

    # 4. A DROP ROLE that fails direct too: the same error; nothing live is touched.
    d, v = as_role("stays", "CREATE TABLE s_gone (a int);\nCREATE TABLE s_live (a int);\nDROP TABLE s_gone;\n")
    w.same("psql the second owner drops one of its two tables", d, v)
    form("DROP ROLE of a role that still owns a live table", REVOKE + 'DROP ROLE :"role";\n', kind="stays")
    w.check(w.exists("public.s_live"), "the live table is still there")

    # 5. Bad input: what does not exist gets the server's own error or notice, held or not.
    form("DROP of objects that do not exist",
         "DROP ROLE no_such_role_y;\nDROP ROLE IF EXISTS no_such_role_y;\n"
         "DROP OPERATOR CLASS no_such_ops USING btree;\nDROP OPERATOR FAMILY IF EXISTS no_such_ops USING nosuch_am;\n"
         "DROP ACCESS METHOD no_such_am;\nDROP TABLESPACE no_such_ts;\nDROP EXTENSION no_such_ext;\n")

    # 6. Nothing quarantined in its way: only relayed.
    keep = w.oid("public.t_keep")
    n = w.quarantine_count()
    form("DROP ROLE with nothing in quarantine in its way", "CREATE ROLE nobody_y;\nDROP ROLE nobody_y;\n")
    w.check(w.quarantine_count() == n and w.oid("public.t_keep") == keep, "the quarantine is as it was")

    # 7. Through psycopg2: the owner drops its table, postgres drops the owner.
    seen = []
    for side, host, port, db in w.sides():
        role = roles["drv"][side]
        c = psycopg2.connect(host=host, port=port, dbname=db, user=role, application_name="wire_yield_hold")
        c.autocommit = True
        try:
            out = psycopg2_run(c, ["CREATE TABLE d_left (a int)", "DROP TABLE d_left"])
        finally:
            c.close()
        c = psycopg2.connect(host=host, port=port, dbname=db, user="postgres", application_name="wire_yield_hold")
        c.autocommit = True
        try:
            out += psycopg2_run(c, [x.replace(':"role"', '"%s"' % role) for x in REVOKE.splitlines()] +
                                ['DROP ROLE "%s"' % role])
        finally:
            c.close()
        seen.append(same_names(out, role))
    w.same("psycopg2 DROP ROLE of the owner of a quarantined table", seen[0], seen[1])

    for kind in KINDS:
        for name in roles[kind].values():
            for db in (w.direct_db, w.db):
                try:
                    w.exec('DROP OWNED BY "%s"' % name, db=db)
                except Exception:  # noqa: BLE001 (already dropped by the test)
                    pass
            w._admin_conn('DROP ROLE IF EXISTS "%s"' % name)


if __name__ == "__main__":
    wirelib.main(test, "wire_yield_hold")
