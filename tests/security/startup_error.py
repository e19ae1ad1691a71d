#!/usr/bin/python3
"""startup_error.py PORT USER DATABASE: send a plaintext StartupMessage and print what the server (or
predrop) answers first: "error SQLSTATE: message" for an ErrorResponse, "auth N" for an
Authentication request, "closed" when the connection ends without a message."""
import socket
import struct
import sys

port, user, db = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = struct.pack("!I", 196608) + b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(struct.pack("!I", len(body) + 4) + body)


def read(n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


head = read(5)
if head is None:
    print("closed")
    sys.exit(0)
kind, length = head[:1], struct.unpack("!I", head[1:])[0]
payload = read(length - 4) or b""
if kind == b"E":
    fields = {f[:1].decode(): f[1:].decode(errors="replace") for f in payload.split(b"\0") if f}
    print("error %s: %s" % (fields.get("C", "?"), fields.get("M", "")))
elif kind == b"R":
    print("auth %d" % struct.unpack("!I", payload[:4])[0])
else:
    print("message %r" % kind)
