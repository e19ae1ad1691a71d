#!/usr/bin/python3
"""pgjdbc through a quarantine rule sees what the server says to the DROP itself (issue 16): a
PreparedStatement DROP (prepareThreshold=1: a named server statement) executed three times on three
tables and once more on none, a prepared CASCADE with its warning, IF EXISTS, 2BP01, 42809, a batch
(one pipeline) of DROPs, a batch whose second DROP fails (the first rolls back with it), a batch of
DROP TABLE t then DROP TABLE IF EXISTS t (the first's move stands, the second drops nothing) and a
rolled-back transaction (tests/quarantine/WireJdbc.java prints what the client saw, every field of
every warning and error; direct and via must match line for line).
"""
import os
import shutil
import subprocess

import wirelib

JAR = "/usr/share/java/postgresql.jar"
SETUP = r"""
CREATE TABLE jd_casc (a int); CREATE VIEW jd_casc_v AS SELECT a FROM jd_casc;
CREATE TABLE jd_dep (a int); CREATE VIEW jd_dep_v AS SELECT a FROM jd_dep;
CREATE TABLE jb1 (a int); CREATE TABLE jb2 (a int); CREATE TABLE jb3 (a int); CREATE TABLE jb4 (a int);
CREATE TABLE jb5 (a int);
CREATE TABLE jd_rb (a int);
"""


def test(w):
    if not shutil.which("java") or not os.path.exists(JAR):
        return w.fail("java or %s missing (scripts/install-deps.sh installs them)" % JAR)
    w.setup(SETUP)
    w.start()
    names = ["jd_casc", "jd_dep", "jb1", "jb2", "jb3", "jb4", "jb5", "jd_rb"]
    oid = {n: w.oid("public." + n) for n in names}
    seen = []
    for side, host, port, db in w.sides():
        r = subprocess.run(["java", "-cp", JAR, os.path.join(wirelib.HERE, "WireJdbc.java"), host, str(port), db],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if not w.check(r.returncode == 0, "java (%s) ran every step" % side, r.stdout[-2000:]):
            return
        seen.append(r.stdout)
    w.same("pgjdbc: every step", seen[0], seen[1])
    for n in ("jd_casc", "jb1", "jb2", "jb3"):
        w.check_quarantined("public." + n, oid[n])
    w.check_quarantined("public.jb5", oid["jb5"], ledger=False)
    w.check_first_stood(oid["jb5"], "batch jb5")
    for n, why in (("jd_dep", "2BP01"), ("jb4", "failed batch"), ("jd_rb", "rollback")):
        w.check_kept("public." + n, oid[n], why)
    jd = w.q("SELECT c.oid::bigint FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
             "AND obj_description(c.oid, 'pg_class')::jsonb ->> 'table' = 'jd'", (wirelib.QSCHEMA,))
    w.check(len(jd) == 3, "prepared DROP: three versions of jd in quarantine", jd)
    for (o,) in jd:
        w.check_quarantined("public.jd", o)
    w.check(len(w.dq("SELECT 1 FROM truth.drops WHERE object_name = 'jd'")) == 3, "direct: jd really dropped three times")
    w.check(not w.q("SELECT 1 FROM truth.drops WHERE object_type = 'table'"),
            "through predrop, truth.drops has no table really dropped",
            w.q("SELECT schema_name, object_name FROM truth.drops"))


if __name__ == "__main__":
    wirelib.main(test, "wire_jdbc")
