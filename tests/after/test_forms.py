#!/usr/bin/python3
"""Every form that leaves an after, through psql, each checked against truth.ddl (what committed):
SELECT INTO, CREATE TABLE (LIKE …), a partitioned table and a partition (PARTITION OF), CREATE
MATERIALIZED VIEW and REFRESH, ALTER TABLE … RENAME TO and SET SCHEMA. A RENAME TO's or SET
SCHEMA's after is the same relation under its new name, paired with the hold's before of the old
one; a recreate through LIKE carries the columns it copied."""
import afterlib


def test(h):
    h.exec("CREATE TABLE src (id int, nombre text, monto numeric);"
           "INSERT INTO src SELECT g, 'n' || g, g * 1.5 FROM generate_series(1, 100) g;"
           "CREATE TABLE ren (a int, b text); CREATE TABLE mov (a int, b text); CREATE SCHEMA archivo;"
           "ANALYZE;")
    h.reset_truth()
    h.start()
    ren_oid, mov_oid = h.oid("public.ren"), h.oid("public.mov")
    r = h.psql("SELECT id, nombre INTO copia FROM src WHERE id <= 10",
               "CREATE TABLE molde (LIKE src INCLUDING ALL, extra text)",
               "CREATE TABLE medidas (t date NOT NULL, v int) PARTITION BY RANGE (t)",
               "CREATE TABLE medidas_2026 PARTITION OF medidas FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
               "CREATE MATERIALIZED VIEW resumen AS SELECT count(*) AS n, sum(monto) AS total FROM src",
               "REFRESH MATERIALIZED VIEW resumen",
               "ALTER TABLE ren RENAME TO renombrada",
               "ALTER TABLE mov SET SCHEMA archivo")
    h.check(r.rc == 0, "psql: every form ran", r)
    h.check_afters_match_truth("every form")

    def after(name, reason, schema="public"):
        rows = h.wait_after("schema_name = %s AND table_name = %s AND reason = %s", (schema, name, reason))
        h.check(bool(rows), "%s.%s has its %s" % (schema, name, reason))
        return rows[-1] if rows else None

    copia = after("copia", "post_create")
    if copia:
        h.check([c["name"] for c in copia["columns_profile"]] == ["id", "nombre"], "SELECT INTO: its columns",
                copia["columns_profile"])
    molde = after("molde", "post_create")
    if molde:
        h.check([c["name"] for c in molde["columns_profile"]] == ["id", "nombre", "monto", "extra"],
                "LIKE: the columns it copied, then its own", [c["name"] for c in molde["columns_profile"]])
    after("medidas", "post_create")
    after("medidas_2026", "post_create")
    after("resumen", "post_create")
    after("resumen", "post_alter")   # the REFRESH
    for name, schema, oid in (("renombrada", "public", ren_oid), ("mov", "archivo", mov_oid)):
        a = after(name, "post_alter", schema)
        if a:
            before = h.check_pair("%s.%s" % (schema, name), "pre_drop", a, oid=oid)
            if before:
                h.check((before["schema_name"], before["table_name"]) != (schema, name),
                        "%s.%s: the before is under the old name" % (schema, name),
                        (before["schema_name"], before["table_name"]))


if __name__ == "__main__":
    afterlib.main(test, "after_forms")
