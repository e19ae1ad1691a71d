#!/usr/bin/env python3
"""A dumb byte relay: tcp-relay.py LISTEN_HOST:PORT UPSTREAM_HOST:PORT.

Only for validating the client tests themselves (start-predrop.sh with PREDROP_HARNESS_RELAY=python):
a byte-exact relay must make every "direct vs through predrop" comparison pass, so a failure with it
is a bug in the test, not in predrop. Exits on SIGTERM.
"""
import selectors
import signal
import socket
import sys


def hostport(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


def main():
    listen, upstream = hostport(sys.argv[1]), hostport(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sel = selectors.DefaultSelector()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(512)
    srv.setblocking(False)
    sel.register(srv, selectors.EVENT_READ, None)
    peer = {}
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is srv:
                c, _ = srv.accept()
                try:
                    u = socket.create_connection(upstream)
                except OSError:
                    # Upstream unreachable: this client is closed, the relay goes on serving
                    # (start-predrop.sh's own readiness probe is such a client in the harness test).
                    c.close()
                    continue
                for x in (c, u):
                    x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peer[c], peer[u] = u, c
                sel.register(c, selectors.EVENT_READ, None)
                sel.register(u, selectors.EVENT_READ, None)
                continue
            try:
                data = s.recv(1 << 20)
            except OSError:
                data = b""
            other = peer.get(s)
            if data and other is not None:
                try:
                    other.setblocking(True)
                    other.sendall(data)
                    continue
                except OSError:
                    pass
            for x in (s, other):
                if x is not None and x in peer:
                    sel.unregister(x)
                    peer.pop(x, None)
                    x.close()


if __name__ == "__main__":
    main()
