#!/usr/bin/python3
"""predrop ages (issue 25, part 2): when each table's current version appeared, how old it is, how
many versions it had in the window. A table recreated through predrop gets its age from its
post_create, one made beside it from its first baseline ("at least"); then the store's clock is set by hand (captured_at written as the test wants): a table
recreated three times in 40 days, one only a baseline ever saw ("at least"), one dropped for good
(not listed), one dropped and created again (listed), one dropped when its snapshot was missed (the
ledger's row says it went through: not listed), filters by database and schema, and the text
form; then predrop_table_version_age_seconds on /metrics, as serve reads it, and how the serves of
one store share that read through predrop.table_ages. Uses tests/hold/holdlib.py."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
import holdlib  # noqa: E402


def ages(h, *args, fmt="json"):
    r = subprocess.run([h.bin, "ages", "--store", h.store_conninfo(), "--format", fmt, *args],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        h.fail("ages %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
        return [] if fmt == "json" else ""
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def by_table(rows):
    return {(r["schema"], r["table"]): r for r in rows}


def test(h):
    # The metric is read from the store every second here (300 s by default).
    h.start_predrop("--hold-timeout-ms", "10000", config="metrics:\n  ages_interval_s: 1\n")
    r = h.psql("CREATE TABLE recien (a int, b text)")
    h.check(r.rc == 0, "CREATE TABLE through predrop", r)
    got = h.wait_for(lambda: by_table(ages(h)).get(("public", "recien")), timeout=20)
    h.check(got is not None and got["since_from"] == "post_create" and not got["at_least"]
            and 0 <= got["age_s"] < 60 and got["versions_in_window"] == 1 and got["database"] == h.db,
            "a table created through predrop: its version dates from its post_create, exactly", got)

    # A table predrop never saw made: its first sighting is a baseline's, so its age is "at least".
    h.exec("CREATE TABLE antigua (a int)")
    bl = subprocess.run([h.bin, "baseline", "--target", h.conninfo(), "--schema", "public", "--store", h.store_conninfo()],
                        capture_output=True, text=True, timeout=120)
    h.check(bl.returncode == 0, "predrop baseline of public", (bl.returncode, bl.stderr))
    got = by_table(ages(h)).get(("public", "antigua"))
    h.check(got is not None and got["since_from"] == "baseline" and got["at_least"] and 0 <= got["age_s"] < 60
            and got["versions_in_window"] == 0, "a table first seen by predrop baseline: at least as old as that", got)

    # Recreate churn as workers run it: created, filled and dropped before the CREATE's after is read,
    # so the DROP's before absorbs it (the after is written as the before's copy). The table is gone,
    # whatever order the two rows were written in.
    pc = h.pconnect()
    with pc.cursor() as cur:
        cur.execute("CREATE TABLE efimera (a int)")
        cur.execute("INSERT INTO efimera VALUES (1)")
        cur.execute("DROP TABLE efimera")
    pc.close()
    rows = h.wait_for(lambda: (lambda r: r if len(r) == 2 and any(x[1] == "dropped" for x in r) else None)(
        h.sq("SELECT reason, drop_outcome FROM predrop.schema_snapshots WHERE table_name = 'efimera'")), timeout=20)
    h.check(rows is not None and sorted(x[0] for x in rows) == ["post_create", "pre_drop"],
            "a table created and dropped at once: its after (absorbed) and its before, dropped", rows)
    got = by_table(ages(h))
    h.check(("public", "efimera") not in got, "a table created and dropped at once is not listed", got.get(("public", "efimera")))

    # A DROP whose snapshot is missed (the store locked: its write gives up at its lock_timeout) goes on
    # (fail open). Its ledger row alone says it went through, and the table is no longer listed.
    r = h.psql("CREATE TABLE perdida (a int)")
    listed = h.wait_for(lambda: by_table(ages(h)).get(("public", "perdida")), timeout=20)
    h.check(r.rc == 0 and listed is not None, "a table created through predrop is listed", (r, listed))
    locker = h.connect(h.store_db, autocommit=False)
    try:
        with locker.cursor() as cur:
            cur.execute("LOCK TABLE predrop.schema_snapshots IN ACCESS EXCLUSIVE MODE")
        r = h.psql("DROP TABLE perdida")
    finally:
        locker.rollback()
        locker.close()
    h.check(r.rc == 0 and not h.exists("perdida"), "the DROP went on when its snapshot was missed (fail open)", r)
    h.check_event("public", "perdida", "store_error", "dropped", wait=20)
    got = by_table(ages(h))
    h.check(("public", "perdida") not in got, "a table dropped after its snapshot was missed is not listed",
            got.get(("public", "perdida")))

    # The store's clock, by hand.
    c = h.connect(h.store_db)
    with c.cursor() as cur:
        def snap(schema, table, reason, days_ago, shape="h1", outcome=None, db=h.db):
            cur.execute("INSERT INTO predrop.schema_snapshots (schema_name, table_name, reason, actor, schema_hash,"
                        " captured_at, database_name, drop_outcome) VALUES (%s, %s, %s, 'test', %s,"
                        " now() - %s * interval '1 day', %s, %s)",
                        (schema, table, reason, shape, days_ago, db, outcome))
        for d, shape in ((40, "v1"), (20, "v2"), (2, "v3")):
            snap("datos", "ventas", "pre_drop", d + 0.01, shape, "dropped")
            snap("datos", "ventas", "post_create", d, shape)
        snap("datos", "viejas", "baseline", 90, "b1")
        snap("datos", "viejas", "baseline", 10, "b1")
        snap("datos", "borrada", "post_create", 30, "x1")
        snap("datos", "borrada", "pre_drop", 5, "x1", "dropped")
        snap("datos", "vuelta", "pre_drop", 8, "y1", "quarantined")
        snap("datos", "vuelta", "post_create", 3, "y2")
        snap("datos", "ajena", "post_create", 1, "z1", db="otra_base")
    c.close()

    t = by_table(ages(h, "--database", h.db))
    v = t.get(("datos", "ventas"))
    h.check(v is not None and v["since_from"] == "post_create" and not v["at_least"]
            and 2 * 86400 - 60 <= v["age_s"] <= 2 * 86400 + 60,
            "recreated three times: its version is the newest recreate's, two days old", v)
    h.check(v is not None and v["versions_in_window"] == 2 and v["shapes_in_window"] == 2,
            "two recreates and two shapes within 30 days (the third is 40 days old)", v)
    o = t.get(("datos", "viejas"))
    h.check(o is not None and o["since_from"] == "baseline" and o["at_least"]
            and 90 * 86400 - 60 <= o["age_s"] <= 90 * 86400 + 60 and o["versions_in_window"] == 0,
            "only a baseline saw it: at least as old as its first sighting, 90 days", o)
    h.check(("datos", "borrada") not in t, "a table dropped for good is not listed", sorted(t))
    b = t.get(("datos", "vuelta"))
    h.check(b is not None and b["since_from"] == "post_create" and 3 * 86400 - 60 <= b["age_s"] <= 3 * 86400 + 60,
            "dropped (quarantined) and created again: listed, from its post_create", b)
    h.check(("datos", "ajena") not in t, "--database keeps to one database", sorted(t))
    ordered = [r["table"] for r in ages(h, "--database", h.db, "--schema", "datos")]
    h.check(ordered == ["viejas", "vuelta", "ventas"], "--schema keeps to one schema, oldest data first", ordered)
    wide = by_table(ages(h, "--database", h.db, "--days", "60")).get(("datos", "ventas"))
    h.check(wide is not None and wide["versions_in_window"] == 3 and wide["window_days"] == 60,
            "--days 60 counts the three recreates", wide)
    text = ages(h, "--database", h.db, "--schema", "datos", fmt="text")
    h.check("datos.viejas  at least 90d0h old  since " in text and "(baseline)" in text
            and "datos.ventas  2d0h old" in text and "2 versions and 2 shapes in 30 days" in text,
            "the text form says 'at least' and the window", text)

    # /metrics: the same ages as a histogram per database and schema, read by serve on its own.
    def bucket(schema, le):
        return h.metric("predrop_table_version_age_seconds_bucket", 'database="%s",schema="%s",le="%s"' % (h.db, schema, le))
    want = {"86400": 0, "604800": 2, "2592000": 2, "15552000": 3, "+Inf": 3}
    got = h.wait_for(lambda: (lambda g: g if g == want else None)({le: bucket("datos", le) for le in want}), timeout=20)
    h.check(got == want, "predrop_table_version_age_seconds: datos's three live tables in their buckets",
            {le: bucket("datos", le) for le in want})
    h.check(h.metric("predrop_table_version_age_seconds_count", 'database="%s",schema="datos"' % h.db) == 3 and
            bucket("public", "3600") == 2, "its count, and the two tables of a moment ago in the first bucket")
    # Waited for too: the read that gave datos's buckets may have run between the INSERTs above, before
    # otra_base's row (the last one) was in, and the next read is a second later.
    text = h.wait_for(lambda: (lambda t: t if 'database="otra_base"' in t else None)(h.metrics()), timeout=20) \
        or h.metrics()
    h.check("# TYPE predrop_table_version_age_seconds histogram" in text and 'database="otra_base"' in text,
            "a histogram, with every database the store knows")

    # A fleet shares the read: a serve that finds predrop.table_ages fresh shows that row and does not
    # aggregate the store; one that finds it stale computes the ages under the advisory lock and writes
    # them there; one that finds the lock taken (another serve computing) keeps to the row as it is.
    key = "SELECT pg_advisory_lock(1885626727, hashtext('predrop.schema_snapshots'))"
    row = h.sq("SELECT bounds::text, histograms::text FROM predrop.table_ages WHERE store_table = 'predrop.schema_snapshots'")
    h.check(len(row) == 1 and '"datos"' in row[0][1], "the serve wrote the ages it computed to predrop.table_ages", row)
    fleet = ('[{"database": "de_la_flota", "schema": "s", "cumulative": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],'
             ' "count": 1, "sum_s": 60}]')
    h.exec("UPDATE predrop.table_ages SET computed_at = now() + interval '1 hour', histograms = %s", h.store_db, (fleet,))

    def reads(source):
        return h.metric("predrop_table_ages_reads_total", 'source="%s"' % source)

    def showing(fn):
        return h.wait_for(lambda: (lambda t: t if fn(t) else None)(h.metrics()), timeout=20)
    shown = showing(lambda t: 'database="de_la_flota"' in t)
    h.check(shown is not None and 'schema="datos"' not in shown and (reads("shared") or 0) >= 1,
            "a fresh row another serve wrote: shown as it is, the store not read", (reads("computed"), reads("shared")))
    computed = reads("computed")
    locker = h.connect(h.store_db)
    try:
        with locker.cursor() as cur:
            cur.execute(key)
        h.exec("UPDATE predrop.table_ages SET computed_at = now() - interval '1 day'", h.store_db)
        shared = reads("shared")
        h.wait_for(lambda: (reads("shared") or 0) >= (shared or 0) + 2, timeout=20)
        h.check(reads("computed") == computed and (reads("shared") or 0) >= (shared or 0) + 2
                and 'database="de_la_flota"' in h.metrics(),
                "a stale row while another serve holds the lock: kept to, not computed again",
                (computed, reads("computed"), shared, reads("shared")))
    finally:
        locker.close()
    shown = showing(lambda t: 'schema="datos"' in t and 'database="de_la_flota"' not in t)
    fresh = h.sq("SELECT computed_at > now() - interval '1 minute', histograms::text FROM predrop.table_ages")
    h.check(shown is not None and (reads("computed") or 0) > (computed or 0) and fresh and fresh[0][0]
            and '"datos"' in fresh[0][1], "the lock let go: the stale row computed again and replaced", fresh)
    h.check(shown is not None and "predrop_table_version_age_computed_timestamp_seconds " in shown,
            "when the ages shown were computed is on /metrics too")
    h.exec("UPDATE predrop.table_ages SET computed_at = now() + interval '1 hour', histograms = '{\"not\": 1}'",
           h.store_db)
    again = h.wait_for(lambda: (lambda r: r if r and '"datos"' in r[0][0] else None)(
        h.sq("SELECT histograms::text FROM predrop.table_ages")), timeout=20)
    h.check(again is not None, "a row that does not read as histograms: computed again and written over",
            h.sq("SELECT histograms::text FROM predrop.table_ages"))

    bad = subprocess.run([h.bin, "ages", "--store", h.store_conninfo(), "--days", "0"], capture_output=True, text=True)
    h.check(bad.returncode == 2 and "--days" in bad.stderr, "a window under a day: a clear error",
            (bad.returncode, bad.stderr))

    # A role that may read the store but was never granted predrop.table_ages (a capture role whose
    # grants predate store version 7) computes the ages on its own, as every serve did before.
    ro = "ages_ro_%d" % os.getpid()
    h.exec("CREATE ROLE %s LOGIN; GRANT USAGE ON SCHEMA predrop TO %s; GRANT SELECT ON predrop.schema_snapshots,"
           " predrop.drop_events, predrop.schema_migrations TO %s" % (ro, ro, ro), h.store_db)
    try:
        h.stop_predrop()
        h.start_predrop("--hold-timeout-ms", "10000", "--no-migrate", store=h.conninfo(h.store_db, user=ro),
                        config="metrics:\n  ages_interval_s: 1\n")
        got = h.wait_for(lambda: (lambda n: n if n is not None and n >= 2 else None)(reads("computed")), timeout=20)
        h.check(got is not None and 'schema="datos"' in h.metrics() and reads("shared") == 0,
                "a role without predrop.table_ages: the ages computed on their own, every read",
                (reads("computed"), reads("shared")))
    finally:
        h.stop_predrop()
        h.exec("DROP OWNED BY %s; DROP ROLE %s" % (ro, ro), h.store_db)


if __name__ == "__main__":
    holdlib.main(test, "ages")
