#!/usr/bin/python3
"""A least-privilege capture role passes a basic hold test: no superuser, CONNECT on the database,
pg_read_all_stats, USAGE on schema predrop and SELECT/INSERT/UPDATE on the store tables (the store is
migrated beforehand by the superuser; predrop runs with --no-migrate). Tables in a schema the role
has no USAGE on are snapshotted too (the catalog is readable by everyone)."""
import subprocess

import holdlib


def test(h):
    role = "hold_cap_" + h.db.split("_", 2)[2]
    h.exec("CREATE TABLE public.lp_t (id int, name text, amount numeric(10,2)); "
           "INSERT INTO lp_t SELECT g, 'n' || g, g FROM generate_series(1, 50) g;"
           "CREATE SCHEMA hidden; CREATE TABLE hidden.lp_h (a int, b text); CREATE TABLE public.lp_alt (a int, b int);"
           "CREATE TABLE public.lp_rb (a int); ANALYZE;")
    h._admin_conn("DROP ROLE IF EXISTS %s" % role)
    h._admin_conn("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE" % role)
    try:
        h._admin_conn("REVOKE CONNECT ON DATABASE %s FROM PUBLIC; REVOKE CONNECT ON DATABASE %s FROM PUBLIC;"
                      "GRANT CONNECT ON DATABASE %s TO %s; GRANT CONNECT ON DATABASE %s TO %s;"
                      "GRANT pg_read_all_stats TO %s"
                      % (h.db, h.store_db, h.db, role, h.store_db, role, role))
        r = subprocess.run([h.bin, "migrate", "--store", h.store_conninfo()], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        h.check(r.returncode == 0, "predrop migrate (as the superuser)", r.stdout)
        h.exec("GRANT USAGE ON SCHEMA predrop TO %s;"
               "GRANT SELECT, INSERT, UPDATE ON predrop.schema_snapshots, predrop.drop_events TO %s" % (role, role),
               db=h.store_db)
        su = h.q("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,))
        h.check(su == [(False,)], "capture role %s is not a superuser" % role)

        h.start_predrop("--hold-timeout-ms", "10000", "--no-migrate", capture=h.capture_conninfo(role),
                        store="host=%s port=%d dbname=%s user=%s" % (h.host, h.port, h.store_db, role))
        oids = {t: h.oid(t) for t in ("public.lp_t", "hidden.lp_h", "public.lp_alt", "public.lp_rb")}
        r = h.psql("DROP TABLE lp_t")
        h.check(r.rc == 0, "least privilege: DROP TABLE lp_t", r)
        r = h.psql("DROP TABLE hidden.lp_h")
        h.check(r.rc == 0, "least privilege: DROP TABLE hidden.lp_h (no USAGE for the capture role)", r)
        r = h.psql("ALTER TABLE lp_alt DROP COLUMN b")
        h.check(r.rc == 0, "least privilege: ALTER TABLE lp_alt DROP COLUMN b", r)
        r = h.psql(stdin="BEGIN;\nDROP TABLE lp_rb;\nROLLBACK;\n")
        h.check(r.rc == 0 and h.exists("public.lp_rb"), "least privilege: DROP + ROLLBACK leaves lp_rb", r)

        snaps = h.snapshots("table_oid = %s", (oids["public.lp_t"],))
        h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == ["id", "name", "amount"],
                "least privilege: lp_t snapshotted with its columns", [h.snapshot_columns(s) for s in snaps])
        if snaps:
            print("# lp_t snapshot: stats_available=%s row_count_estimate=%s" % (snaps[0]["stats_available"],
                                                                                snaps[0]["row_count_estimate"]))
        snaps = h.snapshots("table_oid = %s", (oids["hidden.lp_h"],))
        h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == ["a", "b"],
                "least privilege: hidden.lp_h snapshotted", [h.snapshot_columns(s) for s in snaps])
        snaps = h.snapshots("table_oid = %s", (oids["public.lp_alt"],))
        h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == ["a", "b"],
                "least privilege: lp_alt snapshotted before DROP COLUMN", [h.snapshot_columns(s) for s in snaps])
        h.check_event("public", "lp_t", "written", "dropped", oid=oids["public.lp_t"])
        h.check_event("hidden", "lp_h", "written", "dropped", oid=oids["hidden.lp_h"])
        h.check_event("public", "lp_alt", "written", "not_dropped", oid=oids["public.lp_alt"])
        h.check_event("public", "lp_rb", "written", "not_dropped", oid=oids["public.lp_rb"])
        h.check_captured_before_drop(h.truth(), "least privilege: ")
        users = h.q("SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name = 'predrop-capture' "
                    "AND datname = %s", (h.db,))
        h.check(users in ([(role,)], []), "capture connections logged in as %s" % role, users)
        bad = [(e["outcome"], e["table_name"], e["error"]) for e in h.events() if e["outcome"] != "written"]
        h.check(not bad, "least privilege: no failure in the ledger", bad)
    finally:
        h.stop_predrop()
        for db in (h.db, h.store_db):
            try:
                h.exec("DROP OWNED BY %s" % role, db=db)
            except Exception as e:  # noqa: BLE001
                print("# DROP OWNED in %s: %s" % (db, e))
        h.cleanup_dbs_then = role


if __name__ == "__main__":
    h = holdlib.Hold("leastpriv")
    try:
        test(h)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        h.fail("leastpriv: %s: %s" % (type(e).__name__, e))
    role = getattr(h, "cleanup_dbs_then", None)
    failures = h.failures
    h.cleanup()
    if role:
        try:
            h._admin_conn("REVOKE pg_read_all_stats FROM %s" % role)
            h._admin_conn("DROP ROLE IF EXISTS %s" % role)
        except Exception as e:  # noqa: BLE001
            print("# could not drop role %s: %s" % (role, e))
    h.instances = []
    h.finish()
