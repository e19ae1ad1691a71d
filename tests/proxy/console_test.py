#!/usr/bin/python3
"""The console (proxy/console.cpp, cli/console_commands.cpp): a client that asks predrop for
console.database reaches predrop itself and nothing is relayed. Proves, with psql, psycopg2,
node-postgres and a bare socket:

- admission: the server authenticates the user on its postgres database (its own FATAL 28P01 for a
  wrong SCRAM password, 28000 for an unknown role; SCRAM and md5 relayed), then predrop admits members
  of console.role (directly or through another role), the users of console.users, and superusers
  while the role exists; anyone else gets FATAL 42501 with a DETAIL naming the role, and the
  connection closes before any ReadyForQuery;
- SHOW SESSIONS: every session with its user, database, application_name, address, tls, upstream,
  state (idle, active, idle in transaction, idle in transaction (aborted), holding, console), bytes
  and holds; all columns text; commands are case-insensitive and take a trailing ';';
- SHOW HOLDS: a DROP held by a locked store, with the ledger's statement, its table and a growing
  waited_ms; it completes once the lock goes, and SHOW HOLDS is empty again;
- SHOW STATS is /metrics; SHOW CONFIG has every key with its reload behaviour and no password of
  capture.conninfo or store.conninfo;
- SHOW QUARANTINE, UNDROP (also AS and IN), SHOW AGES and SHOW SNAPSHOTS answer as `predrop quarantine
  list`, `predrop undrop` and `predrop ages` do (compared with the CLI's JSON); a quarantined table
  comes back with its rows;
- RELOAD: applies a changed file (SHOW CONFIG and console.users take the new values), refuses a broken
  file with F0000 and keeps the old values, and refuses with F0000 without --config;
- errors: 42601 with a HINT listing the commands for anything else (SELECT included: nothing is
  relayed) and for arguments a command does not take; the extended protocol is refused with 0A000
  and the connection stays usable (node-postgres);
- console.database elsewhere (and "" after SIGHUP): a real database named predrop is relayed;
- every command is logged with its user; TLS (sslmode=require) works and SHOW SESSIONS says tls on;
- the SIGTERM drain: an open console keeps answering and lists the draining session, new connections
  are refused (the listener is closed), and when the drain ends the console gets FATAL 57P01 and is
  closed.

Uses tests/hold/holdlib.py (its own database, store and predrop instances) and roles of its own,
named after its database (roles are cluster-wide). scram_user and md5_user come from
scripts/test-roles.sh; node-postgres from tests/clients/node/node_modules.
"""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
import holdlib  # noqa: E402
import rawpg  # noqa: E402

SESSION_COLUMNS = ["session", "user", "database", "application_name", "client_addr", "tls", "upstream", "state",
                   "connected_s", "bytes_in", "bytes_out", "holds"]
HOLD_COLUMNS = ["session", "user", "database", "application_name", "client_addr", "statement", "tables", "waited_ms"]
QUARANTINE_FIELDS = ["database", "id", "schema", "table", "quarantine_table", "bytes", "dropped_at", "dropped_by",
                     "age_s", "expires_in_s"]
AGES_FIELDS = ["database", "schema", "table", "since", "since_from", "at_least", "age_s", "versions_in_window",
               "shapes_in_window", "last_seen"]
COMMANDS = ["SHOW HOLDS", "SHOW SESSIONS", "SHOW STATS", "SHOW CONFIG", "SHOW QUARANTINE", "SHOW SNAPSHOTS",
            "SHOW AGES", "RELOAD", "UNDROP"]
TEXT_OID = 25
NODE_MODULES = os.path.join(holdlib.SOURCE, "tests", "clients", "node", "node_modules")
SCRAM_PASSWORD, MD5_PASSWORD = "scram-secret", "md5-secret"   # scripts/test-roles.sh
CAPTURE_SECRET, STORE_SECRET = "capture-sekrit-4711", "store-sekrit-4712"


class ConsoleHold(holdlib.Hold):
    """A Hold with the roles of the console's cases: admin (console.role, no login), member (in admin),
    nested (in admin through mid), outsider (in nothing), listed (in nothing, named in console.users)."""

    def __init__(self, name):
        super().__init__(name)
        self.role = {r: "%s_%s" % (self.db, r) for r in ("admin", "mid", "member", "nested", "outsider", "listed")}
        self.made_predrop_db = False
        self.drop_roles()
        r = self.role
        self._admin_conn("CREATE ROLE %s NOLOGIN; CREATE ROLE %s NOLOGIN" % (r["admin"], r["mid"]))
        for who in ("member", "nested", "outsider", "listed"):
            self._admin_conn("CREATE ROLE %s LOGIN" % r[who])
        self._admin_conn("GRANT %s TO %s; GRANT %s TO %s; GRANT %s TO %s"
                         % (r["admin"], r["member"], r["admin"], r["mid"], r["mid"], r["nested"]))

    def drop_roles(self):
        for role in reversed(list(self.role.values())):
            self._admin_conn("DROP ROLE IF EXISTS %s" % role)

    def cleanup(self):
        super().cleanup()
        try:
            self.drop_roles()
            if self.made_predrop_db:
                self._admin_conn("DROP DATABASE IF EXISTS predrop WITH (FORCE)")
        except Exception as e:  # noqa: BLE001
            print("# cleanup: %s" % e)


class Instance:
    """One predrop of the test: its port, pid, log, admin address and config file."""

    def __init__(self, h, p):
        self.p, self.port, self.pid, self.admin = p, p.port, p.pid, h.admin
        args = p.extra_args
        self.config = args[args.index("--config") + 1] if "--config" in args else None

    def log(self):
        return self.p.log_text()

    def metrics(self):
        with urllib.request.urlopen("http://%s/metrics" % self.admin, timeout=5) as r:
            return r.read().decode()


def start(h, config=None, capture=False, store=False, env=None):
    return Instance(h, h.start_predrop(capture=capture, store=store, config=config, env=env))


# ---- clients ----

class Result:
    def __init__(self, cols, rows, tag, types):
        self.cols, self.rows, self.tag, self.types = cols, rows, tag, types

    def __repr__(self):
        return "tag=%s cols=%s rows=%s" % (self.tag, self.cols, self.rows[:20])


def cconnect(port, user, db="predrop", **kw):
    """psycopg2 on a console, in autocommit (case_psycopg2_default tries it as it comes)."""
    c = psycopg2.connect(host="127.0.0.1", port=port, dbname=db, user=user, connect_timeout=10, **kw)
    c.autocommit = True
    return c


def run(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        if cur.description is None:
            return Result([], [], cur.statusmessage, [])
        cols = [d.name for d in cur.description]
        return Result(cols, [dict(zip(cols, r)) for r in cur.fetchall()], cur.statusmessage,
                      [d.type_code for d in cur.description])


def run_error(conn, sql):
    """The psycopg2.Error SQL raises, or None when the console answered it."""
    try:
        run(conn, sql)
    except psycopg2.Error as e:
        return e
    return None


def describe_error(e):
    if e is None:
        return "no error"
    return "%s %s | DETAIL %s | HINT %s" % (e.pgcode, e.diag.message_primary, e.diag.message_detail,
                                          e.diag.message_hint)


def cpsql(port, sql, user, db="predrop", password=None, conn_extra="", timeout=60):
    """psql on a console: unaligned, tab-separated, verbose errors (with SQLSTATE). Returns holdlib.Run."""
    env = dict(os.environ)
    env.pop("PGPASSWORD", None)
    if password:
        env["PGPASSWORD"] = password
    conninfo = "host=127.0.0.1 port=%d dbname=%s user=%s connect_timeout=10 %s" % (port, db, user, conn_extra)
    cmd = ["psql", "-X", "-A", "-F", "\t", "-P", "footer=off", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
           "-d", conninfo, "-c", sql]
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)
    return holdlib.Run(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)


def psql_rows(out):
    """psql -A -F tab output as (header, [dict])."""
    lines = [l for l in out.splitlines() if l != ""]
    if not lines:
        return [], []
    head = lines[0].split("\t")
    return head, [dict(zip(head, l.split("\t"))) for l in lines[1:]]


class Bare(rawpg.Raw):
    """A startup on a bare socket (no password: trust users), its reply read as it comes."""

    def __init__(self, port, user, db, timeout=15.0):  # noqa: super().__init__ would insist on admission
        self.buf = b""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        params = rawpg.cstr("user") + rawpg.cstr(user) + rawpg.cstr("database") + rawpg.cstr(db) + b"\0"
        self.send(struct.pack("!II", len(params) + 8, 196608) + params)
        self.startup = self.read_until_ready(timeout=timeout)


def startup_reply(port, user, db):
    """Every message the startup of USER for DB gets, up to ReadyForQuery or the end of the stream."""
    b = Bare(port, user, db)
    msgs = b.startup
    if msgs[-1][0] == "Z":
        b.send(rawpg.terminate())
    b.close()
    return msgs


def last_error(msgs):
    errs = [rawpg.error_fields(body) for t, body in msgs if t == "E"]
    return errs[-1] if errs else {}


def rows_of(msgs):
    """RowDescription and DataRows of raw messages as (columns, [dict])."""
    cols, rows = [], []
    for t, b in msgs:
        if t == "T":
            n, pos = struct.unpack("!H", b[:2])[0], 2
            for _ in range(n):
                end = b.index(b"\0", pos)
                cols.append(b[pos:end].decode())
                pos = end + 1 + 18
        elif t == "D":
            n, pos, vals = struct.unpack("!H", b[:2])[0], 2, []
            for _ in range(n):
                ln = struct.unpack("!i", b[pos:pos + 4])[0]
                pos += 4
                vals.append(None if ln < 0 else b[pos:pos + ln].decode())
                pos += max(ln, 0)
            rows.append(dict(zip(cols, vals)))
    return cols, rows


def same_text(j, t):
    """A JSON value of the CLI and the console's text for it."""
    if j is None:
        return t is None or t == ""
    if isinstance(j, bool):
        return t in (("true", "t") if j else ("false", "f"))
    if isinstance(j, (int, float)):
        try:
            return float(t) == float(j)
        except (TypeError, ValueError):
            return False
    if isinstance(j, (list, dict)):
        try:
            return json.loads(t) == j
        except (TypeError, ValueError):
            return False
    return t == j


def number(t):
    try:
        return float(t)
    except (TypeError, ValueError):
        return None


def cli_json(h, *args):
    r = subprocess.run([h.bin, *args, "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    if r.returncode != 0:
        h.fail("predrop %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
        return []
    return json.loads(r.stdout)


def capture_conninfo_with_secret(h):
    # The cluster trusts postgres on 127.0.0.1: the password is never asked for, only carried.
    return "host=%s port=%d user=postgres password=%s" % (h.host, h.port, CAPTURE_SECRET)


def store_conninfo_with_secret(h):
    return h.conninfo(h.store_db) + " password=" + STORE_SECRET


def main_config(h, hold_timeout_ms=20000, users=None):
    users = users if users is not None else [h.role["listed"]]
    return ("console:\n  role: %s\n  users: [%s]\n"
            "snapshots:\n  hold_timeout_ms: %d\n"
            "rules:\n  - {schema: public, kinds: [drop_table], action: quarantine}\n"
            % (h.role["admin"], ", ".join(users), hold_timeout_ms))


# ---- the cases ----

def case_admission(h, a):
    """Who gets in, and what the others see."""
    for who in ("member", "nested", "listed"):
        user = h.role[who]
        r = cpsql(a.port, "SHOW SESSIONS", user)
        head, rows = psql_rows(r.out)
        own = [x for x in rows if x.get("user") == user and x.get("state") == "console"]
        h.check(r.rc == 0 and head == SESSION_COLUMNS and len(own) == 1 and own[0]["database"] == "predrop",
                "admission: %s (%s) is admitted and sees its own console session" % (who, user), r)
    r = cpsql(a.port, "SHOW SESSIONS", "postgres")
    h.check(r.rc == 0 and any(x.get("user") == "postgres" and x.get("state") == "console" for x in psql_rows(r.out)[1]),
            "admission: a superuser is admitted while console.role exists", r)

    have = {x[0] for x in h.q("SELECT rolname FROM pg_roles WHERE rolname IN ('scram_user', 'md5_user')", db="postgres")}
    if not h.check(have == {"scram_user", "md5_user"}, "scram_user and md5_user exist (scripts/test-roles.sh)", have):
        return
    r = cpsql(a.port, "SHOW SESSIONS", "scram_user", password=SCRAM_PASSWORD)
    h.check(r.rc == 0 and any(x.get("user") == "scram_user" for x in psql_rows(r.out)[1]),
            "admission: SCRAM-SHA-256 relayed to the server, then admitted (a superuser)", r)
    r = cpsql(a.port, "SHOW SESSIONS", "md5_user", password=MD5_PASSWORD)
    h.check(r.rc == 0 and any(x.get("user") == "md5_user" for x in psql_rows(r.out)[1]),
            "admission: md5 relayed to the server, then admitted", r)
    r = cpsql(a.port, "SHOW SESSIONS", "scram_user", password="not-the-secret")
    h.check(r.rc == 2 and 'password authentication failed for user "scram_user"' in r.err and r.out == "",
            "admission: a wrong password gets the server's own FATAL", r)

    ghost = h.db + "_ghost"
    msgs = startup_reply(a.port, ghost, "predrop")
    e = last_error(msgs)
    h.check(e.get("S") == "FATAL" and e.get("C") == "28000" and e.get("M") == 'role "%s" does not exist' % ghost
            and msgs[-1][0] == "EOF", "admission: an unknown role gets the server's FATAL 28000", rawpg.describe(msgs))

    out = h.role["outsider"]
    msgs = startup_reply(a.port, out, "predrop")
    e = last_error(msgs)
    types = [t for t, _ in msgs]
    h.check(e.get("S") == "FATAL" and e.get("C") == "42501"
            and e.get("M") == 'permission denied for the predrop console "predrop"',
            "admission: an outsider gets FATAL 42501 permission denied for the predrop console \"predrop\"", e)
    h.check(h.role["admin"] in e.get("D", ""), "admission: the refusal's DETAIL names console.role", e)
    h.check(types[-1] == "EOF" and "Z" not in types, "admission: the refused connection closes, never ready",
            rawpg.describe(msgs))
    r = cpsql(a.port, "SHOW SESSIONS", out)
    h.check(r.rc == 2 and 'permission denied for the predrop console "predrop"' in r.err and h.role["admin"] in r.err,
            "admission: psql shows the refusal and its DETAIL", r)
    h.check(("console: user %s from 127.0.0.1 refused" % out) in a.log(), "admission: the refusal is logged")


def case_sessions(h, a):
    """SHOW SESSIONS: every state of a relayed session, and the console's own."""
    def relayed(app, autocommit=True):
        c = psycopg2.connect(h.conninfo(port=a.port, application_name=app))
        c.autocommit = autocommit
        return c
    idle = relayed("console-idle")
    run(idle, "SELECT 1")
    in_tx = relayed("console-in-tx", autocommit=False)
    run(in_tx, "SELECT 1")
    aborted = relayed("console-aborted", autocommit=False)
    h.check(run_error(aborted, "SELECT 1/0") is not None, "sessions: a failed statement leaves a transaction aborted")
    busy = relayed("console-active")
    sleeper = threading.Thread(target=lambda: run(busy, "SELECT pg_sleep(4)"))
    sleeper.start()
    con = cconnect(a.port, h.role["member"], application_name="console-psycopg2")
    try:
        def listing():
            res = run(con, "SHOW SESSIONS")
            return res, {x["application_name"]: x for x in res.rows}
        h.wait_for(lambda: listing()[1].get("console-active", {}).get("state") == "active", timeout=3.5)
        res, apps = listing()
        h.check(res.cols == SESSION_COLUMNS, "SHOW SESSIONS: its columns", res.cols)
        h.check(res.types and all(t == TEXT_OID for t in res.types), "SHOW SESSIONS: every column is text", res.types)
        h.check(res.tag == "SHOW", "SHOW SESSIONS: CommandComplete SHOW", res.tag)
        want = {"console-idle": "idle", "console-in-tx": "idle in transaction",
                "console-aborted": "idle in transaction (aborted)", "console-active": "active",
                "console-psycopg2": "console"}
        h.check({k: apps.get(k, {}).get("state") for k in want} == want, "SHOW SESSIONS: each session's state",
                {k: apps.get(k, {}).get("state") for k in want})
        upstream = "%s:%d" % (h.host, h.port)
        for app in ("console-idle", "console-in-tx", "console-aborted", "console-active"):
            x = apps.get(app, {})
            h.check(x.get("user") == "postgres" and x.get("database") == h.db and x.get("client_addr") == "127.0.0.1"
                    and x.get("tls") == "off" and x.get("upstream") == upstream and x.get("holds") == "0"
                    and (number(x.get("bytes_in")) or 0) > 0 and (number(x.get("bytes_out")) or 0) > 0
                    and (number(x.get("connected_s")) is not None and number(x["connected_s"]) >= 0),
                    "SHOW SESSIONS: %s's user, database, address, tls, upstream, bytes, holds" % app, x)
        own = apps.get("console-psycopg2", {})
        h.check(own.get("user") == h.role["member"] and own.get("database") == "predrop" and own.get("upstream") is None
                and own.get("tls") == "off" and own.get("client_addr") == "127.0.0.1",
                "SHOW SESSIONS: the console's own session (database predrop, no upstream)", own)
        ids = [x["session"] for x in res.rows]
        h.check(all(i.isdigit() for i in ids) and len(set(ids)) == len(ids), "SHOW SESSIONS: session ids unique", ids)

        r = cpsql(a.port, "show sessions;", h.role["member"])
        head, rows = psql_rows(r.out)
        h.check(r.rc == 0 and head == SESSION_COLUMNS and any(x.get("application_name") == "console-in-tx" for x in rows),
                "psql: 'show sessions;' (lower case, a trailing ;) answers the same table", r)
        sleeper.join(10)
        for c in (idle, in_tx, aborted, busy):
            c.close()
        closed = set(want) - {"console-psycopg2"}
        gone = h.wait_for(lambda: not closed & {x["application_name"] for x in run(con, "SHOW SESSIONS").rows}, timeout=5)
        h.check(gone, "SHOW SESSIONS: closed sessions are no longer listed",
                [x["application_name"] for x in run(con, "SHOW SESSIONS").rows])
    finally:
        con.close()


def case_stats_config(h, a):
    """SHOW STATS is /metrics; SHOW CONFIG has every key, its reload behaviour, and no password."""
    con = cconnect(a.port, h.role["member"])
    try:
        before = {l.rsplit(" ", 1)[0] for l in a.metrics().splitlines() if l and not l.startswith("#")}
        res = run(con, "SHOW STATS")
        stats = {x["stat"]: x["value"] for x in res.rows}
        h.check(res.cols == ["stat", "value"] and all(t == TEXT_OID for t in res.types),
                "SHOW STATS: columns stat and value, text", (res.cols, res.types))
        h.check("predrop_client_connections" in stats and number(stats["predrop_client_connections"]) is not None,
                "SHOW STATS: predrop_client_connections with a number", stats.get("predrop_client_connections"))
        h.check(len(before) > 10 and not (before - set(stats)), "SHOW STATS: every sample /metrics had a moment before",
                sorted(before - set(stats))[:20])
        bad = {k: v for k, v in stats.items() if number(v) is None}
        h.check(not bad, "SHOW STATS: every value a number", bad)

        res = run(con, "SHOW CONFIG")
        cfg = {x["key"]: (x["value"], x["reload"]) for x in res.rows}
        h.check(res.cols == ["key", "value", "reload"] and all(t == TEXT_OID for t in res.types),
                "SHOW CONFIG: columns key, value, reload, text", (res.cols, res.types))
        want = {"snapshots.hold_timeout_ms": ("20000", "sighup"), "listen": ("127.0.0.1:%d" % a.port, "restart"),
                "console.database": ("predrop", "sighup"), "console.role": (h.role["admin"], "sighup"),
                "console.users": (h.role["listed"], "sighup"), "rules[0].action": ("quarantine", "sighup"),
                "rules[0].schema": ("public", "sighup"), "limits.drain_timeout_ms": ("30000", "restart")}
        h.check({k: cfg.get(k) for k in want} == want, "SHOW CONFIG: the running values and their reload",
                {k: cfg.get(k) for k in want})
        h.check(all(x["reload"] in ("sighup", "restart") for x in res.rows), "SHOW CONFIG: reload is sighup or restart")
        text = json.dumps(res.rows)
        h.check(CAPTURE_SECRET not in text and STORE_SECRET not in text,
                "SHOW CONFIG: no password of capture.conninfo or store.conninfo",
                [x for x in res.rows if "conninfo" in x["key"]])
        cap, store = cfg.get("capture.conninfo", ("", ""))[0], cfg.get("store.conninfo", ("", ""))[0]
        h.check("port=%d" % h.port in cap and "dbname=%s" % h.store_db in store,
                "SHOW CONFIG: the conninfos are shown, masked", (cap, store))
    finally:
        con.close()


def case_errors(h, a):
    """Unknown commands, junk arguments, nothing relayed; the console stays usable."""
    con = cconnect(a.port, h.role["member"])
    try:
        e = run_error(con, "SELECT current_database()")
        h.check(e is not None and e.pgcode == "42601"
                and e.diag.message_primary == 'unrecognized predrop console command "SELECT current_database()"',
                "errors: SELECT is not relayed: 42601 unrecognized predrop console command", describe_error(e))
        hint = (e.diag.message_hint or "") if e is not None else ""
        h.check(all(c in hint for c in COMMANDS), "errors: the HINT lists the commands", hint)
        for junk in ("SHOW STATS now", "SHOW SESSIONS all", "SHOW HOLDS 1", "SHOW CONFIG x", "RELOAD please",
                     "SHOW", "SHOW NOTHING", "UNDROPS public.x"):
            e = run_error(con, junk)
            h.check(e is not None and e.pgcode == "42601", "errors: %r gets 42601" % junk, describe_error(e))
        res = run(con, "SHOW STATS")
        h.check(len(res.rows) > 10, "errors: the console answers after its errors", res.tag)
        r = cpsql(a.port, "SELECT 1", h.role["member"])
        h.check(r.rc == 1 and 'ERROR:  42601: unrecognized predrop console command "SELECT 1"' in r.err
                and "HINT:  " in r.err, "psql: an unknown command's ERROR with its SQLSTATE and HINT", r)
    finally:
        con.close()


def case_bad_messages(h, a):
    """Bad input at the console: a command past its 64 KiB bound and an unknown message type end the
    connection with FATAL 08P01, as the server ends one; an empty query gets EmptyQueryResponse."""
    con = rawpg.Raw(a.port, "predrop", user=h.role["member"])
    try:
        con.send(rawpg.query("  ;  "))
        msgs = con.read_until_ready()
        h.check([m[0] for m in msgs] == ["I", "Z"], "bad input: an empty query gets EmptyQueryResponse, then ready",
                rawpg.describe(msgs))
        # Only the header of a 70,000-byte Query: the bound is read from its length word.
        con.send(b"Q" + struct.pack("!I", 70000 + 4))
        m = con.read_msg(timeout=10)
        f = rawpg.error_fields(m[1]) if m and m[0] == "E" else {}
        h.check(f.get("S") == "FATAL" and f.get("C") == "08P01", "bad input: a command over the bound gets FATAL 08P01",
                m and (m[0], f or m[1][:100]))
        h.check(con.read_msg(timeout=10) is None, "bad input: then the connection closes")
    finally:
        con.close()
    con = rawpg.Raw(a.port, "predrop", user=h.role["member"])
    try:
        con.send(rawpg.message(b"z", b"junk"))
        m = con.read_msg(timeout=10)
        f = rawpg.error_fields(m[1]) if m and m[0] == "E" else {}
        h.check(f.get("S") == "FATAL" and f.get("C") == "08P01" and "invalid frontend message type 122" in f.get("M", ""),
                "bad input: an unknown message type gets the server's FATAL 08P01", m and (m[0], f or m[1][:100]))
        h.check(con.read_msg(timeout=10) is None, "bad input: then the connection closes")
    finally:
        con.close()


def case_holds(h, a):
    """SHOW HOLDS: a DROP held by a locked store, then released."""
    h.exec("CREATE SCHEMA held; CREATE TABLE held.t1 (a int, b text); INSERT INTO held.t1 VALUES (1, 'x'); ANALYZE held.t1")
    oid = h.oid("held.t1")
    dropper_conn = psycopg2.connect(h.conninfo(port=a.port, application_name="console-hold"))
    dropper_conn.autocommit = True
    result = {}

    def drop():
        t0 = time.monotonic()
        try:
            run(dropper_conn, "DROP TABLE held.t1")
            result["ok"] = True
        except Exception as e:  # noqa: BLE001
            result["error"] = repr(e)
        result["secs"] = time.monotonic() - t0

    locker = h.connect(h.store_db, autocommit=False)
    con = cconnect(a.port, h.role["member"])
    dropper = threading.Thread(target=drop)
    x = {}
    try:
        run(locker, "LOCK TABLE predrop.schema_snapshots IN ACCESS EXCLUSIVE MODE")
        dropper.start()
        got = h.wait_for(lambda: run(con, "SHOW HOLDS").rows, timeout=10)
        first = run(con, "SHOW HOLDS")
        time.sleep(0.4)
        second = run(con, "SHOW HOLDS")
        h.check(first.cols == HOLD_COLUMNS and all(t == TEXT_OID for t in first.types),
                "SHOW HOLDS: its columns, text", (first.cols, first.types))
        h.check(got and len(first.rows) == 1, "SHOW HOLDS: one row while the DROP waits for the locked store", first)
        x = first.rows[0] if first.rows else {}
        h.check(x.get("user") == "postgres" and x.get("database") == h.db and x.get("application_name") == "console-hold"
                and x.get("client_addr") == "127.0.0.1" and x.get("tables") == "held.t1",
                "SHOW HOLDS: who, where and which table", x)
        h.check("DROP TABLE" in (x.get("statement") or "").upper() and "t1" in (x.get("statement") or ""),
                "SHOW HOLDS: the statement", x.get("statement"))
        w1, w2 = number(x.get("waited_ms")), number((second.rows or [{}])[0].get("waited_ms"))
        h.check(w1 is not None and w2 is not None and 0 < w1 < w2 and w2 - w1 >= 300,
                "SHOW HOLDS: waited_ms grows while it waits", (w1, w2))
        sess = [s for s in run(con, "SHOW SESSIONS").rows if s["application_name"] == "console-hold"]
        h.check(len(sess) == 1 and sess[0]["state"] == "holding" and sess[0]["holds"] == "1"
                and sess[0]["session"] == x.get("session"),
                "SHOW SESSIONS: the held session is holding, one hold begun, same session id", sess)
        h.check(dropper.is_alive() and h.exists("held.t1"), "holds: the DROP has not run yet")
    finally:
        locker.rollback()
        locker.close()
        dropper.join(30)
    try:
        h.check(result.get("ok") and not h.exists("held.t1"), "holds: once the lock goes, the DROP completes", result)
        h.check(h.wait_for(lambda: not run(con, "SHOW HOLDS").rows, timeout=5), "SHOW HOLDS: empty again",
                run(con, "SHOW HOLDS"))
        sess = [s for s in run(con, "SHOW SESSIONS").rows if s["application_name"] == "console-hold"]
        h.check(len(sess) == 1 and sess[0]["state"] == "idle" and sess[0]["holds"] == "1",
                "SHOW SESSIONS: after the hold, idle with holds 1", sess)
        ev = h.check_event("held", "t1", "written", "dropped", oid=oid)
        if ev:
            h.check(ev[0]["statement"] == x.get("statement"), "SHOW HOLDS: the statement as the ledger stores it",
                    (ev[0]["statement"], x.get("statement")))
    finally:
        dropper_conn.close()
        con.close()


def case_quarantine(h, a):
    """SHOW QUARANTINE and UNDROP, against the CLI."""
    via = h.conninfo(port=a.port)
    r = h.psql("CREATE TABLE console_q1 (id int PRIMARY KEY, v text)",
               "INSERT INTO console_q1 SELECT g, 'v' || g FROM generate_series(1, 3) g",
               "CREATE TABLE console_q2 (id int)", "INSERT INTO console_q2 VALUES (1), (2)",
               "DROP TABLE console_q1", "DROP TABLE console_q2", conninfo=via)
    h.check(r.rc == 0 and not h.exists("public.console_q1") and not h.exists("public.console_q2"),
            "quarantine: two tables made, filled and dropped through predrop", r)
    cli = [e for e in cli_json(h, "quarantine", "list", "--database", h.db, "--capture", h.capture_conninfo(),
                               "--store", h.store_conninfo())]
    cli_q1 = [e for e in cli if e.get("table") == "console_q1"]
    h.check(len(cli_q1) == 1, "quarantine: predrop quarantine list has console_q1", cli)
    con = cconnect(a.port, h.role["member"])
    try:
        res = run(con, "SHOW QUARANTINE %s" % h.db)
        h.check(set(QUARANTINE_FIELDS) <= set(res.cols) and all(t == TEXT_OID for t in res.types),
                "SHOW QUARANTINE: the fields of quarantine list --format json, as text", res.cols)
        mine = [x for x in res.rows if x.get("table") == "console_q1"]
        h.check(len(mine) == 1 and mine[0]["schema"] == "public" and mine[0]["database"] == h.db
                and mine[0]["dropped_by"] == "postgres", "SHOW QUARANTINE: lists console_q1", res)
        if mine and cli_q1:
            m, c = mine[0], cli_q1[0]
            differ = {k: (c.get(k), m.get(k)) for k in QUARANTINE_FIELDS
                      if k not in ("age_s", "expires_in_s") and not same_text(c.get(k), m.get(k))}
            h.check(not differ, "SHOW QUARANTINE: the same values as predrop quarantine list", differ)
            h.check(all(number(m.get(k)) is not None and abs(number(m[k]) - c[k]) <= 30 for k in ("age_s", "expires_in_s")),
                    "SHOW QUARANTINE: age_s and expires_in_s as the CLI's", (m.get("age_s"), m.get("expires_in_s"),
                                                                             c.get("age_s"), c.get("expires_in_s")))
        every = run(con, "SHOW QUARANTINE")
        h.check(any(x.get("table") == "console_q1" and x.get("database") == h.db for x in every.rows),
                "SHOW QUARANTINE without a database: lists it too", every)

        res = run(con, "UNDROP public.console_q1")
        h.check(res.tag == "UNDROP", "UNDROP: CommandComplete UNDROP", res.tag)
        row = res.rows[0] if len(res.rows) == 1 else {}
        h.check({"id", "database", "table"} <= set(res.cols) and row.get("database") == h.db
                and "console_q1" in (row.get("table") or "")
                and (not cli_q1 or same_text(cli_q1[0].get("id"), row.get("id"))),
                "UNDROP: one row naming the version, database and table", res)
        back = h.q("SELECT id, v FROM public.console_q1 ORDER BY id") if h.exists("public.console_q1") else None
        h.check(back == [(1, "v1"), (2, "v2"), (3, "v3")], "UNDROP: console_q1 is back with its rows", back)
        res = run(con, "SHOW QUARANTINE %s" % h.db)
        h.check(res.cols and not [x for x in res.rows if x.get("table") == "console_q1"],
                "SHOW QUARANTINE: console_q1 no longer listed", res)

        res = run(con, "undrop public.console_q2 as console_q2_back in %s;" % h.db)
        back = h.q("SELECT count(*) FROM public.console_q2_back")[0][0] if h.exists("public.console_q2_back") else None
        h.check(res.tag == "UNDROP" and back == 2 and not h.exists("public.console_q2"),
                "UNDROP ... AS ... IN ...: restored under the new name with its rows", (res, back))

        e = run_error(con, "UNDROP public.console_never")
        h.check(e is not None and e.pgcode is not None and "console_never" in (e.diag.message_primary or ""),
                "UNDROP of a table not in quarantine: an ERROR naming it", describe_error(e))
        e = run_error(con, "UNDROP public.console_q1 IN %s" % h.db)
        h.check(e is not None and e.pgcode is not None, "UNDROP of a table undropped already: an ERROR",
                describe_error(e))
        res = run(con, "SHOW STATS")
        h.check(len(res.rows) > 10, "UNDROP: the console answers after its errors")
    finally:
        con.close()


def case_ages_snapshots(h, a):
    """SHOW AGES as predrop ages; SHOW SNAPSHOTS of a table dropped through predrop."""
    via = h.conninfo(port=a.port)
    r = h.psql("CREATE TABLE console_aged (a int)", "CREATE TABLE held.snap (a int, b text)", conninfo=via)
    h.check(r.rc == 0, "ages: tables created through predrop", r)
    # Each post_create lands on its own (after capture.after_delay): wait for both, not the first.
    aged = lambda: [x for x in cli_json(h, "ages", "--store", h.store_conninfo(), "--database", h.db)  # noqa: E731
                    if x["table"] in ("console_aged", "snap")]
    ages = h.wait_for(lambda: (lambda rows: len(rows) == 2 and rows)(aged()), timeout=20) or aged()
    h.check(len(ages or []) == 2, "ages: predrop ages sees both (their post_create)", ages)
    r = h.psql("DROP TABLE held.snap", conninfo=via)
    h.check(r.rc == 0 and not h.exists("held.snap"), "snapshots: held.snap dropped through predrop", r)
    h.check_event("held", "snap", "written", "dropped")
    # A complete pair: dropped, then created again with another shape (pre_drop -> post_create).
    h.exec("CREATE TABLE held.redo (a int)")
    r = h.psql("DROP TABLE held.redo", "CREATE TABLE held.redo (a int, c text)", conninfo=via)
    h.check(r.rc == 0, "snapshots: held.redo dropped and created again through predrop", r)
    h.check(h.wait_for(lambda: h.snapshots("table_name = 'redo' AND reason = 'post_create'", afters=True), timeout=20),
            "snapshots: held.redo's post_create is in the store")
    con = cconnect(a.port, h.role["member"])
    try:
        res = run(con, "SHOW AGES %s" % h.db)
        h.check(set(AGES_FIELDS) <= set(res.cols) and all(t == TEXT_OID for t in res.types),
                "SHOW AGES: the fields of predrop ages --format json, as text", res.cols)
        cli = {x["table"]: x for x in cli_json(h, "ages", "--store", h.store_conninfo(), "--database", h.db)}
        mine = [x for x in res.rows if x.get("table") == "console_aged"]
        h.check(len(mine) == 1 and mine[0].get("since_from") == "post_create" and mine[0].get("schema") == "public",
                "SHOW AGES: console_aged, dated from its post_create", res)
        if mine and "console_aged" in cli:
            m, c = mine[0], cli["console_aged"]
            differ = {k: (c.get(k), m.get(k)) for k in AGES_FIELDS if k != "age_s" and not same_text(c.get(k), m.get(k))}
            h.check(not differ, "SHOW AGES: the same values as predrop ages", differ)
            h.check(number(m.get("age_s")) is not None and abs(number(m["age_s"]) - c["age_s"]) <= 30,
                    "SHOW AGES: age_s as the CLI's", (m.get("age_s"), c.get("age_s")))
        pub = run(con, "SHOW AGES %s public" % h.db)
        h.check(any(x.get("table") == "console_aged" for x in pub.rows) and all(x.get("schema") == "public" for x in pub.rows),
                "SHOW AGES database schema: that schema only", pub)
        other = run(con, "SHOW AGES %s held" % h.db)
        h.check(not [x for x in other.rows if x.get("table") == "console_aged"], "SHOW AGES database held: not console_aged",
                other)
        every = run(con, "SHOW AGES")
        h.check(any(x.get("table") == "console_aged" and x.get("database") == h.db for x in every.rows),
                "SHOW AGES without arguments: every database's", len(every.rows))

        res = run(con, "SHOW SNAPSHOTS held.snap")
        h.check({"schema", "table", "changed"} <= set(res.cols) and res.rows
                and all(x.get("schema") == "held" and x.get("table") == "snap" for x in res.rows),
                "SHOW SNAPSHOTS held.snap: rows of that table, with what changed", res)
        res = run(con, "SHOW SNAPSHOTS held.redo")
        redo = [x for x in res.rows if x.get("schema") == "held" and x.get("table") == "redo"]
        h.check(len(redo) >= 1 and redo[0].get("changed") not in (None, "", "no column change")
                and redo[0].get("database") == h.db,
                "SHOW SNAPSHOTS held.redo: its drop-and-create pair, with the column change", res)
        res = run(con, "SHOW SNAPSHOTS")
        h.check("changed" in res.cols and any(x.get("table") == "redo" and x.get("database") == h.db for x in res.rows),
                "SHOW SNAPSHOTS without a table: the latest pairs, held.redo's among them", res)
        e = run_error(con, "SHOW SNAPSHOTS held.redo held.snap")
        h.check(e is not None and e.pgcode == "42601", "SHOW SNAPSHOTS with two tables: 42601", describe_error(e))
    finally:
        con.close()


def case_reload(h, a):
    """RELOAD applies the file's sighup keys, refuses a broken file and keeps the running values."""
    with open(a.config) as f:
        original = f.read()

    def write(text):
        with open(a.config + ".tmp", "w") as f:
            f.write(text)
        os.rename(a.config + ".tmp", a.config)

    con = cconnect(a.port, h.role["member"])
    outsider = h.role["outsider"]

    def value(key):
        return {x["key"]: x["value"] for x in run(con, "SHOW CONFIG").rows}.get(key)

    def admitted(user):
        return [t for t, _ in startup_reply(a.port, user, "predrop")][-1] == "Z"

    try:
        res = run(con, "RELOAD")
        h.check(res.tag == "RELOAD", "RELOAD: CommandComplete RELOAD", res)
        write(main_config(h, hold_timeout_ms=19000, users=[h.role["listed"], outsider]))
        r = cpsql(a.port, "reload;", h.role["member"])
        h.check(r.rc == 0 and r.out.strip() == "RELOAD", "RELOAD through psql, the file changed", r)
        h.check(value("snapshots.hold_timeout_ms") == "19000", "RELOAD: SHOW CONFIG has the new hold_timeout_ms",
                value("snapshots.hold_timeout_ms"))
        h.check(admitted(outsider), "RELOAD: a user added to console.users is admitted at once")
        write(original.replace("hold_timeout_ms: 20000", "hold_timeout_ms: soon"))
        e = run_error(con, "RELOAD")
        h.check(e is not None and e.pgcode == "F0000"
                and e.diag.message_primary == "reload rejected, the running policy is kept"
                and "hold_timeout_ms" in (e.diag.message_detail or ""),
                "RELOAD of a broken file: F0000 with the errors in DETAIL", describe_error(e))
        h.check(value("snapshots.hold_timeout_ms") == "19000" and admitted(outsider),
                "RELOAD refused: the running values stay", value("snapshots.hold_timeout_ms"))
        write(original)
        res = run(con, "RELOAD")
        h.check(res.tag == "RELOAD" and value("snapshots.hold_timeout_ms") == "20000" and not admitted(outsider),
                "RELOAD of the original file: 20000 again, the outsider refused again", res)
    finally:
        write(original)
        con.close()


NODE_SCRIPT = r"""
const { Client } = require('pg');
const [port, member, outsider, ghost] = process.argv.slice(1);
function config(user, extra) {
  return Object.assign({ host: '127.0.0.1', port: +port, user, database: 'predrop',
                         application_name: 'console-node', connectionTimeoutMillis: 10000 }, extra || {});
}
async function outcome(c, query, values) {
  try {
    const r = await c.query(query, values);
    return { ok: true, command: r.command, fields: r.fields.map(f => [f.name, f.dataTypeID]), rows: r.rows };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message };
  }
}
async function attempt(user, extra) {
  const c = new Client(config(user, extra));
  try {
    await c.connect();
    const r = await c.query('SHOW SESSIONS');
    return { ok: true, rows: r.rows.length };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message, detail: e.detail };
  } finally {
    await c.end().catch(() => {});
  }
}
(async () => {
  const out = {};
  const c = new Client(config(member));
  await c.connect();
  out.simple = await outcome(c, 'SHOW SESSIONS');
  out.param = await outcome(c, 'SHOW SESSIONS WHERE $1', [1]);
  out.after_param = await outcome(c, 'SHOW HOLDS');
  out.named = await outcome(c, { name: 'console_stmt', text: 'SHOW STATS' });
  out.after_named = await outcome(c, 'SHOW STATS');
  out.unknown = await outcome(c, 'SELECT 1');
  await c.end();
  out.wrong_password = await attempt('scram_user', { password: 'not-the-secret' });
  out.scram = await attempt('scram_user', { password: 'scram-secret' });
  out.ghost = await attempt(ghost);
  out.outsider = await attempt(outsider);
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
"""


def case_node(h, a):
    """node-postgres: simple queries answered, the extended protocol refused (0A000) without losing the
    connection, and the server's and predrop's FATALs with their codes."""
    if not h.check(shutil.which("node") is not None, "node is installed (scripts/install-deps.sh installs it)"):
        return
    if not h.check(os.path.isdir(os.path.join(NODE_MODULES, "pg")),
                   "%s/pg present (ctest fixture support.node_modules, or tests/support/node-modules.sh %s)"
                   % (NODE_MODULES, os.path.dirname(NODE_MODULES))):
        return
    r = subprocess.run(["node", "-e", NODE_SCRIPT, str(a.port), h.role["member"], h.role["outsider"], h.db + "_ghost"],
                       env=dict(os.environ, NODE_PATH=NODE_MODULES), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=90)
    if not h.check(r.returncode == 0, "node: the script ran", (r.returncode, r.stdout[-2000:], r.stderr[-2000:])):
        return
    out = json.loads(r.stdout.strip().splitlines()[-1])
    s = out["simple"]
    h.check(s.get("ok") and [f[0] for f in s["fields"]] == SESSION_COLUMNS and all(f[1] == TEXT_OID for f in s["fields"])
            and s.get("command") == "SHOW"
            and any(x["application_name"] == "console-node" and x["state"] == "console" for x in s["rows"]),
            "node: SHOW SESSIONS (simple protocol) answered, text columns, its own session listed", s)
    h.check(out["param"] == {"ok": False, "code": "0A000", "message": out["param"].get("message")},
            "node: a parameterized query (extended protocol) fails with 0A000", out["param"])
    h.check(out["after_param"].get("ok") and [f[0] for f in out["after_param"]["fields"]] == HOLD_COLUMNS,
            "node: the next simple query works", out["after_param"])
    h.check(not out["named"].get("ok") and out["named"].get("code") == "0A000",
            "node: a named prepared statement fails with 0A000", out["named"])
    h.check(out["after_named"].get("ok") and len(out["after_named"]["rows"]) > 10, "node: and SHOW STATS works after it",
            {k: v for k, v in out["after_named"].items() if k != "rows"})
    h.check(out["unknown"].get("code") == "42601", "node: SELECT 1 gets 42601", out["unknown"])
    h.check(out["wrong_password"].get("code") == "28P01", "node: a wrong SCRAM password gets the server's 28P01",
            out["wrong_password"])
    h.check(out["scram"].get("ok") and out["scram"].get("rows", 0) >= 1, "node: SCRAM relayed, then admitted", out["scram"])
    h.check(out["ghost"].get("code") == "28000", "node: an unknown role gets the server's 28000", out["ghost"])
    h.check(out["outsider"].get("code") == "42501" and h.role["admin"] in (out["outsider"].get("detail") or ""),
            "node: an outsider gets 42501, DETAIL naming the role", out["outsider"])


def case_log(h, a):
    """Every console command is logged with its user and address."""
    log = a.log()
    for user, cmd in ((h.role["member"], "SHOW SESSIONS"), (h.role["member"], "show sessions"),
                      (h.role["nested"], "SHOW SESSIONS"), (h.role["member"], "SHOW HOLDS"),
                      (h.role["member"], "RELOAD"), (h.role["member"], "SELECT current_database()"),
                      (h.role["member"], "UNDROP public.console_q1"), (h.role["member"], "SHOW QUARANTINE")):
        line = "console: user %s from 127.0.0.1: %s" % (user, cmd)
        h.check(line in log, "log: %r" % line)


def case_elsewhere(h):
    """console.database elsewhere: a real database named predrop is relayed; a superuser is not admitted
    when console.role does not exist; console.database "" (SIGHUP) turns the console off."""
    if not h.q("SELECT 1 FROM pg_database WHERE datname = 'predrop'", db="postgres"):
        h._admin_conn("CREATE DATABASE predrop TEMPLATE template0")
        h.made_predrop_db = True
    absent = h.db + "_absent"
    config = "console:\n  database: pdconsole\n  role: %s\n" % absent
    b = start(h, config=config)
    r = h.psql("SELECT current_database()", conninfo=h.conninfo("predrop", port=b.port), extra=["-At"])
    h.check(r.rc == 0 and r.out.strip() == "predrop", "console.database pdconsole: database predrop is relayed", r)
    e = last_error(startup_reply(b.port, "postgres", "pdconsole"))
    h.check(e.get("C") == "42501" and e.get("M") == 'permission denied for the predrop console "pdconsole"'
            and absent in e.get("D", ""), "a superuser is refused when console.role does not exist", e)
    e = last_error(startup_reply(b.port, h.role["member"], "pdconsole"))
    h.check(e.get("C") == "42501", "a member of another role is refused", e)
    with open(b.config, "w") as f:
        f.write("console:\n  database: \"\"\n  role: %s\n" % absent)
    os.kill(b.pid, signal.SIGHUP)
    h.check(h.wait_for(lambda: "SIGHUP: policy reloaded" in b.log(), timeout=5), "SIGHUP: reloaded")
    e = last_error(startup_reply(b.port, "postgres", "pdconsole"))
    h.check(e.get("C") == "3D000" and e.get("M") == 'database "pdconsole" does not exist',
            "console.database \"\": pdconsole goes to the server (3D000)", e)
    e = last_error(startup_reply(b.port, "postgres", "predrop"))
    h.check(e == {}, "console.database \"\": predrop still relayed", e)
    h.stop_predrop(b.p)


def case_no_config(h):
    """Without --config: the defaults (plus PREDROP_CONSOLE_USERS), and RELOAD refused with F0000."""
    inst = start(h, env={"PREDROP_CONSOLE_USERS": h.role["listed"]})
    con = cconnect(inst.port, h.role["listed"])
    try:
        cfg = {x["key"]: x["value"] for x in run(con, "SHOW CONFIG").rows}
        want = {"console.database": "predrop", "console.role": "predrop_admin", "console.users": h.role["listed"]}
        h.check({k: cfg.get(k) for k in want} == want, "no config: the console's defaults, users from the environment",
                {k: cfg.get(k) for k in want})
        e = run_error(con, "RELOAD")
        h.check(e is not None and e.pgcode == "F0000" and e.diag.message_primary == "reload rejected, the running policy is kept",
                "no config: RELOAD gets F0000", describe_error(e))
        exists = bool(h.q("SELECT 1 FROM pg_roles WHERE rolname = 'predrop_admin'", db="postgres"))
        msgs = startup_reply(inst.port, "postgres", "predrop")
        if exists:
            h.check(msgs[-1][0] == "Z", "no config: predrop_admin exists on this cluster, so a superuser is admitted",
                    rawpg.describe(msgs))
        else:
            e = last_error(msgs)
            h.check(e.get("C") == "42501" and "predrop_admin" in e.get("D", ""),
                    "no config: no role predrop_admin, so a superuser is refused", e)
    finally:
        con.close()
    h.stop_predrop(inst.p)


def case_tls(h):
    """The console through TLS: psql and psycopg2 with sslmode=require, SHOW SESSIONS says tls on."""
    d = start(h, config=holdlib.tls_config(h) + "console:\n  role: %s\n" % h.role["admin"])
    r = cpsql(d.port, "SHOW SESSIONS", h.role["member"], conn_extra="sslmode=require application_name=console-tls")
    own = [x for x in psql_rows(r.out)[1] if x.get("application_name") == "console-tls"]
    h.check(r.rc == 0 and len(own) == 1 and own[0]["tls"] == "on" and own[0]["state"] == "console",
            "TLS: psql sslmode=require reaches the console, tls on", r)
    r = cpsql(d.port, "SHOW SESSIONS", "scram_user", password=SCRAM_PASSWORD, conn_extra="sslmode=require")
    h.check(r.rc == 0, "TLS: SCRAM through TLS, admitted", r)
    tls = cconnect(d.port, h.role["member"], sslmode="require", application_name="console-tls-py")
    plain = cconnect(d.port, h.role["member"], sslmode="disable", application_name="console-plain-py")
    try:
        rows = {x["application_name"]: x["tls"] for x in run(tls, "SHOW SESSIONS").rows}
        h.check(rows.get("console-tls-py") == "on" and rows.get("console-plain-py") == "off",
                "TLS: psycopg2 sslmode=require is tls on, sslmode=disable tls off", rows)
    finally:
        tls.close()
        plain.close()
    h.stop_predrop(d.p)


def case_drain(h):
    """SIGTERM: an open console stays through the drain; new connections are refused; 57P01 at its end."""
    c = start(h, config="console:\n  role: %s\nlimits:\n  drain_timeout_ms: 8000\n" % h.role["admin"])
    ordinary = psycopg2.connect(h.conninfo(port=c.port, application_name="console-drain"))
    run(ordinary, "SELECT 1")   # a transaction left open: the drain waits for it
    console = rawpg.Raw(c.port, "predrop", user=h.role["member"])
    t0 = time.monotonic()
    os.kill(c.pid, signal.SIGTERM)
    try:
        h.check(h.wait_for(lambda: "draining" in c.log(), timeout=5), "drain: predrop announces its drain", c.log()[-500:])
        console.send(rawpg.query("SHOW SESSIONS"))
        msgs = console.read_until_ready()
        cols, rows = rows_of(msgs)
        mine = [x for x in rows if x.get("application_name") == "console-drain"]
        h.check(msgs[-1][0] == "Z" and cols == SESSION_COLUMNS and len(mine) == 1
                and mine[0]["state"] == "idle in transaction",
                "drain: the open console answers SHOW SESSIONS and lists the draining session", rows or rawpg.describe(msgs))
        # predrop stops accepting at SIGTERM (README: the listener closes, so a load balancer sends
        # new clients elsewhere): a new connection, console or not, is refused.
        try:
            e = last_error(startup_reply(c.port, "postgres", h.db))
        except OSError as err:
            e = {"connect": str(err)}
        h.check("connect" in e or e.get("C") == "57P03", "drain: a new connection is refused (listener closed, or 57P03)", e)
        # The ordinary session ends: the drain is over at once (a console does not hold it up).
        ordinary.rollback()
        ordinary.close()
        m = console.read_msg(timeout=12)
        elapsed = time.monotonic() - t0
        f = rawpg.error_fields(m[1]) if m and m[0] == "E" else {}
        h.check(f.get("S") == "FATAL" and f.get("C") == "57P01", "drain: the console gets FATAL 57P01 at its end",
                m and (m[0], f or m[1][:200]))
        h.check(elapsed < 6, "drain: it ends when the last ordinary session does (%.1f s after SIGTERM, timeout 8 s)"
                % elapsed)
        h.check(console.read_msg(timeout=5) is None, "drain: then the console's connection is closed")
        h.check(h.wait_for(lambda: not c.p.alive(), timeout=10), "drain: predrop exits")
    finally:
        console.close()
        if not c.p.alive() and c.p in h.instances:
            h.instances.remove(c.p)


def case_psycopg2_default(h, a):
    """psycopg2 as it comes (no autocommit): its BEGIN is answered and SHOW works, commit and rollback too."""
    c = psycopg2.connect(host="127.0.0.1", port=a.port, dbname="predrop", user=h.role["member"], connect_timeout=10)
    try:
        with c.cursor() as cur:
            cur.execute("SHOW SESSIONS")
            cols = [d.name for d in cur.description]
            rows = cur.fetchall()
        h.check(cols == SESSION_COLUMNS and any(r[cols.index("state")] == "console" for r in rows),
                "psycopg2 default mode: SHOW SESSIONS after its BEGIN", (cols, rows))
        h.check(c.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE,
                "psycopg2 default mode: the console stays idle (nothing is transactional)", c.get_transaction_status())
        c.commit()
        c.rollback()
        with c.cursor() as cur:
            cur.execute("SHOW STATS")
            h.check(any(r[0] == "predrop_client_connections" for r in cur.fetchall()),
                    "psycopg2 default mode: usable after commit and rollback")
    finally:
        c.close()


def test(h):
    a = start(h, config=main_config(h), capture=capture_conninfo_with_secret(h), store=store_conninfo_with_secret(h))
    failed_before = h.failures
    for case in (case_admission, case_psycopg2_default, case_sessions, case_stats_config, case_errors, case_bad_messages,
                 case_holds, case_quarantine,
                 case_ages_snapshots, case_reload, case_node, case_log):
        run_case(h, case, a)
    for case in (case_elsewhere, case_no_config, case_tls, case_drain):
        run_case(h, case)
    print("# %d check(s) failed" % (h.failures - failed_before))


def run_case(h, case, *args):
    """One case; an exception fails it and the next case still runs."""
    print("# ---- %s: %s" % (case.__name__, case.__doc__.splitlines()[0]), flush=True)
    t0 = time.monotonic()
    try:
        case(h, *args)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        h.fail("%s: %s: %s" % (case.__name__, type(e).__name__, e))
    print("# %s took %.1f s" % (case.__name__, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    holdlib.main(test, "console", cls=ConsoleHold)
