#!/usr/bin/python3
"""psycopg2 and SQLAlchemy + pandas through predrop (Debian's python3-psycopg2/-sqlalchemy/-pandas:
run with /usr/bin/python3). DataFrame.to_sql(if_exists='replace') drops and recreates the table: the
old shape must be snapshotted before the drop."""
import holdlib


def test(h):
    try:
        import pandas as pd
        import sqlalchemy
    except ImportError as e:
        h.fail("pandas/sqlalchemy missing for %s: %s (apt python3-pandas python3-sqlalchemy)" % (__import__("sys").executable, e))
        return
    h.exec("CREATE TABLE py_a (id int, name text); INSERT INTO py_a VALUES (1, 'x'), (2, 'y');"
           "CREATE TABLE py_b (id int); CREATE TABLE py_rb (id int); CREATE SCHEMA app; CREATE TABLE app.py_c (z int);"
           "ANALYZE;")
    h.start_predrop("--hold-timeout-ms", "10000")

    # psycopg2: default (non-autocommit) transaction, committed
    oa = h.oid("public.py_a")
    c = h.pconnect(autocommit=False)
    with c.cursor() as cur:
        cur.execute("SELECT count(*) FROM py_a")
        cur.execute("DROP TABLE py_a")
    c.commit()
    h.check_event("public", "py_a", "written", "dropped", oid=oa, label="psycopg2 DROP + commit")
    # rolled back
    orb = h.oid("public.py_rb")
    with c.cursor() as cur:
        cur.execute("DROP TABLE py_rb")
    c.rollback()
    h.check(h.exists("public.py_rb"), "psycopg2 DROP + rollback: py_rb still exists")
    h.check_event("public", "py_rb", "written", "not_dropped", oid=orb, label="psycopg2 DROP + rollback")
    # autocommit, search_path set by the session, parameters bound client-side in the same string
    c.autocommit = True
    ob, oc = h.oid("public.py_b"), h.oid("app.py_c")
    with c.cursor() as cur:
        cur.execute("SET search_path TO app, public")
        cur.execute("SELECT %s::int; DROP TABLE py_c; DROP TABLE public.py_b", (1,))
    c.close()
    h.check_event("app", "py_c", "written", "dropped", oid=oc, label="psycopg2 multi-statement via search_path app")
    h.check_event("public", "py_b", "written", "dropped", oid=ob)

    # SQLAlchemy + pandas to_sql(if_exists='replace')
    url = "postgresql+psycopg2://postgres@127.0.0.1:%d/%s" % (h.p.port, h.db)
    eng = sqlalchemy.create_engine(url)
    df1 = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0.5, 1.5, 2.5]})
    df1.to_sql("pd_t", eng, if_exists="fail", index=True)
    h.exec("ANALYZE pd_t")
    o_old = h.oid("public.pd_t")
    df2 = pd.DataFrame({"x": [10, 20], "y": ["p", "q"]})
    df2.to_sql("pd_t", eng, if_exists="replace", index=False)
    eng.dispose()
    o_new = h.oid("public.pd_t")
    h.check(o_new is not None and o_new != o_old, "to_sql replace: pd_t dropped and recreated (oid %s -> %s)" % (o_old, o_new))
    cols = [r[0] for r in h.q("SELECT attname FROM pg_attribute WHERE attrelid = 'public.pd_t'::regclass AND attnum > 0 "
                              "AND NOT attisdropped ORDER BY attnum")]
    h.check(cols == ["x", "y"], "to_sql replace: the new table has the new shape", cols)
    snaps = h.snapshots("table_oid = %s", (o_old,))
    h.check(len(snaps) == 1 and h.snapshot_columns(snaps[0]) == ["index", "a", "b", "c"],
            "to_sql replace: the old shape (index, a, b, c) was snapshotted", [h.snapshot_columns(s) for s in snaps])
    if snaps:
        print("# pd_t snapshot: columns=%s row_count_estimate=%s stats_available=%s session_user_name=%s"
              % (h.snapshot_columns(snaps[0]), snaps[0]["row_count_estimate"], snaps[0]["stats_available"],
                 snaps[0]["session_user_name"]))
        h.check(snaps[0]["session_user_name"] == "postgres", "snapshot session_user_name is the client's user",
                snaps[0]["session_user_name"])
    h.check_event("public", "pd_t", "written", "dropped", oid=o_old, label="to_sql replace")
    h.check_captured_before_drop(h.truth(), "python clients: ")


if __name__ == "__main__":
    holdlib.main(test, "python")
