#!/usr/bin/env python3
"""Malformed and unusual startups: what predrop sends is what the server sends, byte for byte up to EOF.

Each case is sent direct and through predrop, and everything received until the connection closes
is compared. Direct is the cluster's Unix socket: there the server offers neither SSL nor GSSAPI
encryption, as predrop without `tls` does not (over TCP, Debian's server, built with GSSAPI,
answers a GSSENCRequest with 'G', which a proxy that does not speak GSSAPI cannot honestly give).

The same is asked inside TLS (an SSLRequest answered 'S', then the case through TLS), with predrop
given `tls` and direct being the cluster's TCP port, where the server has `ssl = on`; there the
closing compared includes the TLS close_notify the server sends before it closes.

A case that goes on into a session (a split startup, protocol 3.5) is compared up to and including
the server's first authentication message, then ended with a Terminate.

Where the server only logs (predrop then sends nothing too), predrop logs a warning naming the
client's address and counts the case in predrop_protocol_errors_total{phase="startup"}.
"""
import os
import re
import socket
import ssl
import subprocess
import struct
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from predrop_harness import Predrop  # noqa: E402

PGPORT = int(os.environ["PGPORT"])
UNIX = os.path.join(os.environ["PG_CLUSTER_DIR"], ".s.PGSQL.%d" % PGPORT)
WORK = os.environ.get("PREDROP_TEST_WORKDIR", tempfile.gettempdir())


def u32(n):
    return struct.pack("!I", n)


def startup(params, proto=0x30000):
    body = u32(proto) + b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params) + b"\0"
    return u32(len(body) + 4) + body


SSL = u32(8) + u32(80877103)
GSS = u32(8) + u32(80877104)
USER = [("user", "postgres"), ("database", "postgres")]
GOOD = startup(USER)
CLOSE, PAUSE = "close", "pause"

# name: (steps, silent: the server only logs, so predrop counts it)
CASES = {
    "length 0": ([u32(0)], True),
    "length 4": ([u32(4)], True),
    "length 7, and 3 bytes": ([u32(7) + b"\0\0\0"], True),
    "length 10,005 (over 10,000 after the length word)": ([u32(10005) + b"\0" * 64], True),
    "length 2^31-1": ([u32(0x7FFFFFFF)], True),
    "a Terminate before the startup": ([b"X" + u32(4) + GOOD], True),
    "an HTTP request": ([b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"], True),
    "closed after 3 bytes": ([u32(100)[:3], CLOSE], True),
    "closed inside the startup packet": ([GOOD[:20], CLOSE], True),
    "protocol 4.0": ([startup(USER, 4 << 16)], False),
    "protocol 2.0 (the server answers in protocol 2's format)": ([startup(USER, 2 << 16)], False),
    "protocol 0.0": ([startup(USER, 0)], False),
    "protocol 65535.65535": ([startup(USER, 0xFFFFFFFF)], False),
    "a CancelRequest 4 bytes short": ([u32(12) + u32(80877102) + u32(1)], False),
    "a CancelRequest 4 bytes long": ([u32(20) + u32(80877102) + u32(1) + u32(2) + u32(3)], False),
    "a GSSENCRequest, then closed": ([GSS, PAUSE, CLOSE], False),
    "a GSSENCRequest, an SSLRequest, then a startup": ([GSS, PAUSE, SSL, PAUSE, GOOD], False),
    "an SSLRequest, a GSSENCRequest, then a startup": ([SSL, PAUSE, GSS, PAUSE, GOOD], False),
    "an SSLRequest of 12 bytes": ([u32(12) + u32(80877103) + u32(0), PAUSE, GOOD], False),
    "a startup with no user": ([startup([("database", "postgres")])], False),
    "a startup with an empty user": ([startup([("user", ""), ("database", "postgres")])], False),
    "a startup with an unterminated parameter list": ([u32(8 + 13) + u32(0x30000) + b"user\0postgres"], False),
    "a startup with a name and no value": ([u32(8 + 6) + u32(0x30000) + b"user\0\0"], False),
    "a startup split over many reads": ([bytes([b]) for b in GOOD], False),
    "protocol 3.5 (the server negotiates it down)": ([startup(USER, 0x30005)], False),
    # A negotiation repeated: the server's refusal of another unknown protocol, renamed to this one.
    "an SSLRequest twice": ([SSL, PAUSE, SSL], False),
    "a GSSENCRequest twice": ([GSS, PAUSE, GSS], False),
    "SSLRequest, GSSENCRequest, SSLRequest": ([SSL, PAUSE, GSS, PAUSE, SSL], False),
    "GSSENCRequest, SSLRequest, GSSENCRequest": ([GSS, PAUSE, SSL, PAUSE, GSS], False),
}

# The answer predrop gives itself, to an SSLRequest with bytes behind it: the server's code,
# message, detail and closing, without the server's source file, line and function fields (F, L,
# R), which it cannot ask the server for (the server would read those bytes too, through TLS
# where predrop's upstream leg has it). Compared field by field.
OWN_ANSWERS = {
    "an SSLRequest with bytes behind it": [SSL + b"xx"],
}


def exchange(connect, steps):
    """Sends the steps; returns (the negotiation answers and the bytes received after them, how it ended)."""
    s = connect()
    s.settimeout(5)
    return converse(s, steps, "EOF")


def converse(s, steps, eof):
    """Sends the steps on s, reads until the end (EOF, reported as `eof`) or the first
    authentication message; closes s. Returns (answers and bytes received, how it ended)."""
    answers, got = b"", b""
    try:
        for step in steps:
            if step == CLOSE:
                s.shutdown(socket.SHUT_WR)
            elif step == PAUSE:
                answers += s.recv(1)   # the one-byte answer to a negotiation
            else:
                s.sendall(step)
                if len(steps) > 8:
                    time.sleep(0.002)   # a read each: the relay sees the packet in pieces
        ending = "timeout"
        while True:
            auth = first_auth_end(got)
            if auth is not None:
                got = got[:auth]
                s.sendall(b"X" + u32(4))
                ending = "authentication reached"
                break
            b = s.recv(65536)
            if not b:
                ending = eof
                break
            got += b
    except socket.timeout:
        ending = "timeout"
    except ssl.SSLEOFError:
        ending = "EOF without close_notify"
    except (ConnectionResetError, BrokenPipeError):
        ending = "reset"
    finally:
        s.close()
    return answers + got, ending

# Cases sent inside TLS, after an SSLRequest answered 'S': (steps, silent).
TLS_CASES = {
    "inside TLS, an SSLRequest": ([SSL], False),
    "inside TLS, a GSSENCRequest": ([GSS], False),
    "inside TLS, length 4": ([u32(4)], True),
    "inside TLS, a startup with no user": ([startup([("database", "postgres")])], False),
    "inside TLS, protocol 4.0": ([startup(USER, 4 << 16)], False),
    "inside TLS, a startup split over many reads": ([bytes([b]) for b in GOOD], False),
}


def exchange_tls(connect, steps, request=SSL):
    """An SSLRequest, the TLS handshake, then the steps through TLS; returns (the answer to the
    SSLRequest and the bytes received through TLS, how it ended: a TLS close_notify or not)."""
    raw = connect()
    raw.settimeout(5)
    raw.sendall(request)
    answer = raw.recv(1)
    if answer != b"S":
        raw.close()
        return answer, "no TLS"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        s = ctx.wrap_socket(raw, suppress_ragged_eofs=False)
    except (ssl.SSLError, OSError) as e:
        raw.close()
        return answer, "no TLS handshake: %s" % e
    got, ending = converse(s, steps, "EOF after close_notify")
    return answer + got, ending


def first_auth_end(data):
    """The end offset of the first AuthenticationRequest ('R') in a v3 message stream, if whole."""
    at = 0
    while len(data) - at >= 5:
        t = data[at:at + 1]
        n = struct.unpack("!I", data[at + 1:at + 5])[0]
        if n < 4 or n > 1 << 20:
            return None   # not a v3 stream (protocol 2's error)
        if len(data) - at < 1 + n:
            return None
        at += 1 + n
        if t == b"R":
            return at
    return None


def direct():
    s = socket.socket(socket.AF_UNIX)
    s.connect(UNIX)
    return s


def fields(data):
    """(bytes before the ErrorResponse, {field: value} without F/L/R, bytes after it)."""
    at = data.find(b"E\0")
    if at < 0:
        return data, None, b""
    n = struct.unpack("!I", data[at + 1:at + 5])[0]
    body = data[at + 5:at + 1 + n]
    out = {}
    for f in body.split(b"\0"):
        if f and f[:1] not in (b"F", b"L", b"R"):
            out[f[:1].decode()] = f[1:].decode()
    return data[:at], out, data[at + 1 + n:]


def metric(admin, name, labels):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5).read().decode()
    m = re.search(r"^%s\{%s\} (\d+)$" % (re.escape(name), re.escape(labels)), body, re.M)
    return int(m.group(1)) if m else None


def main():
    failures = []

    def check(name, ok, why):
        print("%s: %s" % ("ok" if ok else "FAIL", name) + ("" if ok else "\n    " + why))
        if not ok:
            failures.append(name)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        admin = probe.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="startup-table.", dir=WORK)

    def compare(cases, talk, to_server, to_predrop, server_said=b""):
        """Each case direct and through predrop, compared; the silent ones counted by predrop."""
        for name, (steps, silent) in cases.items():
            want = talk(to_server, steps)
            before = metric(admin, "predrop_protocol_errors_total", 'phase="startup"')
            got = talk(to_predrop, steps)
            check(name, want[0].startswith(server_said) and got == want, "direct: %r\n    predrop: %r" % (want, got))
            if silent:
                # The counter is written before the close the client saw, but by another thread.
                for _ in range(50):
                    after = metric(admin, "predrop_protocol_errors_total", 'phase="startup"')
                    if after != before:
                        break
                    time.sleep(0.02)
                check(name + ": counted", before is not None and after == before + 1,
                      "predrop_protocol_errors_total{phase=\"startup\"} %r -> %r" % (before, after))
    with Predrop(workdir, "--admin", "127.0.0.1:%d" % admin) as p:
        def via():
            return socket.create_connection(("127.0.0.1", p.port))

        compare(CASES, exchange, direct, via)

        for name, steps in OWN_ANSWERS.items():
            want = exchange(direct, steps)
            got = exchange(via, steps)
            w, g = fields(want[0]), fields(got[0])
            check(name + " (fields)", w[1] is not None and (w, want[1]) == (g, got[1]),
                  "direct: %r %s\n    predrop: %r %s" % (w, want[1], g, got[1]))

        log = p.log_text()
        check("the silent cases are logged as warnings with the client's address",
              re.search(r"warn.*client 127\.0\.0\.1.*invalid length of startup packet", log) is not None
              and re.search(r"warn.*client 127\.0\.0\.1.*incomplete startup packet", log) is not None,
              "predrop's log:\n" + log[-3000:])
        # A normal session still works.
        ok = exchange(via, [GOOD])
        check("a normal startup after all of them", ok[1] == "authentication reached", repr(ok))
        check("predrop is alive", p.alive(), "predrop exited")

    # Inside TLS: predrop with a certificate of its own, direct over TCP to the server's.
    pki = tempfile.mkdtemp(prefix="startup-table-tls.", dir=WORK)
    subprocess.run(["openssl", "req", "-new", "-x509", "-days", "2", "-nodes", "-subj", "/CN=localhost",
                    "-keyout", pki + "/server.key", "-out", pki + "/server.crt"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cfg = os.path.join(pki, "tls.yaml")
    with open(cfg, "w") as f:
        f.write("tls:\n  cert_file: %s/server.crt\n  key_file: %s/server.key\n" % (pki, pki))
    with Predrop(workdir, "--admin", "127.0.0.1:%d" % admin, "--config", cfg) as p:
        def direct_tcp():
            return socket.create_connection(("127.0.0.1", PGPORT))

        def via_tls():
            return socket.create_connection(("127.0.0.1", p.port))

        compare(TLS_CASES, exchange_tls, direct_tcp, via_tls, server_said=b"S")
        # Answered 'S', the server completes the handshake before it refuses the bytes, through TLS.
        want = exchange_tls(direct_tcp, [], SSL + b"xx")
        got = exchange_tls(via_tls, [], SSL + b"xx")
        w, g = fields(want[0]), fields(got[0])
        if want[1].startswith("no TLS handshake"):
            # PostgreSQL 17 closes at once instead (its direct-SSL code checks its buffer before the
            # handshake); predrop answers as 15 and 16 do. Either way the injected bytes are never
            # served: nothing but the refusal comes back.
            print("note: this server closed before the handshake (PostgreSQL 17); predrop refuses after it, as 15 does")
            check("an SSLRequest with bytes behind it, answered 'S': refused, never served",
                  w[0] == b"S" and g[0] == b"S" and g[1] is not None and g[1].get("C") == "08P01" and g[2] == b"",
                  "direct: %r %s\n    predrop: %r %s" % (w, want[1], g, got[1]))
        else:
            check("an SSLRequest with bytes behind it, answered 'S' (fields)",
                  w[0] == b"S" and w[1] is not None and (w, want[1]) == (g, got[1]),
                  "direct: %r %s\n    predrop: %r %s" % (w, want[1], g, got[1]))
        check("predrop with TLS is alive", p.alive(), "predrop exited")

    if failures:
        print("startup_table: %d check(s) FAILED" % len(failures))
        return 1
    print("startup_table: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
