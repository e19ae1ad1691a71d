"""Letting quarantined tables go (issue 16): `predrop quarantine purge --older-than / --id`, and the
purger inside serve: retention (the clock is the dropped_at of the comment JSON, which the test
rewrites), max_tables and max_bytes oldest first, a table another session holds a lock on skipped
within lock_timeout (logged, retried next round) while the others are purged, the store's rows
reconciled, and the /metrics figures."""
import datetime
import os
import re
import threading
import time
import urllib.request

from qlib import QSCHEMA, main
from predrop_harness import Predrop, settled_sessions  # noqa: E402 (qlib puts tests/support on the path)


def ago(**kw):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(**kw)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def quarantine_tables(q, names, rows=10):
    for n in names:
        q.owner(f"CREATE TABLE public.{n} (id int PRIMARY KEY, pad text); "
                f"INSERT INTO public.{n} SELECT g, repeat('x', 100) FROM generate_series(1, {rows}) g")
        err = q.move([n])
        q.check(err is None, f"{n} quarantined", err)
    return {h["detail"]["table"]: h for h in q.held()}


def metrics(admin):
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(predrop_quarantine\w*|predrop_undrops_total)(\{[^}]*\})? (\S+)$', line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def wait_for(cond, secs):
    end = time.time() + secs
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    return cond()


def sessions_of(q, db):
    n = settled_sessions(lambda: q.value(f"SELECT sessions FROM pg_stat_database WHERE datname = '{db}'"))
    q.check(n is not None, f"pg_stat_database.sessions of {db} never settled")
    return -1 if n is None else n


def test(q):
    # ---- the command ----
    held = quarantine_tables(q, ["old1", "new1", "new2"])
    q.set_dropped_at(held["old1"]["quarantine_table"], ago(days=10))
    r = q.predrop("quarantine", "purge")
    q.check(r.rc == 2, "purge wants --older-than or --id", r)
    r = q.predrop("quarantine", "purge", "--older-than", "7d", "--database", q.db)
    q.check(r.rc == 0 and "purged" in r.out, "purge --older-than 7d", r)
    left = sorted(h["detail"]["table"] for h in q.held())
    q.check(left == ["new1", "new2"], "only the 10-day-old table went", left)
    r = q.predrop("quarantine", "purge", "--id", held["new2"]["detail"]["id"], "--database", q.db)
    q.check(r.rc == 0 and sorted(h["detail"]["table"] for h in q.held()) == ["new1"], "purge --id", r)
    rows = {x["table"]: x for x in q.store_rows()}
    q.check(rows.get("old1", {}).get("state") == "purged" and rows["old1"]["reason"] == "manual"
            and rows.get("new2", {}).get("state") == "purged", "the store rows say purged (manual)", rows)
    r = q.predrop("undrop", "public.new1")
    q.check(r.rc == 0, "undrop new1", r)

    # ---- the purger in serve ----
    held = quarantine_tables(q, ["p_expired", "p_locked", "p_old", "p_mid", "p_new"], rows=200)
    for name, mins in [("p_expired", 120), ("p_locked", 50), ("p_old", 40), ("p_mid", 30), ("p_new", 20)]:
        q.set_dropped_at(held[name]["quarantine_table"], ago(minutes=mins))
    # The purger's store reconciliation inserts the rows no proxy wrote (this test moved them itself).
    q.su("DELETE FROM predrop.quarantine WHERE state = 'held'", db=q.store_db)
    work = f"/tmp/{q.db}"
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "predrop.yaml")
    with open(cfg, "w") as f:
        f.write("quarantine:\n  retention: 1h\n  max_tables: 2\n  purge_interval_s: 1\n  lock_timeout_ms: 100\n")

    # An application session holds a lock on the oldest capped table; a second one queues a read
    # behind whatever waits for that lock: the purger's DROP makes it wait at most lock_timeout.
    locker = q.connect("postgres")
    locker.autocommit = False
    lc = locker.cursor()
    lc.execute(f'LOCK TABLE {QSCHEMA}."{held["p_locked"]["quarantine_table"]}" IN ACCESS SHARE MODE')
    waits = []
    stop = threading.Event()

    def reader():
        c = q.connect("postgres")
        cur = c.cursor()
        cur.execute("SET lock_timeout = '10s'")
        while not stop.is_set():
            t0 = time.time()
            try:
                cur.execute(f'SELECT count(*) FROM {QSCHEMA}."{held["p_locked"]["quarantine_table"]}"')
            except Exception as e:
                waits.append(("error", str(e)))
                break
            waits.append(time.time() - t0)
            time.sleep(0.01)
        c.close()

    t = threading.Thread(target=reader)
    t.start()

    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    admin = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    # A database with no quarantine: a scheduled round connects to it at the first round only (a
    # session there makes the server refuse ALTER DATABASE ... RENAME and DROP DATABASE).
    bystander = q.db + "_bystander"
    q.su(f"DROP DATABASE IF EXISTS {bystander}")
    q.su(f"CREATE DATABASE {bystander}")
    p = Predrop(work, "--config", cfg, "--admin", admin, "--no-migrate",
                "--capture", q.conninfo(q.role("cap"), "postgres"),
                "--store", q.conninfo("postgres", q.store_db))
    p.start()
    try:
        gone = wait_for(lambda: sorted(h["detail"]["table"] for h in q.held()) == ["p_locked", "p_new"], 20)
        q.check(gone, "the purger drops the expired table, then the oldest unlocked over max_tables (p_old, p_mid)",
                sorted(h["detail"]["table"] for h in q.held()))
        bystander_after_first = sessions_of(q, bystander)
        q.check(bystander_after_first >= 1, "the first round walked every database, the bystander included",
                bystander_after_first)
        log = p.log_text()
        q.check(re.search(r"skipped: another session holds a lock on it \(lock_timeout 100 ms\)", log) is not None,
                "the locked table's purge is skipped and logged", log[-3000:])
        q.check(re.search(r"purged \(expired\) .*p_expired", log) and re.search(r"purged \(cap\) .*p_old", log),
                "purges are logged with their reason", log[-3000:])
        m = wait_for(lambda: (lambda x: x if x.get("predrop_quarantine_tables") == 2 else None)(metrics(admin)), 10) \
            or metrics(admin)
        q.check(m.get("predrop_quarantine_tables") == 2 and m.get("predrop_quarantine_bytes", 0) > 0,
                "the gauges show what is left", m)
        q.check(m.get('predrop_quarantine_purged_total{reason="expired"}') == 1 and
                m.get('predrop_quarantine_purged_total{reason="cap"}') == 2, "the purge counters", m)
        q.check(m.get("predrop_undrops_total") == 1, "undrops counted from the store", m)
        rows = {x["table"]: x for x in q.store_rows()}
        q.check(rows.get("p_expired", {}).get("reason") == "expired" and rows.get("p_old", {}).get("reason") == "cap"
                and rows.get("p_locked", {}).get("state") == "held" and rows.get("p_new", {}).get("state") == "held",
                "the store is reconciled: missing rows inserted, purged ones marked with their reason", rows)
        # The round writes its rows in one statement: each keeps its own table's fields.
        written = q.su("SELECT table_name, quarantine_table, bytes, expires_at - dropped_at = interval '1 hour', "
                       "table_oid = (detail->>'oid')::bigint FROM predrop.quarantine "
                       "WHERE table_name IN ('p_locked', 'p_new') ORDER BY table_name", db=q.store_db)
        q.check([(r[0], r[1]) for r in written] == [(n, held[n]["quarantine_table"]) for n in ("p_locked", "p_new")]
                and all(r[2] and r[2] > 0 and r[3] and r[4] for r in written),
                "the reconciled rows carry their own quarantine table, size and expiry", written)
        stop.set()
        t.join()
        errors = [w for w in waits if isinstance(w, tuple)]
        longest = max((w for w in waits if not isinstance(w, tuple)), default=0)
        q.check(not errors and len(waits) > 20 and longest < 1.0,
                f"the application's reads never waited long behind the purger ({len(waits)} reads, longest {longest:.3f} s)",
                errors)
        locker.rollback()
        # With the lock gone the table is purged next round only if a cap or retention says so: neither does.
        time.sleep(2.5)
        q.check(sorted(h["detail"]["table"] for h in q.held()) == ["p_locked", "p_new"],
                "within caps and retention nothing more is purged")
        q.set_dropped_at(held["p_locked"]["quarantine_table"], ago(hours=2))
        q.check(wait_for(lambda: [h["detail"]["table"] for h in q.held()] == ["p_new"], 10),
                "once expired and unlocked it is purged on a later round")

        # max_bytes, after a SIGHUP: the oldest go until the database's quarantine fits.
        more = quarantine_tables(q, ["b_1", "b_2"], rows=200)
        cap = more["b_2"]["bytes"] + more["b_1"]["bytes"] // 2
        with open(cfg, "w") as f:
            f.write(f"quarantine:\n  retention: 1h\n  max_bytes: {cap}\n  purge_interval_s: 1\n  lock_timeout_ms: 100\n")
        os.kill(p.pid, 1)
        q.check(wait_for(lambda: [h["detail"]["table"] for h in q.held()] == ["b_2"], 10),
                "after SIGHUP max_bytes purges oldest first (p_new, b_1) until the rest fits",
                [h["detail"]["table"] for h in q.held()])
        m = wait_for(lambda: (lambda x: x if x.get("predrop_quarantine_max_bytes") == cap else None)(metrics(admin)), 10) \
            or metrics(admin)
        q.check(m.get("predrop_quarantine_max_bytes") == cap and
                m.get("predrop_quarantine_database_bytes_max") == more["b_2"]["bytes"] and
                m.get('predrop_quarantine_purged_total{reason="cap"}') == 4, "the cap gauges and counters", m)
        # p_new and b_1 go in one round, as one lot (one transaction, one store statement).
        rows = {x["table"]: x for x in q.store_rows()}
        q.check([(rows.get(n, {}).get("state"), rows.get(n, {}).get("reason")) for n in ("p_new", "b_1", "b_2")]
                == [("purged", "cap"), ("purged", "cap"), ("held", None)],
                "the store marks each table of the lot purged with its reason, the one left held", rows)

        # A round with more to purge than one transaction takes (32 tables): every lot goes, in order.
        with open(cfg, "w") as f:
            f.write("quarantine:\n  retention: 1h\n  purge_interval_s: 1\n  lock_timeout_ms: 100\n")
        os.kill(p.pid, 1)
        many = ["m_%02d" % i for i in range(70)]
        quarantine_tables(q, many, rows=1)
        with open(cfg, "w") as f:
            f.write("quarantine:\n  retention: 1h\n  max_tables: 1\n  purge_interval_s: 1\n  lock_timeout_ms: 100\n")
        os.kill(p.pid, 1)
        q.check(wait_for(lambda: [h["detail"]["table"] for h in q.held()] == ["m_69"], 20),
                "max_tables 1 purges the 70 oldest in one round, lot after lot", [h["detail"]["table"] for h in q.held()])
        rows = {x["table"]: x for x in q.store_rows()}
        q.check(all((rows.get(n, {}).get("state"), rows.get(n, {}).get("reason")) == ("purged", "cap")
                    for n in ["b_2"] + many[:-1]) and rows.get("m_69", {}).get("state") == "held",
                "the store marks all 70 purged for the cap", {n: rows.get(n) for n in ["b_2"] + many[:3] + many[-3:]})
        m = wait_for(lambda: (lambda x: x if x.get('predrop_quarantine_purged_total{reason="cap"}') == 74 else None)(
            metrics(admin)), 10) or metrics(admin)
        q.check(m.get('predrop_quarantine_purged_total{reason="cap"}') == 74 and m.get("predrop_quarantine_tables") == 1,
                "the counters count each table of the lots", m)
        bystander_now = sessions_of(q, bystander)
        q.check(bystander_now == bystander_after_first,
                "the later rounds (one a second, over the phases above) left the bystander alone",
                (bystander_after_first, bystander_now))
    finally:
        stop.set()
        t.join()
        locker.close()
        p.stop()
        q.su(f"DROP DATABASE IF EXISTS {bystander} WITH (FORCE)")


if __name__ == "__main__":
    main(test, "purge")
