#!/usr/bin/env python3
"""RSS of a proxy holding N idle client connections (a fresh process each run, VmRSS and RssAnon
sampled a few seconds after each step).

    idle_clients.py --port P --pid PID [--steps 0,250,500,1000] [--settle 3] [--label predrop] [--cap 240]

Opens TCP connections to 127.0.0.1:P and completes the v3 startup handshake on each (StartupMessage
user/database, trust auth expected) up to ReadyForQuery, then keeps them idle. After each step it waits
--settle seconds and samples VmRSS and RssAnon of PID from /proc/PID/status. Prints one TSV line per
step:  rss <label> <clients> <VmRSS kB> <RssAnon kB>  and finally sends Terminate on every socket.
Standard library only; needs an fd limit above the largest step.
"""
import argparse
import socket
import struct
import sys
import time


def startup(port, user, database, deadline):
    s = socket.create_connection(("127.0.0.1", port), timeout=max(1.0, deadline - time.time()))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = struct.pack("!I", 196608)
    for k, v in (("user", user), ("database", database), ("application_name", "idle_clients")):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    s.sendall(struct.pack("!I", len(body) + 4) + body)
    buf = b""
    while True:
        while len(buf) >= 5:
            typ = buf[0:1]
            (ln,) = struct.unpack("!I", buf[1:5])
            if len(buf) < 1 + ln:
                break
            payload = buf[5:1 + ln]
            buf = buf[1 + ln:]
            if typ == b"Z":
                return s
            if typ == b"E":
                raise RuntimeError("server error during startup: %r" % payload)
            if typ == b"R" and struct.unpack("!I", payload[:4])[0] != 0:
                raise RuntimeError("authentication requested (code %d); the bench needs trust"
                                   % struct.unpack("!I", payload[:4])[0])
        if time.time() > deadline:
            raise RuntimeError("time cap reached during startup")
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed during startup")
        buf += chunk


def rss(pid):
    vm = anon = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                vm = int(line.split()[1])
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1])
    return vm, anon


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--steps", default="0,250,500,1000")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--label", default="proxy")
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--database", default="postgres")
    ap.add_argument("--cap", type=float, default=240.0)
    a = ap.parse_args()
    deadline = time.time() + a.cap
    socks = []
    rc = 0
    try:
        for step in (int(x) for x in a.steps.split(",")):
            t0 = time.time()
            while len(socks) < step:
                socks.append(startup(a.port, a.user, a.database, deadline))
            took = time.time() - t0
            time.sleep(a.settle)
            vm, anon = rss(a.pid)
            print("rss\t%s\t%d\t%d\t%d" % (a.label, len(socks), vm, anon), flush=True)
            print("  %s: %d clients, VmRSS %d kB, RssAnon %d kB (handshakes took %.2f s)"
                  % (a.label, len(socks), vm, anon, took), file=sys.stderr, flush=True)
    except Exception as e:  # report what was reached; the caller prints it
        print("  %s: stopped at %d clients: %s" % (a.label, len(socks), e), file=sys.stderr, flush=True)
        rc = 1
    finally:
        for s in socks:
            try:
                s.sendall(b"X\0\0\0\4")
                s.close()
            except OSError:
                pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
