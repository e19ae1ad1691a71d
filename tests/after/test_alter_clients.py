#!/usr/bin/python3
"""ALTER TABLE through psql, psycopg2 and pgjdbc: RENAME COLUMN, ALTER COLUMN TYPE, ADD COLUMN and
DROP COLUMN each leave a pair, the before (pre_drop, the hold's) and the post_alter of the same
OID, whose diff is exactly the change; the rename is read from the attnum."""
import os
import shutil
import subprocess

import afterlib

JAR = "/usr/share/java/postgresql.jar"

# kind -> (statement on TABLE, what the diff must say)
CHANGES = {
    "ren": ("ALTER TABLE {t} RENAME COLUMN nombre TO name",
            {"renamed": [("nombre", "name", "attnum")], "added": [], "removed": [], "type_changed": []}),
    "typ": ("ALTER TABLE {t} ALTER COLUMN codigo TYPE bigint",
            {"renamed": [], "added": [], "removed": [], "type_changed": [("codigo", "integer", "bigint")]}),
    "add": ("ALTER TABLE {t} ADD COLUMN extra text",
            {"renamed": [], "added": ["extra"], "removed": [], "type_changed": []}),
    "drp": ("ALTER TABLE {t} DROP COLUMN codigo",
            {"renamed": [], "added": [], "removed": ["codigo"], "type_changed": []}),
}
CLIENTS = ("psql", "psycopg2", "jdbc")


def run_client(h, client, statements):
    if client == "psql":
        r = h.psql(*statements)
        return h.check(r.rc == 0, "psql: %d ALTERs" % len(statements), r)
    if client == "psycopg2":
        c = h.pconnect(autocommit=False)
        try:
            for s in statements:   # each in its own transaction, committed
                with c.cursor() as cur:
                    cur.execute(s)
                c.commit()
        finally:
            c.close()
        return h.ok("psycopg2: %d ALTERs committed" % len(statements))
    if not shutil.which("java") or not os.path.exists(JAR):
        return h.fail("java or %s missing (scripts/install-deps.sh installs them)" % JAR)
    r = subprocess.run(["java", "-cp", JAR, os.path.join(afterlib.HERE, "JdbcStatements.java"), "127.0.0.1",
                        str(h.p.port), h.db, *statements], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    return h.check(r.returncode == 0, "pgjdbc: %d ALTERs" % len(statements), r.stdout[-600:])


def test(h):
    tables = {}
    setup = []
    for cl in CLIENTS:
        for kind in CHANGES:
            t = "%s_%s" % (cl, kind)
            tables[(cl, kind)] = t
            setup.append("CREATE TABLE %s (id int, nombre text, codigo int);"
                         "INSERT INTO %s SELECT g, 'n' || (g %% 30), g * 7 FROM generate_series(1, 200) g;" % (t, t))
    h.exec("".join(setup) + "ANALYZE;")
    h.reset_truth()
    oids = {k: h.oid("public." + t) for k, t in tables.items()}
    h.start()
    for cl in CLIENTS:
        run_client(h, cl, [CHANGES[kind][0].format(t=tables[(cl, kind)]) for kind in CHANGES])
    patience = 15.0
    for (cl, kind), t in tables.items():
        label = "%s %s" % (cl, CHANGES[kind][0].format(t=t))
        oid = oids[(cl, kind)]
        after = h.wait_after("table_oid = %s AND reason = 'post_alter'", (oid,), timeout=patience)
        patience = 15.0 if after else 2.0   # one after missing: the others are not waited for as long
        h.check(len(after) == 1, "%s: one post_alter" % label, [(s["reason"], s["pair_of"]) for s in after])
        before = h.check_pair(label, "pre_drop", after[0] if after else None, oid=oid)
        if not before:
            continue
        d = h.diff("public." + t)
        if not d:
            continue
        dd = d.get("diff", {})
        h.check(d.get("paired") is True and d["before"]["id"] == before["id"],
                "%s: diff public.%s reads that pair" % (label, t), (d.get("paired"), d.get("before"), d.get("after")))
        if kind == "ren":
            h.check([r.get("similarity") for r in dd.get("renamed_candidates", [])] == [1.0],
                    "%s: the rename's similarity is 1.00" % label, dd.get("renamed_candidates"))
        got = h.net_change(dd)
        h.check(got == CHANGES[kind][1], "%s: the diff is exactly the change" % label,
                "want %s, got %s" % (CHANGES[kind][1], got))
    h.check_afters_match_truth("ALTERs of three clients")


if __name__ == "__main__":
    afterlib.main(test, "after_alter_clients")
