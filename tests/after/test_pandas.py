#!/usr/bin/python3
"""pandas DataFrame.to_sql(if_exists='replace') through predrop (SQLAlchemy + psycopg2, Debian's
python3-pandas/-sqlalchemy: run with /usr/bin/python3). The replace drops the table and creates it
with another column set: the pre_drop and the post_create of the same name must be one pair, the
diff must name what was added and removed, and the ANALYZE that follows must bring the post_analyze
of the same pair, after which a column renamed with its values kept is matched as a rename."""
import afterlib

PROVINCES = ["Buenos Aires", "Cordoba", "Santa Fe", "Mendoza", "Tucuman", "Salta", "Chaco", "Jujuy",
             "Neuquen", "Chubut", "Misiones", "Corrientes"]


def test(h):
    try:
        import pandas as pd
        import sqlalchemy
    except ImportError as e:
        h.fail("pandas/sqlalchemy missing for %s: %s (apt python3-pandas python3-sqlalchemy)"
               % (__import__("sys").executable, e))
        return
    h.start()
    eng = sqlalchemy.create_engine("postgresql+psycopg2://postgres@127.0.0.1:%d/%s" % (h.p.port, h.db))
    n = 240
    first = pd.DataFrame({"id": range(1, n + 1),
                          "provincia": [PROVINCES[i % len(PROVINCES)] for i in range(n)],
                          "monto": [round(i * 1.37 + 3, 2) for i in range(n)],
                          "obsoleta": ["o%d" % (i % 40) for i in range(n)]})
    first.to_sql("ventas", eng, if_exists="fail", index=False)
    o_old = h.oid("public.ventas")
    # A brand new table: an unpaired post_create.
    fresh = h.wait_after("table_oid = %s AND reason = 'post_create'", (o_old,))
    h.check(len(fresh) == 1 and fresh[0]["pair_of"] is None,
            "to_sql create: one unpaired post_create of the new table", [(s["reason"], s["pair_of"]) for s in fresh])
    h.exec("ANALYZE ventas")   # the before's values, so the rename can be matched by them

    # The same values under a new name (provincia -> jurisdiccion), obsoleta gone, anio new.
    second = pd.DataFrame({"id": first["id"], "jurisdiccion": first["provincia"], "monto": first["monto"],
                           "anio": [2000 + i % 25 for i in range(n)]})
    second.to_sql("ventas", eng, if_exists="replace", index=False)
    o_new = h.oid("public.ventas")
    h.check(o_new is not None and o_new != o_old, "to_sql replace recreated ventas (oid %s -> %s)" % (o_old, o_new))

    after = h.wait_after("table_oid = %s AND reason = 'post_create'", (o_new,))
    after = after[0] if after else None
    before = h.check_pair("to_sql replace", "pre_drop", after)
    if before:
        h.check(int(before["table_oid"]) == o_old and before["table_name"] == after["table_name"] == "ventas",
                "to_sql replace: the before is the dropped table's (oid %s), the after the new one's, same name" % o_old,
                (before["table_oid"], before["table_name"], after["table_name"]))
        h.check(h.snapshot_columns(before) == ["id", "provincia", "monto", "obsoleta"]
                and h.snapshot_columns(after) == ["id", "jurisdiccion", "monto", "anio"],
                "to_sql replace: before and after have the old and the new column sets",
                (h.snapshot_columns(before), h.snapshot_columns(after)))
        h.check(after["stats_available"] is False, "to_sql replace: the post_create has no statistics yet",
                after["stats_available"])
    h.check_afters_match_truth("to_sql")

    d = h.diff("public.ventas")
    if d:
        print("# diff before ANALYZE: %s" % d.get("diff"))
        h.check(d.get("paired") is True and before is not None and d["before"]["id"] == before["id"]
                and d["after"]["id"] == after["id"],
                "diff public.ventas: the pair pre_drop -> post_create", (d.get("paired"), d.get("before"), d.get("after")))
        dd = d.get("diff", {})
        h.check("anio" in dd.get("added", []) and "obsoleta" in dd.get("removed", []),
                "diff public.ventas: anio added, obsoleta removed", dd)

    # ANALYZE through predrop: the statistics arrive, and with them the post_analyze.
    r = h.psql("ANALYZE ventas")
    h.check(r.rc == 0, "ANALYZE ventas through predrop", r)
    z = h.wait_for(
        lambda: h.snapshots("reason = 'post_analyze' AND table_oid = %s", (o_new,)), timeout=15) or []
    h.check(len(z) == 1, "ANALYZE: one post_analyze of the new table", [(s["reason"], str(s["captured_at"])) for s in z])
    if z and after:
        z = z[0]
        extra = z["extra"] if isinstance(z["extra"], dict) else {}
        h.check(z["stats_available"] is True and z["pair_of"] == after["pair_of"] and extra.get("profile_of") == after["id"],
                "post_analyze: stats_available, the same pair_of, profile_of the post_create",
                (z["stats_available"], z["pair_of"], after["pair_of"], extra))
    d = h.diff("public.ventas")
    if d:
        dd = d.get("diff", {})
        print("# diff after ANALYZE: %s" % dd)
        net = h.net_change(dd)
        ren = [(f, t) for f, t, _ in net["renamed"]]
        h.check(d.get("paired") is True and d["after"]["id"] == (z["id"] if isinstance(z, dict) else None)
                and ren == [("provincia", "jurisdiccion")],
                "diff after ANALYZE: the pair pre_drop -> post_analyze, provincia -> jurisdiccion matched as a rename "
                "by its values", (d.get("paired"), d.get("after"), dd))
        h.check(net["added"] == ["anio"] and net["removed"] == ["obsoleta"] and net["type_changed"] == [],
                "diff after ANALYZE: besides the rename exactly anio added and obsoleta removed", net)
        for x in dd.get("renamed_candidates", []):
            print("# rename evidence: %s" % x)
    eng.dispose()


if __name__ == "__main__":
    afterlib.main(test, "after_pandas")
