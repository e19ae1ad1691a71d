#!/usr/bin/python3
"""node-postgres through a quarantine rule sees what the server says to the DROP itself (issue 16):
the simple and extended protocol, a named prepared DROP executed several times (a new table each
time), the server's refusals, DROP TABLE a, b and DROP SCHEMA CASCADE over the extended protocol, a
multi-statement query and a rolled-back transaction (tests/quarantine/wire_node.cjs prints what the
client saw: node's command, the first word of the tag, rowCount, rows, notices and error fields;
direct and via must match step by step).
"""
import json
import os
import shutil
import subprocess

import wirelib

SETUP = r"""
CREATE TABLE nd_simple (a int); CREATE TABLE nd_ext (a int);
CREATE TABLE nd_dep (a int); CREATE VIEW nd_dep_v AS SELECT a FROM nd_dep;
CREATE TABLE nd_casc (a int); CREATE VIEW nd_casc_v AS SELECT a FROM nd_casc;
CREATE TABLE nd_multi (a int); CREATE TABLE nd_rb (a int); CREATE TABLE nd_a (a int); CREATE TABLE nd_b (a int);
CREATE SCHEMA nd_s; CREATE TABLE nd_s.one (a int); CREATE TABLE nd_s.two (a int); CREATE VIEW nd_s.v AS SELECT a FROM nd_s.one;
"""


def test(w):
    node_modules = os.path.join(wirelib.holdlib.SOURCE, "tests", "clients", "node", "node_modules")
    if not shutil.which("node"):
        return w.fail("node is not installed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(node_modules, "pg")):
        return w.fail("%s/pg missing: run through ctest (fixture support.node_modules)" % node_modules)
    w.setup(SETUP)
    w.start()
    names = ["nd_simple", "nd_ext", "nd_dep", "nd_casc", "nd_multi", "nd_rb", "nd_a", "nd_b"]
    oid = {n: w.oid("public." + n) for n in names}
    oid.update({"nd_s." + n: w.oid("nd_s." + n) for n in ("one", "two")})
    # The named DROP's tables are made by the script: their OIDs come from the ledger.
    seen = []
    for side, host, port, db in w.sides():
        r = subprocess.run(["node", os.path.join(wirelib.HERE, "wire_node.cjs"), host, str(port), db],
                           env=dict(os.environ, NODE_PATH=node_modules), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if not w.check(r.returncode == 0, "node (%s) ran every step" % side, r.stdout[-2000:]):
            return
        seen.append(json.loads(r.stdout))
    for d, v in zip(seen[0], seen[1]):
        w.same("node-postgres " + d["label"], d, v)
    w.check(len(seen[0]) == len(seen[1]), "node-postgres: as many steps direct as via")
    for n in ("nd_simple", "nd_ext", "nd_casc", "nd_multi", "nd_a", "nd_b"):
        w.check_quarantined("public." + n, oid[n])
    for n in ("one", "two"):
        w.check_quarantined("nd_s." + n, oid["nd_s." + n])
    w.check(w.q("SELECT count(*) FROM pg_namespace WHERE nspname = 'nd_s'")[0][0] == 0, "DROP SCHEMA: nd_s is gone")
    w.check_kept("public.nd_dep", oid["nd_dep"], "2BP01")
    w.check_kept("public.nd_rb", oid["nd_rb"], "ROLLBACK")
    named = w.q("SELECT c.oid::bigint FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
                "AND obj_description(c.oid, 'pg_class')::jsonb ->> 'table' = 'nd_named'", (wirelib.QSCHEMA,))
    w.check(len(named) == 3, "named prepared DROP: three versions of nd_named in quarantine", named)
    for (o,) in named:
        w.check_quarantined("public.nd_named", o)
    w.check(len(w.dq("SELECT 1 FROM truth.drops WHERE object_name = 'nd_named'")) == 3,
            "direct: nd_named really dropped three times")
    w.check(not w.q("SELECT 1 FROM truth.drops WHERE object_type = 'table'"),
            "through predrop, truth.drops has no table really dropped",
            w.q("SELECT schema_name, object_name FROM truth.drops"))


if __name__ == "__main__":
    wirelib.main(test, "wire_node")
