#!/usr/bin/python3
"""Every destructive statement form through psql: held, snapshotted before it ran, in the ledger.

Multi-statement strings, quoted and Unicode names, schema-qualified names, search_path set earlier
in the session and in the startup packet (options=-c search_path=...), "$user" after SET ROLE, SET
SESSION AUTHORIZATION and a startup role, DROP SCHEMA ... CASCADE,
DROP OWNED BY, ALTER TABLE (DROP COLUMN / ALTER COLUMN TYPE / RENAME COLUMN / RENAME TO), TRUNCATE,
DROP MATERIALIZED VIEW / VIEW / FOREIGN TABLE; ROLLBACK -> not_dropped, COMMIT -> dropped; a
table created in the client's still-open transaction -> table_missing and the drop goes on.
"""
import holdlib

SETUP = r"""
CREATE SCHEMA s1; CREATE SCHEMA s2; CREATE SCHEMA s3; CREATE SCHEMA s4; CREATE SCHEMA s5;
CREATE TABLE public.multi_a (id int, v text);
CREATE TABLE public.multi_b (id int);
CREATE TABLE public."Mixed Case" (id int, "Weird Col" text);
CREATE TABLE public."ünïcødé☃" (ä int, ß text);
CREATE TABLE s1."we""ird.name" (x int);
CREATE TABLE s1.qual (a int, b int, c int);
-- same name in two schemas: resolution must follow search_path, not guess
CREATE TABLE public.sp_t (pub int);
CREATE TABLE s2.sp_t (s2col int, s2col2 int);
CREATE TABLE public.opt_t (pub int);
CREATE TABLE s3.opt_t (s3col int, s3col2 int, s3col3 int);
CREATE TABLE s4.c1 (a int); CREATE TABLE s4.c2 (b int); CREATE TABLE s4.c3 (c int);
CREATE ROLE hold_forms_owner_ROLETAG;
CREATE TABLE s5.owned1 (a int); CREATE TABLE s5.owned2 (b int, c int);
ALTER TABLE s5.owned1 OWNER TO hold_forms_owner_ROLETAG;
ALTER TABLE s5.owned2 OWNER TO hold_forms_owner_ROLETAG;
CREATE TABLE public.alt_dropcol (a int, b text, gone int);
CREATE TABLE public.alt_type (a int, b int);
CREATE TABLE public.alt_rencol (a int, old_name int);
CREATE TABLE public.alt_rento (a int);
CREATE TABLE public.trunc_me (a int); INSERT INTO public.trunc_me SELECT generate_series(1, 100);
CREATE TABLE public.mv_base (a int, b text); INSERT INTO public.mv_base VALUES (1, 'x');
CREATE MATERIALIZED VIEW public.mv AS SELECT a, b FROM public.mv_base;
CREATE VIEW public.v AS SELECT a FROM public.mv_base;
CREATE FOREIGN DATA WRAPPER hold_dummy_fdw_ROLETAG;
CREATE SERVER hold_dummy_srv_ROLETAG FOREIGN DATA WRAPPER hold_dummy_fdw_ROLETAG;
CREATE FOREIGN TABLE public.ft (a int, b text) SERVER hold_dummy_srv_ROLETAG;
-- "$user" names the role SET ROLE, SET SESSION AUTHORIZATION or a startup role made current
CREATE ROLE hold_forms_as_ROLETAG;
CREATE SCHEMA hold_forms_as_ROLETAG AUTHORIZATION hold_forms_as_ROLETAG;
CREATE TABLE hold_forms_as_ROLETAG.as_t1 (r1 int, r2 int); CREATE TABLE public.as_t1 (pub int);
CREATE TABLE hold_forms_as_ROLETAG.as_t2 (r1 int, r2 int); CREATE TABLE public.as_t2 (pub int);
CREATE TABLE hold_forms_as_ROLETAG.as_t3 (r1 int, r2 int); CREATE TABLE public.as_t3 (pub int);
CREATE TABLE hold_forms_as_ROLETAG.as_t4 (r1 int, r2 int); CREATE TABLE public.as_t4 (pub int);
CREATE TABLE hold_forms_as_ROLETAG.as_t5 (r1 int, r2 int); CREATE TABLE public.as_t5 (pub int);
CREATE TABLE hold_forms_as_ROLETAG.as_t6 (r1 int, r2 int); CREATE TABLE public.as_t6 (pub int);
ALTER TABLE hold_forms_as_ROLETAG.as_t1 OWNER TO hold_forms_as_ROLETAG;
ALTER TABLE hold_forms_as_ROLETAG.as_t3 OWNER TO hold_forms_as_ROLETAG;
ALTER TABLE hold_forms_as_ROLETAG.as_t4 OWNER TO hold_forms_as_ROLETAG;
ALTER TABLE hold_forms_as_ROLETAG.as_t6 OWNER TO hold_forms_as_ROLETAG;
-- the ground truth's event trigger runs as the role that drops
GRANT USAGE ON SCHEMA truth TO hold_forms_as_ROLETAG; GRANT INSERT ON truth.drops TO hold_forms_as_ROLETAG;
CREATE TABLE public.rb_t (a int);
CREATE TABLE public.commit_t (a int);
CREATE TABLE public.ext_keep (a int);
CREATE TABLE public.impl_t (a int); CREATE TABLE public.sp_rb (a int);
ANALYZE;
"""


def test(h):
    tag = h.db[-11:].replace("_", "")
    role = "hold_forms_owner_" + tag
    h.exec(SETUP.replace("ROLETAG", tag))
    h.start_predrop("--hold-timeout-ms", "10000")
    expect = []  # (schema, table, oid, outcome, drop_outcome)

    def o(q):
        return h.oid(q)

    # 1. multi-statement string with an explicit transaction
    oa, ob = o("public.multi_a"), o("public.multi_b")
    r = h.psql("BEGIN; DROP TABLE multi_a; DROP TABLE public.multi_b; COMMIT;")
    h.check(r.rc == 0, "psql: BEGIN; DROP TABLE a; DROP TABLE b; COMMIT; succeeded", r)
    h.check(not h.exists("public.multi_a") and not h.exists("public.multi_b"), "both tables dropped")
    expect += [("public", "multi_a", oa, "written", "dropped"), ("public", "multi_b", ob, "written", "dropped")]

    # 2. quoted, mixed-case and Unicode names
    om, ou = o('public."Mixed Case"'), o('public."ünïcødé☃"')
    ow = o('s1."we""ird.name"')
    r = h.psql('DROP TABLE "Mixed Case"; DROP TABLE "ünïcødé☃"')
    h.check(r.rc == 0, "psql: DROP TABLE of quoted Mixed Case and Unicode names", r)
    r = h.psql('DROP TABLE s1."we""ird.name"')
    h.check(r.rc == 0, "psql: DROP TABLE of a name with an embedded quote and dot", r)
    expect += [("public", "Mixed Case", om, "written", "dropped"), ("public", "ünïcødé☃", ou, "written", "dropped"),
               ("s1", 'we"ird.name', ow, "written", "dropped")]
    snaps = h.snapshots("table_oid = %s", (om,))
    if snaps:
        h.check(h.snapshot_columns(snaps[0]) == ["id", "Weird Col"], "snapshot of \"Mixed Case\" has its columns",
                h.snapshot_columns(snaps[0]))

    # 3. schema-qualified
    oq = o("s1.qual")
    r = h.psql("DROP TABLE s1.qual")
    h.check(r.rc == 0, "psql: DROP TABLE s1.qual", r)
    expect.append(("s1", "qual", oq, "written", "dropped"))

    # 4. search_path set by an earlier statement of the session: s2.sp_t, not public.sp_t
    os2, opub = o("s2.sp_t"), o("public.sp_t")
    r = h.psql("SET search_path = s2, public", "DROP TABLE sp_t")
    h.check(r.rc == 0, "psql: SET search_path = s2, public; then (next Query) DROP TABLE sp_t", r)
    h.check(not h.exists("s2.sp_t") and h.exists("public.sp_t"), "the server dropped s2.sp_t and kept public.sp_t")
    expect.append(("s2", "sp_t", os2, "written", "dropped"))
    wrong = h.snapshots("table_oid = %s", (opub,))
    h.check(not wrong, "no snapshot of public.sp_t (the table the server did not drop)",
            [(s["schema_name"], s["table_name"]) for s in wrong])

    # 5. search_path from the startup packet: options=-c search_path=s3
    os3, opub3 = o("s3.opt_t"), o("public.opt_t")
    r = h.psql("DROP TABLE opt_t", conninfo=h.proxy_conninfo(options="'-c search_path=s3'"))
    h.check(r.rc == 0, "psql options='-c search_path=s3': DROP TABLE opt_t", r)
    h.check(not h.exists("s3.opt_t") and h.exists("public.opt_t"), "the server dropped s3.opt_t and kept public.opt_t")
    expect.append(("s3", "opt_t", os3, "written", "dropped"))
    wrong = h.snapshots("table_oid = %s", (opub3,))
    h.check(not wrong, "no snapshot of public.opt_t", [(s["schema_name"], s["table_name"]) for s in wrong])

    # 5b. "$user" after SET ROLE, SET LOCAL ROLE, SET SESSION AUTHORIZATION and a startup role: the
    # table the server drops is the current role's, not the login user's (here public's)
    as_role = "hold_forms_as_" + tag

    def dropped_as(label, table, in_role_schema, *commands, conninfo=None, stdin=None, extra=()):
        mine, pub = o("%s.%s" % (as_role, table)), o("public." + table)
        r = h.psql(*commands, conninfo=conninfo, stdin=stdin, extra=extra)
        h.check(r.rc == 0, "psql: " + label, r)
        gone, kept = ((as_role, mine), ("public", pub)) if in_role_schema else (("public", pub), (as_role, mine))
        h.check(not h.exists("%s.%s" % (gone[0], table)) and h.exists("%s.%s" % (kept[0], table)),
                "%s: the server dropped %s.%s and kept %s.%s" % (label, gone[0], table, kept[0], table))
        expect.append((gone[0], table, gone[1], "written", "dropped"))
        wrong = h.snapshots("table_oid = %s", (kept[1],))
        h.check(not wrong, "%s: no snapshot of %s.%s (the table the server did not drop)" % (label, kept[0], table),
                [(x["schema_name"], x["table_name"]) for x in wrong])

    dropped_as("SET ROLE, then (next Query) DROP TABLE as_t1", "as_t1", True,
               "SET ROLE " + as_role, "DROP TABLE as_t1")
    dropped_as("SET LOCAL ROLE in a committed transaction, then DROP TABLE as_t2", "as_t2", False,
               "BEGIN; SET LOCAL ROLE %s; COMMIT;" % as_role, "DROP TABLE as_t2")
    dropped_as("SET SESSION AUTHORIZATION, then DROP TABLE as_t3", "as_t3", True,
               "SET SESSION AUTHORIZATION " + as_role, "DROP TABLE as_t3")
    dropped_as("options='-c role=...': DROP TABLE as_t4", "as_t4", True, "DROP TABLE as_t4",
               conninfo=h.proxy_conninfo(options="'-c role=%s'" % as_role))
    dropped_as("SET ROLE then RESET ROLE in one Query, then DROP TABLE as_t5", "as_t5", False,
               "SET ROLE %s; RESET ROLE" % as_role, "DROP TABLE as_t5")
    # the server rejects SET ROLE to a role that does not exist: "$user" stays the role set before it
    dropped_as("SET ROLE (granted), SET ROLE to no such role (an error), then DROP TABLE as_t6", "as_t6", True,
               stdin="SET ROLE %s;\nSET ROLE hold_forms_no_such_role_%s;\nDROP TABLE as_t6;\n" % (as_role, tag),
               extra=("-v", "ON_ERROR_STOP=0"))

    # 6. DROP SCHEMA ... CASCADE: every table in it 
    oc = {n: o("s4." + n) for n in ("c1", "c2", "c3")}
    r = h.psql("DROP SCHEMA s4 CASCADE")
    h.check(r.rc == 0, "psql: DROP SCHEMA s4 CASCADE", r)
    expect += [("s4", n, oc[n], "written", "dropped") for n in oc]

    # 7. DROP OWNED BY
    oo1, oo2 = o("s5.owned1"), o("s5.owned2")
    r = h.psql("DROP OWNED BY %s" % role)
    h.check(r.rc == 0, "psql: DROP OWNED BY role", r)
    h.check(not h.exists("s5.owned1") and not h.exists("s5.owned2"), "owned tables dropped")
    expect += [("s5", "owned1", oo1, "written", "dropped"), ("s5", "owned2", oo2, "written", "dropped")]

    # 8. ALTER TABLE forms: the snapshot has the shape from before the statement
    alters = [("alt_dropcol", "ALTER TABLE alt_dropcol DROP COLUMN gone", ["a", "b", "gone"]),
              ("alt_type", "ALTER TABLE public.alt_type ALTER COLUMN b TYPE text", ["a", "b"]),
              ("alt_rencol", "ALTER TABLE alt_rencol RENAME COLUMN old_name TO new_name", ["a", "old_name"]),
              ("alt_rento", "ALTER TABLE alt_rento RENAME TO alt_renamed", ["a"])]
    for name, sql, cols in alters:
        oid = o("public." + name)
        r = h.psql(sql)
        h.check(r.rc == 0, "psql: " + sql, r)
        snaps = h.snapshots("table_oid = %s", (oid,))
        h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == cols,
                "%s: one snapshot with the columns from before (%s)" % (sql, cols),
                [h.snapshot_columns(s) for s in snaps])
        expect.append(("public", name, oid, "written", "not_dropped"))
    r = h.psql("SELECT attname FROM pg_attribute WHERE attrelid = 'public.alt_type'::regclass AND attname = 'b' "
               "AND atttypid = 'text'::regtype")
    h.check("(1 row)" in r.out, "ALTER COLUMN TYPE was relayed and ran", r)

    # 9. TRUNCATE
    ot = o("public.trunc_me")
    r = h.psql("TRUNCATE trunc_me")
    h.check(r.rc == 0, "psql: TRUNCATE trunc_me", r)
    snaps = h.snapshots("table_oid = %s", (ot,))
    h.check(len(snaps) == 1, "TRUNCATE: one snapshot", len(snaps))
    h.check(h.q("SELECT count(*) FROM public.trunc_me")[0][0] == 0, "TRUNCATE was relayed and ran")
    expect.append(("public", "trunc_me", ot, "written", "not_dropped"))

    # 10. materialized view, view, foreign table
    for kind, qn, sql in (("materialized view", "public.mv", "DROP MATERIALIZED VIEW mv"),
                          ("view", "public.v", "DROP VIEW public.v"),
                          ("foreign table", "public.ft", "DROP FOREIGN TABLE ft")):
        oid = o(qn)
        r = h.psql(sql)
        h.check(r.rc == 0, "psql: " + sql, r)
        h.check(not h.exists(qn), "%s %s dropped" % (kind, qn))
        expect.append(("public", qn.split(".")[1], oid, "written", "dropped"))

    # 11. ROLLBACK after DROP inside BEGIN -> not_dropped; COMMIT -> dropped (statements one by one)
    orb = o("public.rb_t")
    r = h.psql(stdin="BEGIN;\nDROP TABLE rb_t;\nROLLBACK;\n")
    h.check(r.rc == 0 and h.exists("public.rb_t"), "BEGIN; DROP TABLE rb_t; ROLLBACK; -> table still there", r)
    expect.append(("public", "rb_t", orb, "written", "not_dropped"))
    oct_ = o("public.commit_t")
    r = h.psql(stdin="BEGIN;\nSELECT 1;\nDROP TABLE commit_t;\nCOMMIT;\n")
    h.check(r.rc == 0 and not h.exists("public.commit_t"), "BEGIN; DROP TABLE commit_t; COMMIT; -> dropped", r)
    expect.append(("public", "commit_t", oct_, "written", "dropped"))

    # 11b. an implicit transaction (one Query) that fails after the DROP; a savepoint rolled back
    oimp = o("public.impl_t")
    r = h.psql("DROP TABLE impl_t; SELECT 1/0;")
    h.check(r.rc != 0 and h.exists("public.impl_t"), "'DROP TABLE impl_t; SELECT 1/0;' fails and impl_t survives", r)
    expect.append(("public", "impl_t", oimp, "written", "not_dropped"))
    osp = o("public.sp_rb")
    r = h.psql(stdin="BEGIN;\nSAVEPOINT s;\nDROP TABLE sp_rb;\nROLLBACK TO SAVEPOINT s;\nCOMMIT;\n")
    h.check(r.rc == 0 and h.exists("public.sp_rb"), "DROP inside a savepoint rolled back: sp_rb survives", r)
    expect.append(("public", "sp_rb", osp, "written", "not_dropped"))

    # 12. a table created in the client's still-open transaction: invisible to predrop's connection
    r = h.psql(stdin="BEGIN;\nCREATE TABLE fresh_t (a int);\nINSERT INTO fresh_t VALUES (1);\n"
                     "DROP TABLE fresh_t;\nCOMMIT;\n")
    h.check(r.rc == 0, "BEGIN; CREATE TABLE fresh_t; DROP TABLE fresh_t; COMMIT; succeeded", r)
    h.check(len(h.truth("object_name = 'fresh_t'")) == 1, "the server dropped fresh_t")
    h.check_event("public", "fresh_t", "table_missing", label="fresh_t (created in the open transaction)",
                  schema_may_be_null=True)
    r = h.psql("BEGIN; CREATE TABLE fresh2 (a int); DROP TABLE fresh2; COMMIT;")
    h.check(r.rc == 0 and len(h.truth("object_name = 'fresh2'")) == 1,
            "one Query 'BEGIN; CREATE TABLE fresh2; DROP TABLE fresh2; COMMIT;' ran", r)
    h.check_event("public", "fresh2", "table_missing", label="fresh2 (created earlier in the same Query)",
                  schema_may_be_null=True)

    # ground truth: every dropped relation but the two fresh ones was snapshotted before the drop
    dropped = h.truth("object_name NOT IN ('fresh_t', 'fresh2')")
    names = sorted("%s.%s" % (t[0], t[1]) for t in dropped)
    print("# truth: dropped %s" % names)
    h.check_captured_before_drop(dropped)
    for schema, table, oid, outcome, drop_outcome in expect:
        h.check_event(schema, table, outcome, drop_outcome, oid=oid)
    # nothing recorded as a failure
    bad = [(e["outcome"], e["schema_name"], e["table_name"], e["error"]) for e in h.events()
           if e["outcome"] not in ("written", "table_missing")]
    h.check(not bad, "no ledger row with a failure outcome", bad)
    h.exec("DROP ROLE IF EXISTS %s" % role)
    h.exec("DROP SCHEMA %s CASCADE; REVOKE ALL ON SCHEMA truth FROM %s; REVOKE ALL ON truth.drops FROM %s; "
           "DROP ROLE %s" % (as_role, as_role, as_role, as_role))


if __name__ == "__main__":
    holdlib.main(test, "forms")
