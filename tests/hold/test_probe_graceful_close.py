#!/usr/bin/python3
"""Probe: a client that closes gracefully while its DROP is held has left; the DROP is never relayed.

The store's gate is closed (tests/hold/probelib.py) so the hold lasts; the client closes; then the
gate opens, the snapshot is written (the hold would end there) and, a moment later, the table must still exist and the
server must have recorded no drop. Closes tried:
- libpq PQfinish (Terminate, then close) on a plaintext leg, and on a TLS leg (sslmode=require);
- a bare TLS socket sending the DROP, then close_notify, then closing;
- a bare socket sending the DROP, then Terminate, then closing;
- a bare socket sending the DROP and a pipelined SELECT, then closing (FIN behind pipelined bytes).
"""
import os
import socket
import ssl
import subprocess
import time

import holdlib
import probelib
import rawpg

TABLES = ("gc_finish", "gc_finish_tls", "gc_notify", "gc_terminate", "gc_fin")


def client_tls():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def closed_during_hold(h, oids, table, label, close):
    """Close the gate, let CLOSE send the DROP and close, open the gate, let the hold end, check the table."""
    with probelib.StoreGate(h):
        close(lambda: probelib.wait_held(h, label))
        time.sleep(0.5)
    h.check(bool(probelib.wait_snapshot(h, oids[table])), "%s: the snapshot was written once the gate opened" % label)
    time.sleep(1.0)
    probelib.check_survived(h, label, "public." + table, oids[table])


def libpq_finish(h, oids, table, label, sslmode):
    def close(held):
        d = probelib.Driver(h.proxy_conninfo(sslmode=sslmode), "finish", "DROP TABLE " + table)
        if d.wait_line("sent") and held():
            d.go()
        h.check(d.finish() == 0 and "finished" in d.lines, "%s: PQfinish returned" % label, d.lines)
    closed_during_hold(h, oids, table, label, close)


def raw_close(h, oids, table, label, tls=False, after=b"", notify=False):
    def close(held):
        c = rawpg.Raw(h.p.port, h.db, tls=client_tls() if tls else None)
        c.send(rawpg.query("DROP TABLE " + table))
        if held():
            if after:
                c.send(after)
            if notify:
                c.sock.settimeout(0.5)
                try:
                    c.sock.unwrap()   # sends close_notify; predrop need not answer it
                except (OSError, ssl.SSLError, socket.timeout, ValueError):
                    pass
        c.close()
    closed_during_hold(h, oids, table, label, close)


def test(h):
    h.exec("".join("CREATE TABLE %s (a int);" % t for t in TABLES))
    oids = {t: h.oid("public." + t) for t in TABLES}
    h.start_predrop("--hold-timeout-ms", "30000", config=holdlib.tls_config(h))
    libpq_finish(h, oids, "gc_finish", "libpq PQfinish during the hold", "disable")
    libpq_finish(h, oids, "gc_finish_tls", "libpq PQfinish over TLS during the hold", "require")
    raw_close(h, oids, "gc_notify", "TLS close_notify during the hold", tls=True, notify=True)
    raw_close(h, oids, "gc_terminate", "Terminate then FIN during the hold", after=rawpg.terminate())
    raw_close(h, oids, "gc_fin", "FIN behind a pipelined SELECT during the hold", after=rawpg.query("SELECT 1"))
    h.check(h.p.alive(), "predrop is still running")


if __name__ == "__main__":
    holdlib.main(test, "graceful_close")
