#!/usr/bin/python3
"""Probe: a CancelRequest during the hold of a DROP whose Execute arrived in pieces.

The store's gate is closed (tests/hold/probelib.py) so each hold lasts until the test ends it. Parse + Bind + Execute of
DROP TABLE with a 5,000-byte portal name, on a bare socket:
- whole Execute, then CancelRequest: 57014, nothing relayed (the control: it passed before the fix);
- the Execute in two pieces (2,500 bytes, then the rest and Sync), CancelRequest once it is held:
  57014, nothing relayed, the table survives;
- the Execute's first 2,500 bytes, CancelRequest, then the rest and Sync: the DROP does not run while
  its snapshot cannot be written (either the cancel ends it with 57014, or it waits for the store and
  runs only after its snapshot);
- an Execute of an unknown 2,100-byte portal name behind a Bind of the unnamed portal to a DROP, its
  first 2,060 bytes sent, then CancelRequest, then the rest: predrop survives (a hold must never
  remove more of a message than it has), the client gets an error and ReadyForQuery, the table lives.
And the ordinary case through real clients: psycopg2's conn.cancel() and libpq's PQcancel
(tests/hold/hold_libpq.cpp, mode cancel) during a held DROP: 57014, the table survives.
"""
import threading
import time

import psycopg2

import holdlib
import probelib
import rawpg

PORTAL = "p" * 5000
TABLES = ("victim_whole", "victim_split", "victim_early", "victim_pg", "victim_lp", "victim_partial")


def drop_messages(table, portal=PORTAL):
    return rawpg.parse("", "DROP TABLE %s" % table) + rawpg.bind(portal, ""), rawpg.execute(portal)


def expect_cancelled(h, label, msgs):
    h.check(rawpg.describe(msgs) == "1 2 E[57014] Z",
            "%s: the client got ParseComplete, BindComplete, 57014 and ReadyForQuery, nothing else" % label, rawpg.describe(msgs))


def whole(h, oids):
    label = "whole Execute, cancel"
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        pb, e = drop_messages("victim_whole")
        c.send(pb + e + rawpg.sync())
        if probelib.wait_held(h, label):
            rawpg.cancel(h.p.port, c.pid, c.key)
        expect_cancelled(h, label, c.read_until_ready(timeout=10))
        c.close()
    probelib.check_survived(h, label, "public.victim_whole", oids["victim_whole"])


def split_then_cancel(h, oids):
    label = "split Execute (2,500 bytes + rest), cancel while held"
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        pb, e = drop_messages("victim_split")
        c.send(pb + e[:2500])
        time.sleep(0.3)
        c.send(e[2500:] + rawpg.sync())
        if probelib.wait_held(h, label, timeout=5):
            rawpg.cancel(h.p.port, c.pid, c.key)
        expect_cancelled(h, label, c.read_until_ready(timeout=10))
        c.close()
    probelib.check_survived(h, label, "public.victim_split", oids["victim_split"])


def cancel_between_pieces(h, oids):
    label = "Execute's first 2,500 bytes, cancel, then the rest"
    msgs = []
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        pb, e = drop_messages("victim_early")
        c.send(pb + e[:2500])
        time.sleep(0.3)
        rawpg.cancel(h.p.port, c.pid, c.key)
        c.send(e[2500:] + rawpg.sync())
        try:
            msgs = c.read_until_ready(timeout=3)
        except OSError:
            msgs = []   # nothing yet: the DROP waits for its snapshot
        print("# %s: within 3 s with the gate closed: %s" % (label, rawpg.describe(msgs) or "nothing"))
        h.check(not msgs or rawpg.describe(msgs) == "1 2 E[57014] Z",
                "%s: with the gate closed the client gets 57014 or nothing, never the DROP's result" % label,
                rawpg.describe(msgs))
        h.check(not h.truth("objid = %s", (oids["victim_early"],)),
                "%s: the server has not dropped victim_early while its snapshot cannot be written" % label,
                h.truth("objid = %s", (oids["victim_early"],)))
    if not msgs:
        msgs = c.read_until_ready(timeout=15)
        print("# %s: after the gate opened: %s" % (label, rawpg.describe(msgs)))
        truth = h.truth("objid = %s", (oids["victim_early"],))
        if truth:
            h.check_captured_before_drop(truth, label + ": ")
    c.close()


def psycopg2_cancel(h, oids):
    label = "psycopg2 conn.cancel() during the hold"
    with probelib.StoreGate(h):
        c = h.pconnect()
        result = {}

        def body():
            try:
                with c.cursor() as cur:
                    cur.execute("DROP TABLE victim_pg")
                result["ok"] = True
            except psycopg2.Error as e:
                result["code"] = e.pgcode
        t = threading.Thread(target=body, daemon=True)
        t.start()
        if probelib.wait_held(h, label):
            c.cancel()
        t.join(15)
        h.check(result.get("code") == "57014", "%s: 57014" % label, result)
        with c.cursor() as cur:
            cur.execute("SELECT 6")
            h.check(cur.fetchone()[0] == 6, "%s: the session is usable afterwards" % label)
        c.close()
    probelib.check_survived(h, label, "public.victim_pg", oids["victim_pg"])


def libpq_cancel(h, oids):
    label = "libpq PQcancel during the hold"
    with probelib.StoreGate(h):
        d = probelib.Driver(h.proxy_conninfo(), "cancel", "DROP TABLE victim_lp")
        if d.wait_line("sent") and probelib.wait_held(h, label):
            d.go()
        rc = d.finish()
        h.check(rc == 0 and "sqlstate 57014" in d.lines, "%s: 57014, the session usable afterwards" % label, d.lines)
    probelib.check_survived(h, label, "public.victim_lp", oids["victim_lp"])


def partly_buffered(h, oids):
    label = "held message partly buffered, then cancel"
    unknown = "q" * 2100
    msgs = []
    with probelib.StoreGate(h):
        c = rawpg.Raw(h.p.port, h.db)
        e = rawpg.execute(unknown)
        c.send(rawpg.parse("", "DROP TABLE victim_partial") + rawpg.bind("", "") + e[:2060])
        time.sleep(1.0)
        rawpg.cancel(h.p.port, c.pid, c.key)
        try:
            c.send(e[2060:] + rawpg.sync())
            msgs = c.read_until_ready(timeout=10)
        except OSError as ex:
            msgs = [("EOF", str(ex).encode())]
        c.close()
    time.sleep(0.5)
    h.check(h.p.alive(), "%s: predrop is still running" % label)
    got = rawpg.describe(msgs)
    h.check(got in ("1 2 E[57014] Z", "1 2 E[34000] Z"),
            "%s: the client gets an error (57014, or 34000 for the unknown portal) and ReadyForQuery" % label, got)
    probelib.check_survived(h, label, "public.victim_partial", oids["victim_partial"])


def test(h):
    h.exec("".join("CREATE TABLE %s (a int);" % t for t in TABLES))
    oids = {t: h.oid("public." + t) for t in TABLES}
    h.start_predrop("--hold-timeout-ms", "30000")
    for case in (whole, split_then_cancel, cancel_between_pieces, psycopg2_cancel, libpq_cancel, partly_buffered):
        if not h.p.alive():
            h.fail("predrop is not running: %s not tried" % case.__name__)
            continue
        case(h, oids)


if __name__ == "__main__":
    holdlib.main(test, "split_cancel")
