"""A PostgreSQL wire-protocol client on a bare socket, for probes that need control no library gives:
where a message is split, what is sent after what, and every byte that comes back.

    c = Raw(port, db)                      # startup as postgres (trust), waits for ReadyForQuery
    c.send(query("SELECT 1") + terminate())
    msgs = c.read_until_ready()            # [(type, body), ...] up to and including 'Z'
    cancel(port, c.pid, c.key)             # a CancelRequest on a connection of its own
    error_fields(body)                     # {'S': 'ERROR', 'C': '57014', ...}

tls: an ssl.SSLContext; the SSLRequest is sent first and the session continues inside TLS.
"""
import socket
import struct
import time


def message(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body


def cstr(s):
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def query(sql):
    return message(b"Q", cstr(sql))


def parse(name, sql):
    return message(b"P", cstr(name) + cstr(sql) + b"\0\0")


def bind(portal, stmt):
    # no parameter formats, no parameters, no result formats
    return message(b"B", cstr(portal) + cstr(stmt) + b"\0\0" + b"\0\0" + b"\0\0")


def describe_portal(name):
    return message(b"D", b"P" + cstr(name))


def execute(portal, max_rows=0):
    return message(b"E", cstr(portal) + struct.pack("!I", max_rows))


def sync():
    return message(b"S")


def terminate():
    return message(b"X")


def error_fields(body):
    """An ErrorResponse or NoticeResponse body as {field type: value}."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return fields


def describe(msgs):
    """Messages as short text: type letters, with the SQLSTATE of each error."""
    out = []
    for t, b in msgs:
        out.append("E[%s]" % error_fields(b).get("C") if t == "E" else t)
    return " ".join(out)


class Raw:
    def __init__(self, port, db, user="postgres", host="127.0.0.1", tls=None, timeout=15.0):
        self.buf = b""
        s = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            s.sendall(struct.pack("!II", 8, 80877103))
            answer = s.recv(1)
            if answer != b"S":
                s.close()
                raise RuntimeError("SSLRequest answered %r" % answer)
            s = tls.wrap_socket(s, server_hostname=host)
        self.sock = s
        params = cstr("user") + cstr(user) + cstr("database") + cstr(db) + b"\0"
        self.send(struct.pack("!II", len(params) + 8, 196608) + params)
        self.pid = self.key = None
        self.startup = self.read_until_ready()
        for t, b in self.startup:
            if t == "R" and struct.unpack("!I", b[:4])[0] != 0:
                raise RuntimeError("authentication requested (%d): the probes expect trust" % struct.unpack("!I", b[:4])[0])
            if t == "E":
                raise RuntimeError("startup refused: %s" % error_fields(b))
            if t == "K":
                self.pid, self.key = struct.unpack("!II", b[:8])

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("no reply in time")
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_msg(self, timeout=15.0):
        """The next message as (type, body); None at end of stream. socket.timeout if none in time."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 5:
                n = struct.unpack("!I", self.buf[1:5])[0]
                if len(self.buf) >= n + 1:
                    t, body = chr(self.buf[0]), self.buf[5:n + 1]
                    self.buf = self.buf[n + 1:]
                    return t, body
            if not self._fill(deadline):
                if self.buf:
                    raise RuntimeError("stream ended inside a message: %r" % self.buf[:40])
                return None

    def read_until_ready(self, count=1, timeout=15.0):
        """Messages up to and including the COUNTth ReadyForQuery (or up to the end of the stream)."""
        deadline = time.monotonic() + timeout
        msgs = []
        while count > 0:
            m = self.read_msg(max(0.001, deadline - time.monotonic()))
            if m is None:
                msgs.append(("EOF", b""))
                break
            msgs.append(m)
            if m[0] == "Z":
                count -= 1
        return msgs

    def read_to_eof(self, timeout=15.0):
        """Every byte until the peer closes; socket.timeout if it does not within TIMEOUT."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except ConnectionResetError:
            pass
        data, self.buf = self.buf, b""
        return data

    def quiet_for(self, seconds):
        """True when nothing at all arrives (and the stream stays open) for SECONDS."""
        self.sock.settimeout(seconds)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return True
        self.buf += chunk
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def cancel(port, pid, key, host="127.0.0.1", timeout=10.0):
    """Send a CancelRequest and wait until the receiver closes that connection (it has acted on it)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(struct.pack("!IIII", 16, 80877102, pid, key))
        while s.recv(64):
            pass
    except (ConnectionResetError, socket.timeout):
        pass
    finally:
        s.close()
