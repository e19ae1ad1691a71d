#!/usr/bin/python3
"""The quarantine's move runs in the client's session as the client's role (issue 16): a table owner
that is no superuser drops its own table through psql, and the table must be quarantined as a
superuser's is, with the same reply as direct.

Two such owners: one with CREATE on the table's schema, and one with only USAGE there (a table a
superuser gave away, or whose schema's CREATE was revoked later). DROP TABLE needs no privilege on the
schema, only ownership; the move renames the table and its indexes before they leave their schema,
and a rename needs CREATE there (the quarantine schema grants no USAGE, so nothing can be renamed
once inside). The second owner's DROP therefore falls back to a real drop after its snapshot, as the
README's least privileges say: same reply as direct, a ledger row not_quarantined that says why.
"""
import wirelib

SETUP = r"""
CREATE SCHEMA app; GRANT USAGE ON SCHEMA app TO OTHER;
GRANT USAGE ON SCHEMA truth TO OTHER; GRANT INSERT ON truth.drops TO OTHER;
CREATE TABLE public.with_create (a int, b text); CREATE INDEX ON public.with_create (b);
ALTER TABLE public.with_create OWNER TO OTHER; GRANT CREATE ON SCHEMA public TO OTHER;
CREATE TABLE app.usage_only (a int, b text); CREATE INDEX ON app.usage_only (b);
ALTER TABLE app.usage_only OWNER TO OTHER;
"""


def test(w):
    w.setup(SETUP)
    w.start()
    oid = {q: w.oid(q) for q in ("public.with_create", "app.usage_only")}
    for q in oid:
        d, v = w.psql_both("DROP TABLE %s;\nDROP TABLE %s;\n" % (q, q), user=w.other)
        w.same("psql as an ordinary owner: DROP TABLE %s" % q, d, v)
    w.check_quarantined("public.with_create", oid["public.with_create"])
    w.check_really_dropped("app", "usage_only", oid["app.usage_only"], "an owner without CREATE on its schema")

    def fallback_rows():
        return [e for e in w.events("outcome = 'not_quarantined'")
                if "permission denied for schema app" in (e.get("error") or "")]
    w.check(w.wait_for(fallback_rows, timeout=15),
            "app.usage_only: the ledger has a not_quarantined row saying the move lacked CREATE on schema app",
            [(e["outcome"], e.get("error")) for e in w.events("outcome = 'not_quarantined'")])
    w.check(any("could not keep" in line and "permission denied for schema app" in line
                for line in w.log_text().splitlines()),
            "app.usage_only: predrop's log says why the table was dropped for real")

if __name__ == "__main__":
    wirelib.main(test, "wire_privilege")
