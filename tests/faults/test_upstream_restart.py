#!/usr/bin/python3
"""The upstream PostgreSQL (a private cluster, also the capture database) is restarted under predrop,
with pg_ctl restart -m fast and -m immediate, while sessions are open, one idle and one in the middle
of a statement. Each client gets a clean error (libpq reports it; no hang), reconnects through the
same predrop process, and a DROP after the restart gets a written snapshot (the capture connections
to the restarted server are replaced by themselves).
"""
import threading
import time

import psycopg2

import faultlib
from faultlib import HOLD_TIMEOUT_MS

# A client that sees no error within this long after the restart is hung.
HANG_S = 20


def run_with_deadline(fn, seconds):
    """Runs fn in a thread; returns ("ok", value) / ("error", exception) / ("hung", None)."""
    out = {}

    def body():
        try:
            out["v"] = ("ok", fn())
        except Exception as e:  # noqa: BLE001
            out["v"] = ("error", e)
    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(seconds)
    return out.get("v", ("hung", None))


def describe(e):
    return "%s %s: %s" % (type(e).__name__, getattr(e, "pgcode", None), str(e).strip().replace("\n", " | "))


def test(h):
    faultlib.with_private_cluster(h, "upstream-pg", h.db, run)


def run(h, cl):
    c = psycopg2.connect(cl.conninfo(h.db))
    c.autocommit = True
    c.cursor().execute("".join("CREATE TABLE %s (a int); INSERT INTO %s VALUES (1);" % (t, t)
                               for t in ("before_t", "after_fast", "after_immediate")))
    c.close()

    h.start_predrop("--hold-timeout-ms", str(HOLD_TIMEOUT_MS * 10),
                    capture="host=127.0.0.1 port=%d user=postgres" % cl.port,
                    env={"PREDROP_UPSTREAM": "127.0.0.1:%d" % cl.port})
    pid = h.p.pid

    def pconnect():
        conn = psycopg2.connect(h.proxy_conninfo(), connect_timeout=5)
        conn.autocommit = True
        return conn

    def query(conn, sql):
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall() if cur.description else None

    def reconnect(label):
        deadline = time.monotonic() + 15
        last = None
        while time.monotonic() < deadline:
            try:
                conn = pconnect()
                h.check(query(conn, "SELECT 1") == [(1,)], "%s: reconnected through the same predrop" % label)
                return conn
            except psycopg2.Error as e:
                last = e
                time.sleep(0.2)
        h.fail("%s: could not reconnect through predrop: %s" % (label, last and describe(last)))
        return None

    def check_drop_written(conn, table, label):
        err, ms = faultlib.drop_through(h, table, conn)
        h.check(err is None, "%s: DROP TABLE %s succeeded (%.0f ms)" % (label, table, ms), err)
        h.check_event("public", table, "written", label="%s: %s" % (label, table))

    s1 = pconnect()
    check_drop_written(s1, "before_t", "before the restarts")

    for mode, table in (("fast", "after_fast"), ("immediate", "after_immediate")):
        label = "restart -m %s" % mode
        idle = pconnect()
        busy = pconnect()
        query(idle, "SELECT 1")
        busy_result = {}
        busy_thread = threading.Thread(target=lambda: busy_result.update(
            v=run_with_deadline(lambda: query(busy, "SELECT pg_sleep(60)"), HANG_S)), daemon=True)
        busy_thread.start()
        time.sleep(0.5)  # the sleep is running on the server
        t0 = time.monotonic()
        cl.restart(mode)
        print("# %s: pg_ctl restart took %.1f s" % (label, time.monotonic() - t0))
        busy_thread.join(HANG_S + 5)
        kind, v = busy_result.get("v", ("hung", None))
        h.check(kind == "error" and isinstance(v, psycopg2.Error),
                "%s: the session mid-statement got an error, not a hang (%s)" % (label, describe(v) if v else kind))
        print("# %s: busy session saw it %.1f s after the restart began" % (label, time.monotonic() - t0))
        kind, v = run_with_deadline(lambda: query(idle, "SELECT 1"), HANG_S)
        h.check(kind == "error" and isinstance(v, psycopg2.Error),
                "%s: the idle session's next statement got an error, not a hang (%s)"
                % (label, describe(v) if v else kind))
        for conn in (idle, busy):
            try:
                conn.close()
            except psycopg2.Error:
                pass
        conn = reconnect(label)
        if conn:
            check_drop_written(conn, table, label)
            conn.close()

    h.check(h.p.pid == pid and h.p.alive(), "one predrop process throughout (pid %d)" % pid)
    try:
        s1.close()
    except psycopg2.Error:
        pass
    gauge = h.wait_for(lambda: (h.metric("predrop_server_connections") or 0) == 0, timeout=10)
    h.check(gauge, "every upstream connection was closed (predrop_server_connections is 0)",
            h.metric("predrop_server_connections"))


if __name__ == "__main__":
    faultlib.holdlib.main(test, "upstreamrestart")
