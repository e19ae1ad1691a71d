#!/usr/bin/python3
"""Rules that match who (issue 16): user, application_name and client_addr choose the rule through a
running predrop, and a SIGHUP with a rewritten config changes the choice.

The ledger tells the actions apart: a DROP covered by `action: skip` leaves a drop_events row with
outcome policy_skip and no snapshot, one covered by `action: snapshot` a row with outcome written.
Two login roles (scram_user and md5_user of scripts/test-roles.sh, with their passwords), two
application_names and none at all, and the client's address (127.0.0.1, which a 10.0.0.0/8 rule
must not match and a 127.0.0.1/32 rule must). Each case drops its own table, so rows cannot be
confused; every table is dropped for real either way (truth.drops).
"""
import os
import signal

import psycopg2

import holdlib

PASSWORDS = {"scram_user": "scram-secret", "md5_user": "md5-secret"}

BEFORE = """
rules:
  - {schema: by_user, user: scram_user, action: skip}
  - {schema: by_user, user: md5_user, action: snapshot}
  - {schema: by_user, action: skip}
  - {schema: by_app, application_name: "cleaner*", action: skip}
  - {schema: by_app, application_name: psql, action: snapshot}
  - {schema: by_app, application_name: "*", action: skip}
  - {schema: by_addr, client_addr: 10.0.0.0/8, action: skip}
  - {schema: by_addr, client_addr: 127.0.0.1/32, action: snapshot}
  - {schema: by_addr, action: skip}
default: {action: snapshot}
"""

# The same schemas, every choice turned around.
AFTER = """
rules:
  - {schema: by_user, user: scram_user, action: snapshot}
  - {schema: by_user, user: md5_user, action: skip}
  - {schema: by_app, application_name: "cleaner*", action: snapshot}
  - {schema: by_app, application_name: psql, action: skip}
  - {schema: by_app, application_name: "*", action: snapshot}
  - {schema: by_addr, client_addr: 127.0.0.0/8, action: skip}
  - {schema: by_addr, client_addr: "::1", action: snapshot}
default: {action: snapshot}
"""

# (label, schema, user, application_name or None) for each phase; the expected outcome per phase.
CASES = [
    ("user scram_user", "by_user", "scram_user", None, "policy_skip", "written"),
    ("user md5_user", "by_user", "md5_user", None, "written", "policy_skip"),
    ("user postgres", "by_user", "postgres", None, "policy_skip", "written"),
    ("application_name cleaner_7", "by_app", "postgres", "cleaner_7", "policy_skip", "written"),
    ("application_name psql", "by_app", "postgres", "psql", "written", "policy_skip"),
    ("application_name other", "by_app", "postgres", "other", "policy_skip", "written"),
    # No application_name: a glob "*" never matches what the session did not say.
    ("no application_name", "by_app", "postgres", None, "written", "written"),
    ("client_addr 127.0.0.1", "by_addr", "postgres", None, "written", "policy_skip"),
]


def drop_through_predrop(h, user, app, table):
    extra = {}
    if user in PASSWORDS:
        extra["password"] = PASSWORDS[user]
    if app is not None:
        extra["application_name"] = app
    c = psycopg2.connect(h.proxy_conninfo(user=user, **extra))
    c.autocommit = True
    try:
        with c.cursor() as cur:
            cur.execute("SELECT current_user, current_setting('application_name')")
            who = cur.fetchone()
            cur.execute("DROP TABLE %s" % table)
        return who
    finally:
        c.close()


def run_phase(h, phase):
    tables = []
    for i, (label, schema, user, app, *expected) in enumerate(CASES):
        name = "t_%s_%d" % (phase, i)
        h.exec("CREATE TABLE %s.%s (id int PRIMARY KEY, v text)" % (schema, name))
        tables.append((label, schema, name, expected[0 if phase == "before" else 1]))
    for (label, schema, name, _), (_, _, user, app, *_) in zip(tables, CASES):
        who = drop_through_predrop(h, user, app, "%s.%s" % (schema, name))
        print("# %s: %s.%s dropped as %s" % (phase, schema, name, who))
    for label, schema, name, outcome in tables:
        h.check_event(schema, name, outcome=outcome, label="%s, %s" % (phase, label))
        others = sorted({e["outcome"] for e in h.events("schema_name = %s AND table_name = %s", (schema, name))})
        h.check(others == [outcome], "%s, %s: the only ledger outcome of %s.%s is %s" % (phase, label, schema, name, outcome),
                others)
        snaps = h.snapshots("schema_name = %s AND table_name = %s", (schema, name))
        h.check(bool(snaps) == (outcome == "written"),
                "%s, %s: %s" % (phase, label, "a snapshot was stored" if outcome == "written" else "no snapshot was stored"),
                len(snaps))
        h.check(not h.exists("%s.%s" % (schema, name)), "%s, %s: %s.%s was dropped" % (phase, label, schema, name))


def test(h):
    for role in PASSWORDS:
        if not h.q("SELECT 1 FROM pg_roles WHERE rolname = %s AND rolcanlogin", (role,)):
            h.fail("role %s is missing: run scripts/test-roles.sh against the cluster" % role)
            return
    h.exec("CREATE SCHEMA by_user; CREATE SCHEMA by_app; CREATE SCHEMA by_addr")
    p = h.start_predrop("--hold-timeout-ms", "10000", config=BEFORE)
    run_phase(h, "before")

    config_path = os.path.join(h.work, "predrop-0.yaml")
    with open(config_path, "w") as f:
        f.write(AFTER)
    reloads = h.metric("predrop_config_reloads_total", 'result="ok"') or 0
    os.kill(p.pid, signal.SIGHUP)
    h.check(h.wait_for(lambda: (h.metric("predrop_config_reloads_total", 'result="ok"') or 0) > reloads, timeout=10),
            "SIGHUP: the rewritten config was loaded", h.log_text()[-2000:])
    h.check((h.metric("predrop_config_reloads_total", 'result="failed"') or 0) == 0, "SIGHUP: no failed reload")
    run_phase(h, "after")


if __name__ == "__main__":
    holdlib.main(test, "who_rules")
