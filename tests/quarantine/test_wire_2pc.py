#!/usr/bin/python3
"""Two-phase commit of a quarantined DROP (issue 16), through psql and psycopg2's tpc_*: the client
sees what the server says (compared with direct), COMMIT PREPARED from another session leaves the
table in quarantine (dropped direct), ROLLBACK PREPARED brings it back. The ledger must then say
quarantined, with a held row in predrop.quarantine, as for a DROP committed in its own session.
"""
import psycopg2

import wirelib

SETUP = """
CREATE TABLE t_2pc (a int); CREATE TABLE t_2pc_rb (a int);
CREATE TABLE y_2pc (a int); CREATE TABLE y_2pc_rb (a int);
"""


def test(w):
    w.setup(SETUP)
    w.start()
    oid = {n: w.oid("public." + n) for n in ("t_2pc", "t_2pc_rb", "y_2pc", "y_2pc_rb")}

    for table, finish in (("t_2pc", "COMMIT"), ("t_2pc_rb", "ROLLBACK")):
        def gid(side):
            return [("gid", "%s_%s_%s" % (w.db, side, table))]
        d, v = w.psql_both("BEGIN;\nDROP TABLE %s;\nPREPARE TRANSACTION :'gid';\n" % table, variables=gid)
        w.same("psql 2PC: BEGIN; DROP TABLE; PREPARE TRANSACTION", d, v)
        d, v = w.psql_both("%s PREPARED :'gid';\nSELECT to_regclass('%s') IS NULL AS gone;\n" % (finish, table),
                           variables=gid)
        w.same("psql 2PC: %s PREPARED from another session" % finish, d, v)

    seen = []
    for side, host, port, db in w.sides():
        got = []
        for table, finish in (("y_2pc", "tpc_commit"), ("y_2pc_rb", "tpc_rollback")):
            c = psycopg2.connect(host=host, port=port, dbname=db, user="postgres", application_name="wire_2pc")
            xid = c.xid(1, "%s_%s_%s" % (w.db, side, table), "wire")
            c.tpc_begin(xid)
            cur = c.cursor()
            cur.execute("DROP TABLE %s" % table)
            got.append((cur.statusmessage, c.notices[:]))
            c.tpc_prepare()
            c.close()
            other = psycopg2.connect(host=host, port=port, dbname=db, user="postgres", application_name="wire_2pc")
            getattr(other, finish)(xid)
            cur = other.cursor()
            cur.execute("SELECT to_regclass('%s') IS NULL" % table)
            got.append((finish, cur.statusmessage, cur.fetchall(), other.notices[:]))
            other.close()
        seen.append(got)
    w.same("psycopg2 2PC: tpc_begin, DROP, tpc_prepare; tpc_commit / tpc_rollback from another connection",
           seen[0], seen[1])

    # The move committed with COMMIT PREPARED; predrop's outcome check must not settle the ledger at
    # PREPARE TRANSACTION, when the table is still in its schema for every other session.
    for n in ("t_2pc", "y_2pc"):
        w.check_quarantined("public." + n, oid[n], ledger=False)
        w.check_ledger("public", n, oid[n], label="2PC public.%s (settled at PREPARE TRANSACTION?)" % n)
    for n in ("t_2pc_rb", "y_2pc_rb"):
        w.check_kept("public." + n, oid[n], "ROLLBACK PREPARED")
    w.check(w.quarantine_count() == 2, "two tables in quarantine, no more", w.quarantine_count())


if __name__ == "__main__":
    wirelib.main(test, "wire_2pc")
