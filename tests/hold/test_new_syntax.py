#!/usr/bin/python3
"""Syntax PostgreSQL 16 and 17 added, in the same string as a DROP: the DROP is held and snapshotted.

Each case sends one Query through predrop: a statement of newer syntax (MERGE ... RETURNING,
JSON_TABLE, SQL/JSON constructors and functions, ALTER TABLE ... SET EXPRESSION / SET ACCESS METHOD
DEFAULT, SYSTEM_USER, underscored and hex literals, GRANT ... WITH INHERIT, COPY ... DEFAULT), then
DROP TABLE. predrop parses with PostgreSQL 17's grammar, so it holds every one of these DROPs on any
server. Whether the server runs the string depends on its version; which cases it accepts is asked
of the server itself (the statement alone, rolled back) and must match the version each form
appeared in:
  - accepted: the table is gone (the sql_drop event trigger saw it), with a snapshot captured
    before it died and a ledger row written / dropped;
  - rejected (PostgreSQL 15 and the PostgreSQL 16 forms ... the 17 ones): the whole string fails,
    the table is still there, its snapshot was written all the same and the row says not_dropped.
With libpg_query 15's grammar (the old build) these strings did not parse and every accepted
DROP went through with no snapshot and no ledger row.
"""
import holdlib
import psycopg2

# (name, first version that accepts the statement, setup, statement, table the DROP after it drops)
CASES = [
    ("merge_returning", 170000,
     "CREATE TABLE ns_m_src (id int, v text); CREATE TABLE ns_m_dst (id int, v text);"
     " INSERT INTO ns_m_src VALUES (1, 'a')",
     "MERGE INTO ns_m_dst d USING ns_m_src s ON d.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
     " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v) RETURNING merge_action(), d.*",
     "ns_m_src"),
    ("json_table", 170000,
     "CREATE TABLE t18 (doc jsonb); INSERT INTO t18 VALUES ('{\"a\": 1}')",
     "SELECT jt.* FROM t18, JSON_TABLE(doc, '$' COLUMNS (a int PATH '$.a')) jt",
     "t18"),
    ("sql_json_constructors", 160000,
     "CREATE TABLE ns_ctor (k text, v int); INSERT INTO ns_ctor VALUES ('k', 1)",
     "SELECT JSON_OBJECT('a' VALUE 1), JSON_ARRAY(1, 'x'), JSON_OBJECTAGG(k VALUE v), JSON_ARRAYAGG(v) FROM ns_ctor",
     "ns_ctor"),
    ("is_json", 160000,
     "CREATE TABLE ns_isjson (d text); INSERT INTO ns_isjson VALUES ('{}'), ('[1]')",
     "SELECT d IS JSON OBJECT, d IS NOT JSON ARRAY, d IS JSON WITH UNIQUE KEYS FROM ns_isjson",
     "ns_isjson"),
    ("json_query_value_exists", 170000,
     "CREATE TABLE ns_jq (doc jsonb); INSERT INTO ns_jq VALUES ('{\"a\": [1, 2]}')",
     "SELECT JSON_QUERY(doc, '$.a' WITH WRAPPER), JSON_VALUE(doc, '$.a[0]' RETURNING int DEFAULT 0 ON ERROR),"
     " JSON_EXISTS(doc, '$.a') FROM ns_jq",
     "ns_jq"),
    ("set_expression", 170000,
     "CREATE TABLE ns_gen (a int, g int GENERATED ALWAYS AS (a * 2) STORED); INSERT INTO ns_gen (a) VALUES (1)",
     "ALTER TABLE ns_gen ALTER COLUMN g SET EXPRESSION AS (a * 3)",
     "ns_gen"),
    ("set_access_method_default", 170000,
     "CREATE TABLE ns_am (a int)",
     "ALTER TABLE ns_am SET ACCESS METHOD DEFAULT",
     "ns_am"),
    ("system_user", 160000,
     "CREATE TABLE ns_su (a int)",
     "SELECT SYSTEM_USER",
     "ns_su"),
    ("integer_literals", 160000,
     "CREATE TABLE ns_num (a int)",
     "SELECT 1_000_000, 0x1F, 0o17, 0b101",
     "ns_num"),
    ("grant_with_inherit", 160000,
     "CREATE TABLE ns_grant (a int); CREATE ROLE ns_r1_@TAG@; CREATE ROLE ns_r2_@TAG@",
     "GRANT ns_r1_@TAG@ TO ns_r2_@TAG@ WITH INHERIT FALSE",
     "ns_grant"),
    ("copy_default", 160000,
     "CREATE TABLE ns_copy (a int, b text DEFAULT 'd')",
     "COPY ns_copy FROM '/dev/null' (FORMAT csv, DEFAULT '\\D')",
     "ns_copy"),
    # Old syntax beside the new forms: every server runs it, so the test drops something on PostgreSQL 15 too.
    ("create_like_including", 0,
     "CREATE TABLE ns_like_src (a int DEFAULT 1, b text)",
     "CREATE TABLE ns_like_new (LIKE ns_like_src INCLUDING ALL EXCLUDING INDEXES)",
     "ns_like_src"),
]


def server_accepts(h, statement):
    c = h.connect(autocommit=False)
    try:
        with c.cursor() as cur:
            cur.execute(statement)
        return True, ""
    except psycopg2.Error as e:
        return False, (e.pgerror or str(e)).strip()
    finally:
        c.rollback()
        c.close()


def test(h):
    tag = h.db[-11:].replace("_", "")
    version = h.q("SELECT current_setting('server_version_num')::int")[0][0]
    print("# server_version_num %d" % version)
    roles = []
    for name, _, setup, _, _ in CASES:
        h.exec(setup.replace("@TAG@", tag))
        roles += [w for w in setup.replace("@TAG@", tag).replace(";", " ").split() if w.startswith("ns_r")]
    h.exec("ANALYZE")
    h.start_predrop("--hold-timeout-ms", "10000")
    try:
        for name, since, _, statement, table in CASES:
            statement = statement.replace("@TAG@", tag)
            accepted, why = server_accepts(h, statement)
            h.check(accepted == (version >= since),
                    "%s: the server %s it alone (PostgreSQL %d, the form is from %d)"
                    % (name, "accepts" if accepted else "rejects", version, since), why)
            oid = h.oid("public." + table)
            sql = "%s; DROP TABLE %s" % (statement, table)
            r = h.psql(sql)
            if accepted:
                h.check(r.rc == 0, "%s: '%s' ran through predrop" % (name, sql), r)
                h.check(len(h.truth("objid = %s", (oid,))) == 1, "%s: the server dropped %s" % (name, table))
                h.check_event("public", table, "written", "dropped", oid=oid, label=name)
            else:
                h.check(r.rc != 0 and h.exists("public." + table),
                        "%s: the server rejected the whole string, %s is still there" % (name, table), r)
                h.check_event("public", table, "written", "not_dropped", oid=oid, label=name + " (held all the same)")
        dropped = h.truth()
        print("# truth: dropped %s" % sorted("%s.%s" % (t[0], t[1]) for t in dropped))
        if version >= 170000:
            h.check(len(dropped) == len(CASES), "PostgreSQL 17 ran every string: %d tables dropped" % len(CASES),
                    len(dropped))
        h.check(len(dropped) >= 1, "at least one table really dropped", len(dropped))
        h.check_captured_before_drop(dropped)
        bad = [(e["outcome"], e["schema_name"], e["table_name"], e["error"]) for e in h.events()
               if e["outcome"] != "written"]
        h.check(not bad, "every ledger row is a written snapshot (nothing unparsed, unresolved or failed)", bad)
    finally:
        for role in roles:
            h.exec("DROP ROLE IF EXISTS %s" % role)


if __name__ == "__main__":
    holdlib.main(test, "new_syntax")
