#!/usr/bin/python3
"""The quarantine's move runs in the client's session as the client's role (issue 16): a table owner
that is no superuser drops its own table through psql, and the table must be quarantined as a
superuser's is, with the same reply as direct.

Two such owners: one with CREATE on the table's schema, and one with only USAGE there (PostgreSQL
15's default on public for every role but its owner, and the case of a table whose owner was given it
by a migration role). DROP TABLE needs no privilege on the schema, only ownership; if the move needs
more (ALTER TABLE ... RENAME requires CREATE on the table's current schema), the second owner's DROP
falls back to a real drop after its snapshot, and the check below that says "DEFECT?" fails.
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
    if not w.in_quarantine(oid["app.usage_only"]):
        w.fail("DEFECT? app.usage_only: its owner (USAGE, no CREATE on schema app) dropped it through a quarantine "
               "rule and it was really dropped, not quarantined; predrop's log: %s"
               % [l for l in w.log_text().splitlines() if "could not keep" in l])
    w.check_quarantined("app.usage_only", oid["app.usage_only"])


if __name__ == "__main__":
    wirelib.main(test, "wire_privilege")
