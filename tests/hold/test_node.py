#!/usr/bin/python3
"""node-postgres (pg) through predrop: simple and extended protocol, a named prepared DROP, a rolled-back
DROP and a pool dropping concurrently (tests/hold/node_hold.cjs, pg from tests/clients/node)."""
import os
import shutil
import subprocess

import holdlib


def test(h):
    node_modules = os.path.join(holdlib.SOURCE, "tests", "clients", "node", "node_modules")
    if not shutil.which("node"):
        h.fail("node is not installed (scripts/install-deps.sh installs it)")
        return
    if not os.path.isdir(os.path.join(node_modules, "pg")):
        h.fail("%s/pg missing: run through ctest (fixture support.node_modules) or tests/support/node-modules.sh %s"
               % (node_modules, os.path.dirname(node_modules)))
        return
    tables = ["nd_simple", "nd_ext", "nd_named", "nd_rb"] + ["nd_pool_%d" % i for i in range(8)]
    h.exec("".join("CREATE TABLE %s (id int, t text, n numeric);" % t for t in tables) + "ANALYZE;")
    oids = {t: h.oid("public." + t) for t in tables}
    h.start_predrop("--hold-timeout-ms", "10000")
    env = dict(os.environ, NODE_PATH=node_modules)
    r = subprocess.run(["node", os.path.join(holdlib.HERE, "node_hold.cjs"), str(h.p.port), h.db], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    print("\n".join("#   " + l for l in r.stdout.splitlines()))
    h.check(r.returncode == 0, "node pg script ran every step")
    for t in tables:
        if t == "nd_rb":
            h.check(h.exists("public.nd_rb"), "nd_rb survived its ROLLBACK")
            h.check_event("public", t, "written", "not_dropped", oid=oids[t])
        else:
            h.check_event("public", t, "written", "dropped", oid=oids[t])
    snaps = h.snapshots("table_oid = %s", (oids["nd_ext"],))
    if snaps:
        h.check(snaps[0]["application_name"] == "hold-node", "snapshot records application_name hold-node",
                snaps[0]["application_name"])
    h.check_captured_before_drop(h.truth(), "node: ")
    h.check(len(h.truth()) == 11, "truth: 11 tables dropped", len(h.truth()))


if __name__ == "__main__":
    holdlib.main(test, "node")
