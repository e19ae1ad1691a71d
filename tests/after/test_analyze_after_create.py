#!/usr/bin/python3
"""capture.analyze_after_create: true: predrop runs ANALYZE itself on a table it saw created, so
the post_analyze (stats_available, a profile of the rows the creating transaction inserted) arrives
with no ANALYZE from the client and no autovacuum (off for the table). With the key at its default
(false) the same table keeps waiting: predrop never samples a table on its own."""
import afterlib


def run(h, analyze):
    t = "aa_on" if analyze else "aa_off"
    h.start(extra_config="  analyze_after_create: %s\n" % ("true" if analyze else "false"))
    c = h.pconnect(autocommit=False)
    with c.cursor() as cur:
        cur.execute("CREATE TABLE %s (id int, city text) WITH (autovacuum_enabled = off)" % t)
        cur.execute("INSERT INTO " + t + " SELECT g, (ARRAY['Salta', 'Jujuy', 'Tucumán'])[1 + g % 3] "
                    "FROM generate_series(1, 300) g")
    c.commit()
    c.close()
    created = h.wait_after("table_name = %s AND reason = 'post_create'", (t,))
    h.check(bool(created), "analyze_after_create=%s: the post_create arrives" % analyze)
    if not created:
        return
    profiled = h.wait_for(lambda: h.snapshots("table_name = %s AND reason = 'post_analyze'", (t,)),
                          timeout=10 if analyze else 3)
    if not analyze:
        h.check(not profiled, "analyze_after_create=false: no post_analyze without an ANALYZE", profiled)
        return
    h.check(bool(profiled), "analyze_after_create=true: the post_analyze arrives with no client ANALYZE")
    if not profiled:
        return
    p = profiled[0]
    h.check(p["stats_available"], "the post_analyze has statistics")
    h.check(p["pair_of"] == created[0]["pair_of"] and (p["extra"] or {}).get("profile_of") == created[0]["id"],
            "it profiles the post_create (profile_of) in the same pair", (p["pair_of"], p["extra"]))
    city = [col for col in p["columns_profile"] if col["name"] == "city"]
    h.check(city and sorted(city[0]["most_common_vals"]) == ["Jujuy", "Salta", "Tucumán"],
            "the profile holds the committed rows' values", city)


def test(h):
    h.reset_truth()
    run(h, analyze=True)
    h.stop_predrop()
    run(h, analyze=False)


if __name__ == "__main__":
    afterlib.main(test, "after_analyze")
