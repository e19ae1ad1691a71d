"""Shared helpers of the hold integration tests (tests/hold/), for /usr/bin/python3 with psycopg2.

Every test gets its own database (the client's), its own store database and its own predrop
instance, so tests run in parallel. Ground truth comes from the server itself: an event trigger on
sql_drop in the test database records every dropped relation (schema, name, objid, clock time,
txid) in truth.drops, in the dropping transaction (a rolled-back drop leaves no truth row).

    h = Hold("forms")                     # creates hold_forms_<pid>_<rand> and ..._store
    h.start_predrop("--hold-timeout-ms", "5000")
    h.psql("DROP TABLE a")                # through predrop; returns Run(rc, out, err, secs)
    h.check_all_drops_captured()          # truth vs store
    h.finish()                            # exit 1 on any failed check, drops the databases

Environment: PGHOST PGPORT (the throwaway cluster, superuser postgres with trust), PREDROP_BIN,
PREDROP_SOURCE_DIR (both from ctest's PREDROP_TEST_ENV), PREDROP_TEST_WORKDIR (optional).
PREDROP_HOLD_CAPTURE_ROLE=least_privilege: predrop's default capture and store connections log in as
a role made by deploy/sql/capture-role.sql (no superuser; the store is migrated beforehand by the
superuser and predrop runs with --no-migrate), as the README advises for production.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import psycopg2
import psycopg2.extensions

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("PREDROP_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
from predrop_harness import Predrop  # noqa: E402

TRUTH_SQL = r"""
CREATE SCHEMA truth;
CREATE TABLE truth.drops (
  schema_name text, object_name text, objid oid, object_type text,
  dropped_at timestamptz NOT NULL DEFAULT clock_timestamp(), txid bigint);
CREATE FUNCTION truth.record_drop() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_dropped_objects()
           WHERE object_type IN ('table', 'materialized view', 'foreign table', 'view') LOOP
    INSERT INTO truth.drops VALUES (r.schema_name, r.object_name, r.objid, r.object_type,
                                    clock_timestamp(), txid_current());
  END LOOP;
END $f$;
CREATE EVENT TRIGGER hold_truth_record_drop ON sql_drop EXECUTE FUNCTION truth.record_drop();
"""


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p



def tls_config(h):
    """A self-signed certificate in the test's work dir, as predrop's tls: section."""
    key, crt = os.path.join(h.work, "server.key"), os.path.join(h.work, "server.crt")
    r = subprocess.run(["openssl", "req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-days", "2",
                        "-subj", "/CN=localhost", "-keyout", key, "-out", crt],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl: " + r.stdout)
    os.chmod(key, 0o600)
    return "tls:\n  cert_file: %s\n  key_file: %s\n" % (crt, key)


def fetch_dicts(conn, sql, params=()):
    """Rows of SQL as dicts keyed by column name; closes CONN."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        conn.close()

class Run:
    def __init__(self, rc, out, err, secs):
        self.rc, self.out, self.err, self.secs = rc, out, err, secs

    def __repr__(self):
        return "rc=%s secs=%.3f out=%r err=%r" % (self.rc, self.secs, self.out[-400:], self.err[-400:])


class Hold:
    def __init__(self, name, store=True):
        self.name = name
        self.failures = 0
        if not os.environ.get("PGHOST") or not os.environ.get("PGPORT"):
            print("FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)")
            sys.exit(1)
        self.host = os.environ["PGHOST"]
        self.port = int(os.environ["PGPORT"])
        os.environ["PGUSER"] = "postgres"
        for v in ("PGPASSWORD", "PGSSLMODE", "PGSERVICE", "PGOPTIONS", "PGDATABASE"):
            os.environ.pop(v, None)
        os.environ["PSQLRC"] = "/dev/null"
        self.bin = os.environ.get("PREDROP_BIN")
        if not self.bin:
            print("FAIL: PREDROP_BIN unset")
            sys.exit(1)
        tag = "%d_%04x" % (os.getpid(), random.randrange(1 << 16))
        self.db = "hold_%s_%s" % (name, tag)
        self.store_db = self.db + "_store"
        base = os.environ.get("PREDROP_TEST_WORKDIR", "/tmp")
        self.work = tempfile.mkdtemp(prefix="hold-%s." % name, dir=base)
        os.chmod(self.work, 0o755)
        self.instances = []
        self.logs = []
        self.capture_role = None
        if os.environ.get("PREDROP_HOLD_CAPTURE_ROLE", "") == "least_privilege":
            self.capture_role = "hold_lp_%s" % tag
        elif os.environ.get("PREDROP_HOLD_CAPTURE_ROLE"):
            print("FAIL: PREDROP_HOLD_CAPTURE_ROLE=%s: only least_privilege is known"
                  % os.environ["PREDROP_HOLD_CAPTURE_ROLE"])
            sys.exit(1)
        self._store_migrated = False
        self.p = None
        self.admin = None
        self._admin_conn("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.db)
        self._admin_conn("CREATE DATABASE %s TEMPLATE template0" % self.db)
        if store:
            self._admin_conn("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.store_db)
            self._admin_conn("CREATE DATABASE %s TEMPLATE template0" % self.store_db)
        self.exec(TRUTH_SQL)
        print("# %s: database %s, store %s, work dir %s, cluster %s:%s, predrop %s"
              % (name, self.db, self.store_db, self.work, self.host, self.port, self.bin))

    # ---- direct connections (setup, truth, store) ----

    def conninfo(self, db=None, user="postgres", port=None, **extra):
        s = "host=%s port=%d dbname=%s user=%s" % (self.host, port or self.port, db or self.db, user)
        for k, v in extra.items():
            s += " %s=%s" % (k, v)
        return s

    def _admin_conn(self, sql):
        c = psycopg2.connect(self.conninfo("postgres"))
        c.autocommit = True
        with c.cursor() as cur:
            cur.execute("SET client_min_messages = warning")
            cur.execute(sql)
        c.close()

    def connect(self, db=None, autocommit=True, **kw):
        c = psycopg2.connect(self.conninfo(db), **kw)
        c.autocommit = autocommit
        return c

    def exec(self, sql, db=None, params=None):
        c = self.connect(db)
        try:
            with c.cursor() as cur:
                cur.execute(sql, params)
        finally:
            c.close()

    def q(self, sql, params=None, db=None):
        c = self.connect(db)
        try:
            with c.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            c.close()

    def sq(self, sql, params=None):
        return self.q(sql, params, db=self.store_db)

    def oid(self, qualified):
        r = self.q("SELECT to_regclass(%s)::oid::bigint", (qualified,))
        return r[0][0]

    def exists(self, qualified):
        return self.oid(qualified) is not None

    # ---- predrop ----

    def store_conninfo(self):
        return self.conninfo(self.store_db)

    def capture_conninfo(self, user="postgres"):
        return "host=%s port=%d user=%s" % (self.host, self.port, user)

    def least_privilege_role(self):
        """The capture role of deploy/sql/capture-role.sql, (re)granted on every schema the test database
        has now (the script is idempotent); the store is migrated by the superuser first."""
        if not self._store_migrated:
            r = subprocess.run([self.bin, "migrate", "--store", self.store_conninfo()], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError("predrop migrate (as the superuser): " + r.stdout)
            self._store_migrated = True
        schemas = [r[0] for r in self.q(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'")]
        # The quarantine schema, owned by the capture role (which cannot CREATE in the database), as
        # the README's least privileges have the operator make it.
        cmd = ["psql", "-X", "-q", "-d", self.conninfo(), "-v", "role=" + self.capture_role,
               "-v", "store_db=" + self.store_db, "-v", "quarantine_schema=predrop_quarantine",
               "-f", os.path.join(SOURCE, "deploy", "sql", "capture-role.sql")]
        if schemas:
            cmd[5:5] = ["-v", "covered_schemas=" + ",".join(schemas)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("deploy/sql/capture-role.sql: " + r.stdout)
        return self.capture_role

    def start_predrop(self, *args, capture=True, store=True, config=None, env=None, admin=True):
        argv = []
        if self.capture_role and (capture is True or store is True):
            role = self.least_privilege_role()
            if capture is True:
                capture = self.capture_conninfo(role)
            if store is True:
                store = self.conninfo(self.store_db, user=role)
                if "--no-migrate" not in args:
                    args = args + ("--no-migrate",)
        if capture:
            argv += ["--capture", capture if isinstance(capture, str) else self.capture_conninfo()]
        if store:
            argv += ["--store", store if isinstance(store, str) else self.store_conninfo()]
        if config is not None:
            path = os.path.join(self.work, "predrop-%d.yaml" % len(self.instances))
            with open(path, "w") as f:
                f.write(config)
            argv += ["--config", path]
        self.admin = None
        if admin:
            self.admin = "127.0.0.1:%d" % free_port()
            argv += ["--admin", self.admin]
        argv += list(args)
        e = dict(os.environ)
        if env:
            e.update(env)
        p = Predrop(self.work, *argv, env=e)
        p.admin = self.admin   # this instance's endpoint: self.admin is the last one started's
        p.start()
        self.instances.append(p)
        self.logs.append(p.log)
        self.p = p
        print("# predrop pid %d on port %d: %s" % (p.pid, p.port, " ".join(argv)))
        return p

    def stop_predrop(self, p=None):
        p = p or self.p
        if p is None:
            return
        pid = p.pid
        if pid is not None and not p.alive():
            self.fail("predrop %s died during the test" % pid)
        if not p.stop(10):
            self.fail("predrop %s did not stop on SIGTERM within 10 s" % pid)
        if p in self.instances:
            self.instances.remove(p)

    def proxy_conninfo(self, db=None, user="postgres", **extra):
        return self.conninfo(db, user=user, port=self.p.port, **extra)

    def pconnect(self, autocommit=True, db=None, **extra):
        c = psycopg2.connect(self.proxy_conninfo(db, **extra))
        c.autocommit = autocommit
        return c

    def psql(self, sql=None, *more_c, stdin=None, conninfo=None, timeout=120, extra=()):
        """psql through predrop: -c SQL [-c more...] or a script on stdin. Returns Run."""
        cmd = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", conninfo or self.proxy_conninfo()]
        cmd += list(extra)
        for s in ([sql] if sql is not None else []) + list(more_c):
            cmd += ["-c", s]
        t0 = time.monotonic()
        r = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        return Run(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)

    def admin_get(self, path, admin=None):
        """(HTTP status, body) of a GET on predrop's admin endpoint (ADMIN: another instance's)."""
        try:
            with urllib.request.urlopen("http://%s%s" % (admin or self.admin, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self, admin=None):
        status, body = self.admin_get("/metrics", admin)
        if status != 200:
            raise RuntimeError("predrop /metrics answered %d: %s" % (status, body[:200]))
        return body

    def readyz(self):
        """(HTTP status, body) of predrop's /readyz: 200 once the upstream answers and the store is writable."""
        return self.admin_get("/readyz")

    def metric(self, name, labels=""):
        pat = re.compile(r"^%s%s\s+([0-9.eE+-]+)$" % (re.escape(name), re.escape("{%s}" % labels) if labels else ""),
                         re.M)
        m = pat.search(self.metrics())
        return float(m.group(1)) if m else None

    def log_text(self):
        return self.p.log_text() if self.p else ""

    # ---- truth and store ----

    def truth(self, where="TRUE", params=None):
        return self.q("SELECT schema_name, object_name, objid::bigint, object_type, dropped_at, txid "
                      "FROM truth.drops WHERE " + where + " ORDER BY dropped_at", params)

    def snapshots(self, where="TRUE", params=None, afters=False):
        """Rows of predrop.schema_snapshots for this test's database, as dicts: the befores (what the
        holds wrote), and with afters=True the afters of committed shape changes too."""
        kept = "TRUE" if afters else "left(reason, 5) <> 'post_'"
        return self._dicts("SELECT * FROM predrop.schema_snapshots WHERE database_name = %s AND " + kept +
                           " AND (" + where + ") ORDER BY captured_at", (self.db,) + tuple(params or ()))

    def events(self, where="TRUE", params=None):
        return self._dicts("SELECT * FROM predrop.drop_events WHERE (database_name = %s OR database_name IS NULL)"
                           " AND (" + where + ") ORDER BY occurred_at", (self.db,) + tuple(params or ()))

    def _dicts(self, sql, params):
        return fetch_dicts(self.connect(self.store_db), sql, params)

    def wait_for(self, fn, timeout=10.0, interval=0.1):
        """Poll fn() until truthy or timeout; returns its last value."""
        deadline = time.monotonic() + timeout
        v = fn()
        while not v and time.monotonic() < deadline:
            time.sleep(interval)
            v = fn()
        return v

    def snapshot_columns(self, snap):
        prof = snap["columns_profile"]
        if isinstance(prof, str):
            prof = json.loads(prof)
        return [c.get("name") for c in prof]

    def check_captured_before_drop(self, truth_rows, label=""):
        """Every truth row (a dropped relation) has a snapshot of the same OID captured before the drop."""
        ok = True
        for schema, name, objid, otype, dropped_at, _ in truth_rows:
            snaps = self.snapshots("table_oid = %s", (objid,))
            before = [s for s in snaps if s["captured_at"] <= dropped_at]
            if not before:
                ok = False
                self.fail("%s%s.%s (%s, oid %s) dropped at %s without a snapshot captured before it (snapshots of that oid: %s)"
                          % (label, schema, name, otype, objid, dropped_at,
                             [(s["schema_name"], s["table_name"], str(s["captured_at"])) for s in snaps]))
        if ok and truth_rows:
            self.ok("%s%d dropped relation(s) each have a snapshot captured before the drop" % (label, len(truth_rows)))
        return ok

    def check_event(self, schema, table, outcome="written", drop_outcome=None, oid=None, wait=10.0, label=None,
                    schema_may_be_null=False):
        """A ledger row for schema.table with this outcome (and, once confirmed, this drop_outcome)."""
        label = label or "%s.%s" % (schema, table)
        where = "(schema_name = %s" + (" OR schema_name IS NULL)" if schema_may_be_null else ")") + " AND table_name = %s"
        params = [schema, table]
        if oid is not None:
            where += " AND table_oid = %s"
            params.append(oid)

        def rows():
            return [e for e in self.events(where, params) if e["outcome"] == outcome]
        got = self.wait_for(rows, timeout=wait if outcome else 2)
        if not got:
            allrows = [(e["outcome"], e["schema_name"], e["table_name"], e["table_oid"], e["drop_outcome"], e["error"])
                       for e in self.events(where, params)]
            self.fail("%s: no drop_events row with outcome %s (rows for it: %s)" % (label, outcome, allrows))
            return None
        if drop_outcome is not None:
            def confirmed():
                r = [e for e in rows() if e["drop_outcome"] is not None]
                return r
            got2 = self.wait_for(confirmed, timeout=wait)
            outcomes = sorted({e["drop_outcome"] for e in got2}) if got2 else []
            if outcomes != [drop_outcome]:
                self.fail("%s: ledger drop_outcome %s, expected [%s]" % (label, outcomes or "never set", drop_outcome))
                return got
        self.ok("%s: ledger row outcome=%s%s" % (label, outcome,
                                                 "" if drop_outcome is None else " drop_outcome=" + drop_outcome))
        return got

    # ---- reporting ----

    def ok(self, msg):
        print("ok: " + msg, flush=True)

    def fail(self, msg):
        print("FAIL: " + msg, flush=True)
        self.failures += 1

    def check(self, cond, msg, detail=""):
        if cond:
            self.ok(msg)
        else:
            self.fail(msg + (": " + str(detail) if detail != "" else ""))
        return cond

    def cleanup(self):
        for p in list(self.instances):
            self.stop_predrop(p)
        for db in (self.db, self.store_db):
            try:
                self._admin_conn("DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
            except Exception as e:  # noqa: BLE001
                print("# could not drop %s: %s" % (db, e))
        if self.capture_role:
            # Its grants and default privileges went with the databases.
            try:
                self._admin_conn("DROP ROLE IF EXISTS %s" % self.capture_role)
            except Exception as e:  # noqa: BLE001
                print("# could not drop role %s: %s" % (self.capture_role, e))

    def finish(self):
        logs = self.logs
        self.cleanup()
        if self.failures:
            for log in logs:
                try:
                    with open(log, errors="replace") as f:
                        tail = f.readlines()[-40:]
                    print("----- tail of %s -----\n%s-----" % (log, "".join(tail)))
                except OSError:
                    pass
            print("%s: %d check(s) FAILED" % (self.name, self.failures))
            sys.exit(1)
        print("%s: all checks passed" % self.name)
        sys.exit(0)


def main(fn, name, cls=None, **kw):
    """Run fn(h) with a Hold (or cls, a Hold of another kind); any exception is a failure; always clean up."""
    h = (cls or Hold)(name, **kw)
    try:
        fn(h)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        h.fail("%s: %s: %s" % (name, type(e).__name__, e))
    h.finish()
