#!/usr/bin/python3
"""A libpq pipeline whose one Sync holds an explicit transaction that commits and then a statement
that fails: BEGIN; CREATE TABLE; ALTER TABLE; COMMIT; SELECT 1/0; Sync. The server committed the
CREATE and the ALTER (truth.ddl has them); the failure after the COMMIT only aborts the implicit
block that follows it, so both changes must have their afters. The same string as one simple
Query (psycopg2) is the control."""
import afterlib
from libpq_pipeline import pipeline


def test(h):
    h.exec("CREATE TABLE pc_alt (a int, b text); INSERT INTO pc_alt VALUES (1, 'x');"
           "CREATE TABLE sq_alt (a int, b text); INSERT INTO sq_alt VALUES (1, 'x'); ANALYZE;")
    h.reset_truth()
    h.start()
    res = pipeline(h.proxy_conninfo(), [["BEGIN", "CREATE TABLE pc_new (a int)", "ALTER TABLE pc_alt ADD COLUMN c int",
                                         "COMMIT", "SELECT 1/0"]])
    h.check(res == [["COMMAND_OK", "COMMAND_OK", "COMMAND_OK", "COMMAND_OK", "FATAL_ERROR/22012"]],
            "pipeline: the COMMIT succeeded, the statement after it failed", res)
    c = h.pconnect(autocommit=True)
    try:
        with c.cursor() as cur:
            cur.execute("BEGIN; CREATE TABLE sq_new (a int); ALTER TABLE sq_alt ADD COLUMN c int; COMMIT; SELECT 1/0")
        h.fail("simple query: no error")
    except Exception as e:  # noqa: BLE001
        h.ok("simple query failed after its COMMIT: %s" % str(e).splitlines()[0])
    finally:
        c.close()
    committed = sorted(r[0] for r in h.q("SELECT DISTINCT objid::regclass::text FROM truth.ddl"))
    h.check(committed == ["pc_alt", "pc_new", "sq_alt", "sq_new"], "truth: all four changes committed", committed)
    h.wait_after("table_name = 'sq_new'")
    h.check_afters_match_truth("COMMIT then a failure in one pipeline Sync / one Query")


if __name__ == "__main__":
    afterlib.main(test, "after_pipeline_commit_error")
