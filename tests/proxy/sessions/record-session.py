#!/usr/bin/env python3
"""Records one client session's bytes, both directions, for the decoder's replay tests.

record-session.py LISTEN_PORT UPSTREAM_HOST:PORT OUT_PREFIX

Accepts connections on 127.0.0.1:LISTEN_PORT, relays each to the server unchanged, and writes
every chunk read in either direction of connection n to OUT_PREFIX.n, in the order the relay read
them, as
  'F' or 'B' (frontend: client to server, backend: server to client), u32 big-endian length, bytes.
The order of chunks is the interleaving the decoder is replayed in: a reply is never recorded
before the bytes of the request it answers. An SSLRequest or GSSENCRequest is answered 'N' here, unrecorded, so that every client (pgjdbc
defaults to sslmode=prefer) goes on in plaintext.
Runs until SIGTERM; prints each session's chunk and byte counts when it ends.
"""
import selectors
import signal
import socket
import struct
import sys


ENCRYPTION_REQUESTS = (struct.pack(">II", 8, 80877103), struct.pack(">II", 8, 80877104))


class Recording:
    def __init__(self, path):
        self.out = open(path, "wb")
        self.path = path
        self.open_ends = 2
        self.chunks = {"F": 0, "B": 0}
        self.nbytes = {"F": 0, "B": 0}

    def write(self, direction, data):
        self.out.write(direction.encode() + struct.pack(">I", len(data)) + data)
        self.out.flush()
        self.chunks[direction] += 1
        self.nbytes[direction] += len(data)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    port = int(sys.argv[1])
    up_host, up_port = sys.argv[2].rsplit(":", 1)
    prefix = sys.argv[3]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, None)
    print("listening", flush=True)
    n = 0
    while True:
        for key, _ in sel.select():
            if key.data is None:
                client, _ = srv.accept()
                server = socket.create_connection((up_host, int(up_port)))
                for s in (client, server):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                rec = Recording(f"{prefix}.{n}")
                n += 1
                sel.register(client, selectors.EVENT_READ, ("F", server, rec))
                sel.register(server, selectors.EVENT_READ, ("B", client, rec))
                continue
            direction, other, rec = key.data
            try:
                data = key.fileobj.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                rec.open_ends -= 1
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                if rec.open_ends == 0:
                    rec.out.close()
                    print(f"{rec.path}: frontend {rec.chunks['F']} chunks {rec.nbytes['F']} bytes, "
                          f"backend {rec.chunks['B']} chunks {rec.nbytes['B']} bytes", flush=True)
                continue
            if direction == "F" and rec.chunks["F"] == 0 and data in ENCRYPTION_REQUESTS:
                key.fileobj.sendall(b"N")
                continue
            rec.write(direction, data)
            try:
                other.sendall(data)
            except OSError:
                pass


if __name__ == "__main__":
    main()
