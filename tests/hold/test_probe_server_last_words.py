#!/usr/bin/python3
"""Probe: when the server ends a session, its words are the last the client hears.

pg_terminate_backend of an idle session and of a busy one (pg_sleep), and idle_session_timeout: on
a bare socket, every byte the client receives through predrop, up to EOF, is what it receives direct
(the server's FATAL ErrorResponse, then the end of the stream: nothing appended). Then the error
objects of real client libraries, direct vs through predrop: psycopg2 (class, pgcode, text),
node-postgres (tests/hold/node_last_words.cjs: every 'error'/'end' event and the query's rejection)
and pgjdbc (tests/hold/JdbcLastWords.java: class, SQLState, message). Last, a server that vanishes
without a word (the byte relay in front of it killed): the client sees the bare end of the stream,
as it does direct.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time

import psycopg2

import holdlib
import rawpg

sys.path.insert(0, os.path.join(holdlib.SOURCE, "tests", "faults"))
import faultlib  # noqa: E402

JAR = "/usr/share/java/postgresql.jar"
NODE_MODULES = os.path.join(holdlib.SOURCE, "tests", "clients", "node", "node_modules")


def backend_pid(c):
    c.send(rawpg.query("SELECT pg_backend_pid()"))
    for t, b in c.read_until_ready():
        if t == "D":
            n = struct.unpack("!I", b[2:6])[0]
            return int(b[6:6 + n])
    raise RuntimeError("no pg_backend_pid() row")


def wait_active(h, pid):
    h.wait_for(lambda: h.q("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (pid,))[0][0],
               timeout=10, interval=0.05)


def raw_last_words(h, port, how):
    """Every byte after the session is ended, up to EOF."""
    c = rawpg.Raw(port, h.db)
    pid = backend_pid(c)
    if how == "idle":
        h.q("SELECT pg_terminate_backend(%s)", (pid,))
    elif how == "busy":
        c.send(rawpg.query("SELECT pg_sleep(30)"))
        wait_active(h, pid)
        h.q("SELECT pg_terminate_backend(%s)", (pid,))
    else:
        c.send(rawpg.query("SET idle_session_timeout = '300ms'"))
        c.read_until_ready()
    try:
        data = c.read_to_eof(timeout=10)
    finally:
        c.close()
    return data


def show(data):
    out, i = [], 0
    while i + 5 <= len(data):
        n = struct.unpack("!I", data[i + 1:i + 5])[0]
        t, body = chr(data[i]), data[i + 5:i + 1 + n]
        out.append("%s%s" % (t, rawpg.error_fields(body) if t in "EN" else ""))
        i += n + 1
    if i < len(data):
        out.append("+%d stray bytes" % (len(data) - i))
    return "; ".join(out) or "nothing"


def raw_cases(h):
    for how in ("idle", "busy", "idle_session_timeout"):
        direct = raw_last_words(h, h.port, how)
        through = raw_last_words(h, h.p.port, how)
        print("# %s: direct  %s\n# %s: predrop %s" % (how, show(direct), how, show(through)))
        # A busy session has its RowDescription out before the FATAL: the server's last words end it.
        h.check(show(direct).split("; ")[-1].startswith("E") and through == direct,
                "bare socket, session ended (%s): through predrop the same bytes as direct, then EOF" % how,
                "direct %s | predrop %s" % (show(direct), show(through)))


def psycopg2_error(h, port, how):
    c = psycopg2.connect(h.conninfo(port=port, sslmode="disable"))   # predrop's client leg is plaintext here
    c.autocommit = True
    cur = c.cursor()
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    if how == "busy":
        threading.Timer(0.0, lambda: (wait_active(h, pid), h.q("SELECT pg_terminate_backend(%s)", (pid,)))).start()
        sql = "SELECT pg_sleep(30)"
    else:
        if how == "idle":
            h.q("SELECT pg_terminate_backend(%s)", (pid,))
        else:
            cur.execute("SET idle_session_timeout = '300ms'")
        time.sleep(1.2)
        sql = "SELECT 1"
    try:
        cur.execute(sql)
        got = ("no error",)
    except psycopg2.Error as e:
        got = (type(e).__module__ + "." + type(e).__name__, e.pgcode, str(e))
    got += ("closed=%s" % c.closed,)
    c.close()
    return got


def psycopg2_cases(h):
    for how in ("idle", "busy", "idle_session_timeout"):
        direct, through = psycopg2_error(h, h.port, how), psycopg2_error(h, h.p.port, how)
        print("# psycopg2 %s: direct  %r\n# psycopg2 %s: predrop %r" % (how, direct, how, through))
        h.check(direct == through, "psycopg2, session ended (%s): the same error as direct" % how,
                "direct %r | predrop %r" % (direct, through))


def node_cases(h):
    if not shutil.which("node"):
        return h.fail("node is not installed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(NODE_MODULES, "pg")):
        return h.fail("%s/pg missing: run tests/clients/test_node.sh (npm ci) first" % NODE_MODULES)
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    runs = {}
    for label, port in (("direct", h.port), ("predrop", h.p.port)):
        r = subprocess.run(["node", os.path.join(holdlib.HERE, "node_last_words.cjs"), str(port), str(h.port), h.db],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        print("# node-postgres %s (exit %d):\n%s" % (label, r.returncode, "\n".join("#   " + l for l in r.stdout.splitlines())))
        h.check(r.returncode == 0, "node-postgres %s: every scenario ran" % label)
        runs[label] = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("[")]
    for (name, direct), (_, through) in zip(runs["direct"], runs["predrop"]):
        h.check(direct == through, "node-postgres, session ended (%s): the same events and errors as direct" % name,
                "direct %s | predrop %s" % (direct, through))
    h.check(len(runs["direct"]) == 3 and len(runs["predrop"]) == 3, "node-postgres: three scenarios each way")


def jdbc_cases(h):
    if not shutil.which("java") or not os.path.exists(JAR):
        return h.fail("java or %s missing (scripts/install-deps.sh installs them)" % JAR)
    runs = {}
    for label, port in (("direct", h.port), ("predrop", h.p.port)):
        r = subprocess.run(["java", "-cp", JAR, os.path.join(holdlib.HERE, "JdbcLastWords.java"), "127.0.0.1", str(port),
                            str(h.port), h.db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        print("# pgjdbc %s (exit %d):\n%s" % (label, r.returncode, "\n".join("#   " + l for l in r.stdout.splitlines())))
        h.check(r.returncode == 0, "pgjdbc %s: every scenario ran" % label)
        runs[label] = [l for l in r.stdout.splitlines() if l.split(":")[0] in ("idle", "busy", "idle_session_timeout")]
    h.check(len(runs["direct"]) == 9 and runs["direct"] == runs["predrop"],
            "pgjdbc, session ended (idle, busy, idle_session_timeout): the same exceptions as direct",
            "\n  direct  %s\n  predrop %s" % ("\n          ".join(runs["direct"]), "\n          ".join(runs["predrop"])))


def vanished(h):
    """The server's side of the connection closes without a word: a byte relay in front of it is killed."""
    got = {}
    for label in ("direct", "predrop"):
        relay = faultlib.Relay(holdlib.free_port(), h.port)
        relay.start()
        p = None
        try:
            port = relay.port
            if label == "predrop":
                p = h.start_predrop(capture=False, store=False, admin=False,
                                    env={"PREDROP_UPSTREAM": "127.0.0.1:%d" % relay.port})
                port = p.port
            c = rawpg.Raw(port, h.db)
            backend_pid(c)
            relay.stop()
            try:
                got[label] = c.read_to_eof(timeout=10)
            finally:
                c.close()
        finally:
            relay.stop()
            if p is not None:
                h.stop_predrop(p)
    print("# server vanished: direct %s | predrop %s" % (show(got["direct"]), show(got["predrop"])))
    h.check(got["predrop"] == got["direct"], "server vanished without a word: through predrop the same as direct",
            "direct %s | predrop %s" % (show(got["direct"]), show(got["predrop"])))


def test(h):
    main = h.start_predrop("--hold-timeout-ms", "10000")
    raw_cases(h)
    psycopg2_cases(h)
    node_cases(h)
    jdbc_cases(h)
    vanished(h)
    h.p = main
    h.check(main.alive(), "predrop is still running")


if __name__ == "__main__":
    holdlib.main(test, "last_words")
