#!/usr/bin/env python3
"""Direct TLS (libpq 17's sslnegotiation=direct) without libpq: a TLS ClientHello as the first bytes,
then the startup packet inside TLS.

  direct_tls.py HOST PORT CAFILE MODE
    MODE alpn      ALPN "postgresql": prints the session's first answers and a query's result
    MODE no-alpn   no ALPN: prints how the connection ended (PostgreSQL 17 closes it, sending nothing)
    MODE plain-tls (predrop/the server has no TLS): prints how the connection ended

The output is one line per fact, so the shell test can compare it with what it expects.
"""
import socket
import ssl
import struct
import sys


def startup(user, database):
    body = struct.pack("!I", 196608)
    for k, v in (("user", user), ("database", database)):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def read_message(sock):
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        if not chunk:
            return None, None
        head += chunk
    kind, length = head[:1], struct.unpack("!I", head[1:])[0]
    body = b""
    while len(body) < length - 4:
        chunk = sock.recv(length - 4 - len(body))
        if not chunk:
            return None, None
        body += chunk
    return kind, body


def until_ready(sock, out):
    while True:
        kind, body = read_message(sock)
        if kind is None:
            out.append("connection closed")
            return False
        if kind == b"R":
            out.append("authentication %d" % struct.unpack("!I", body[:4])[0])
        elif kind == b"E":
            fields = dict((f[:1], f[1:].decode()) for f in body.split(b"\0") if f)
            out.append("error %s %s" % (fields.get(b"C"), fields.get(b"M")))
            return False
        elif kind == b"D":
            out.append("row %s" % body[6:].decode())
        elif kind == b"Z":
            out.append("ready %s" % body.decode())
            return True


def ended(conn):
    try:
        data = conn.recv(1)
        return "closed, nothing sent" if not data else "sent %r" % data
    except (ssl.SSLError, ConnectionResetError, OSError) as e:
        return "closed (%s)" % type(e).__name__


def main():
    host, port, cafile, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    if mode == "alpn":
        ctx.set_alpn_protocols(["postgresql"])
    raw = socket.create_connection((host, port), timeout=15)
    try:
        conn = ctx.wrap_socket(raw)
    except (ssl.SSLError, ConnectionResetError, OSError) as e:
        print("handshake refused (%s)" % type(e).__name__)
        return
    print("alpn %s" % conn.selected_alpn_protocol())
    if mode != "alpn":
        conn.sendall(startup("postgres", "postgres"))
        print(ended(conn))
        return
    conn.sendall(startup("postgres", "postgres"))
    out = []
    if until_ready(conn, out):
        q = b"SELECT 'direct tls ok'\0"
        conn.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)
        until_ready(conn, out)
        conn.sendall(b"X\0\0\0\4")
    print("\n".join(l for l in out if not l.startswith("authentication") or l == "authentication 0"))


if __name__ == "__main__":
    main()
