#!/usr/bin/python3
"""A database dropped and made again under its name while predrop runs keeps its quarantine.

The quarantine's schema and the move's function are made in a database by the first quarantined
DROP's capture (quarantine::prepare_sql). The capture used to remember that per database name for
the life of the process: after DROP DATABASE and CREATE DATABASE of the same name (a test
environment's reset, an ephemeral database) every DROP there called a function that was not there,
fell back, and dropped the table for real. Now the prepare runs once per capture session, and a
dropped database takes its sessions with it.

Ground truth: truth.drops (holdlib's sql_drop event trigger) never sees the quarantined tables go,
and their OIDs live on in the quarantine schema."""
import wirelib  # puts tests/hold on the path, for holdlib

import holdlib  # noqa: E402


def quarantined(h, oid):
    r = h.q("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = %s AND n.nspname = %s", (oid, wirelib.QSCHEMA))
    return bool(r) and not h.q("SELECT 1 FROM truth.drops WHERE objid = %s", (oid,))


def drop_through_predrop(h, table):
    h.exec("CREATE TABLE %s (id int PRIMARY KEY, v text); INSERT INTO %s VALUES (1, 'a')" % (table, table))
    oid = h.oid("public." + table)
    c = h.pconnect()
    try:
        with c.cursor() as cur:
            cur.execute("DROP TABLE %s" % table)
    finally:
        c.close()
    return oid


def body(h):
    h.start_predrop("--hold-timeout-ms", "10000", config=wirelib.CONFIG)
    oid = drop_through_predrop(h, "before")
    h.check(quarantined(h, oid), "the first database's DROP is quarantined")

    for round_ in (1, 2):
        # FORCE ends predrop's capture sessions there too, as it would an application's.
        h._admin_conn("DROP DATABASE %s WITH (FORCE)" % h.db)
        h._admin_conn("CREATE DATABASE %s TEMPLATE template0" % h.db)
        h.exec(holdlib.TRUTH_SQL)
        for n in (1, 2):
            oid = drop_through_predrop(h, "after_%d_%d" % (round_, n))
            h.check(quarantined(h, oid),
                    "made again (%d), DROP %d is quarantined, not dropped for real" % (round_, n),
                    h.q("SELECT schema_name, object_name FROM truth.drops"))
    log = h.log_text()
    h.check("could not keep the table" not in log, "predrop never fell back to a real DROP",
            [l for l in log.splitlines() if "could not keep" in l])


if __name__ == "__main__":
    holdlib.main(body, "recreated_db")
