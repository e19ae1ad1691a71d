#!/usr/bin/python3
"""Every evidence command against a store the proxy filled: a table dropped through predrop, recreated
with a column renamed, one removed and one added, dropped again; then history, diff in its three forms
(SCHEMA.TABLE, two ids, --resource), the text diff's colours on a terminal (and none with NO_COLOR),
ddl executed and compared with the snapshot, baseline's progress bar on a terminal, and report in
text and json. Uses tests/hold/holdlib.py."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
import holdlib  # noqa: E402

PROVINCES = "(ARRAY['Salta','Jujuy','Chaco','Misiones','Formosa','Tucumán'])"


def cli(h, *args, tty=False, env=None):
    argv = [h.bin, *args, "--store", h.store_conninfo()]
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(env or {})
    if tty:  # util-linux script(1) gives the command a pseudo-terminal as stdout
        argv = ["script", "-qec", " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv), "/dev/null"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=e)
    return r


def as_json(h, label, *args):
    r = cli(h, *args, "--format", "json")
    if r.returncode != 0:
        h.fail("%s: exit %d: %s" % (label, r.returncode, r.stderr))
        return {}
    return json.loads(r.stdout)


def test(h):
    h.exec("CREATE TABLE ventas (provincia text, monto numeric(12,2), anio int);"
           "INSERT INTO ventas SELECT " + PROVINCES + "[1 + g % 6], g * 1.5, 2015 + g % 8 FROM generate_series(1, 600) g;"
           "ANALYZE ventas")
    h.start_predrop("--hold-timeout-ms", "10000")
    o1 = h.oid("public.ventas")
    r = h.psql("DROP TABLE ventas")
    h.check(r.rc == 0, "first DROP TABLE through predrop", r)
    h.check_event("public", "ventas", "written", "dropped", oid=o1, label="first drop")
    h.exec("CREATE TABLE ventas (jurisdiccion text, monto numeric(12,2), categoria text);"
           "INSERT INTO ventas SELECT " + PROVINCES + "[1 + g % 6], g * 1.5, 'c' || g % 9 FROM generate_series(1, 600) g;"
           "ANALYZE ventas")
    o2 = h.oid("public.ventas")
    r = h.psql("DROP TABLE ventas")
    h.check(r.rc == 0, "second DROP TABLE through predrop", r)
    h.check_event("public", "ventas", "written", "dropped", oid=o2, label="second drop")

    hist = as_json(h, "history", "history", "public.ventas")
    snaps = hist.get("snapshots", [])
    h.check(len(snaps) == 2, "history: two snapshots, in time order", snaps)
    if len(snaps) != 2:
        return
    h.check(snaps[1]["changed"] and snaps[1]["changed"]["added"] == ["categoria", "jurisdiccion"]
            and snaps[1]["changed"]["removed"] == ["anio", "provincia"], "history: what changed at the hash change",
            snaps[1].get("changed"))
    id1, id2 = snaps[0]["id"], snaps[1]["id"]

    d = as_json(h, "diff SCHEMA.TABLE", "diff", "public.ventas")
    ren = d.get("diff", {}).get("renamed_candidates", [])
    h.check([(x["from"], x["to"]) for x in ren] == [("provincia", "jurisdiccion")], "diff SCHEMA.TABLE: the rename", ren)
    h.check("verdict" in d and d["verdict"].get("verdict"), "diff SCHEMA.TABLE: carries a verdict", d.get("verdict"))
    by_ids = as_json(h, "diff A B", "diff", id1, id2)
    h.check(by_ids.get("diff") == d.get("diff"), "diff A B: the same diff as SCHEMA.TABLE")
    c = h.connect(h.store_db)
    with c.cursor() as cur:
        cur.execute("UPDATE predrop.schema_snapshots SET resource_identity = 'res:ventas' WHERE table_name = 'ventas'")
    c.close()
    by_res = as_json(h, "diff --resource", "diff", "--resource", "res:ventas")
    h.check(by_res.get("diff") == d.get("diff"), "diff --resource: the same diff", by_res.get("diff"))
    bad = cli(h, "diff", "no_such.table")
    h.check(bad.returncode != 0 and "fewer than two snapshots" in bad.stderr, "diff of an unknown table: a clear error",
            (bad.returncode, bad.stderr))

    term = cli(h, "diff", "public.ventas", tty=True)
    out = term.stdout
    h.check("\033[32m+ categoria" in out and "\033[31m- anio" in out and "provincia \u2192 jurisdiccion (1.00)" in out,
            "diff on a terminal: added green, removed red, rename as old \u2192 new (similarity)", out)
    plain = cli(h, "diff", "public.ventas", tty=True, env={"NO_COLOR": "1"})
    h.check("\033[" not in plain.stdout and "+ categoria" in plain.stdout, "diff on a terminal with NO_COLOR: no colour",
            plain.stdout)

    ddl = cli(h, "ddl", id1, "--name", "public.ventas_restored")
    h.check(ddl.returncode == 0 and "CREATE TABLE public.ventas_restored" in ddl.stdout, "ddl: CREATE TABLE", ddl)
    h.exec(ddl.stdout)
    shape = h.q("SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod), ',' ORDER BY attnum) "
                "FROM pg_attribute WHERE attrelid = 'public.ventas_restored'::regclass AND attnum > 0")[0][0]
    h.check(shape == "provincia:text,monto:numeric(12,2),anio:integer", "ddl: executed, the captured shape", shape)

    bl = cli(h, "baseline", "--target", h.conninfo(), "--schema", "public", tty=True)
    h.check(bl.returncode == 0 and "] 1/1" in bl.stdout and "1 captured" in bl.stdout and "tables/s" in bl.stdout,
            "baseline on a terminal: progress bar and summary", bl.stdout)

    rep = as_json(h, "report", "report", "--days", "30")
    h.check(rep.get("pairs_found", 0) >= 1 and rep.get("coverage", {}).get("tables", 0) >= 1,
            "report json: the pair found", {k: rep.get(k) for k in ("pairs_found", "coverage", "by_verdict")})
    text = cli(h, "report", "--days", "30")
    h.check(text.returncode == 0 and "pairs by kind" in text.stdout and "verdicts:" in text.stdout, "report text",
            text.stdout)


if __name__ == "__main__":
    holdlib.main(test, "evidence_proxy_store")
