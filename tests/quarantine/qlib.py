"""Shared helpers of the quarantine tests (tests/quarantine/), for /usr/bin/python3 with psycopg2.

Each test gets its own database, store database and roles (names carry the test's database name, as
roles are cluster-wide), so tests run in parallel:
  <db>_owner    owns the tables and runs the move SQL, as the proxy runs it in the client's session
  <db>_cap      predrop's capture role: no superuser; owns the quarantine schema (it ran the prepare
                SQL) and is a member of <db>_owner, as the README's least privileges say
  <db>_reader   an ordinary role with SELECT on some tables

    q = Quarantine("roundtrip")
    q.owner("CREATE TABLE t (...)")
    q.move(["t"])                     # quarantine::move_sql in BEGIN ... COMMIT as <db>_owner
    r = q.predrop("undrop", "public.t")
    q.check(r.rc == 0, "undrop succeeds", r)
    q.finish()

Environment: PGHOST PGPORT (superuser postgres, trust), PREDROP_BIN, QUARANTINE_SQL_PRINT (the
test-only printer of quarantine/move_sql.hpp), PREDROP_SOURCE_DIR.
"""
import json
import os
import random
import subprocess
import sys
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("PREDROP_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
QSCHEMA = "predrop_quarantine"


class Run:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return f"rc={self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}"


class Quarantine:
    def __init__(self, name):
        for var in ("PGHOST", "PGPORT", "PREDROP_BIN", "QUARANTINE_SQL_PRINT"):
            if not os.environ.get(var):
                print(f"FAIL: {var} is not set (run through ctest against scripts/test.sh's cluster)")
                sys.exit(1)
        self.host, self.port = os.environ["PGHOST"], int(os.environ["PGPORT"])
        self.db = f"q_{name}_{os.getpid()}_{random.randint(0, 99999)}"
        self.store_db = self.db + "_store"
        self.failures = []
        self.passes = 0
        su = self.connect("postgres", "postgres")
        with su.cursor() as c:
            c.execute(f'CREATE DATABASE "{self.db}"')
            c.execute(f'CREATE DATABASE "{self.store_db}"')
            for role in ("owner", "cap", "reader"):
                c.execute(f'CREATE ROLE "{self.role(role)}" LOGIN')
            c.execute(f'GRANT "{self.role("owner")}" TO "{self.role("cap")}"')
            c.execute(f'GRANT CREATE ON DATABASE "{self.db}" TO "{self.role("cap")}"')
        su.close()
        self.su(f'GRANT CREATE, USAGE ON SCHEMA public TO "{self.role("owner")}"')
        self.su(f'GRANT USAGE ON SCHEMA public TO "{self.role("reader")}"')
        self.run_sql(self.role("cap"), self.sql_print("prepare"))
        r = self.predrop("migrate", store=True, capture=False)
        if r.rc != 0:
            self.fail_now(f"predrop migrate failed: {r}")

    def role(self, which):
        return f"{self.db}_{which}"

    def connect(self, user, db=None):
        c = psycopg2.connect(host=self.host, port=self.port, user=user, dbname=db or self.db)
        c.autocommit = True
        return c

    def run_sql(self, user, sql, db=None):
        c = self.connect(user, db)
        try:
            with c.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def su(self, sql, db=None):
        return self.run_sql("postgres", sql, db)

    def owner(self, sql):
        return self.run_sql(self.role("owner"), sql)

    def value(self, sql, user="postgres", db=None):
        rows = self.run_sql(user, sql, db)
        return rows[0][0] if rows else None

    def sql_print(self, what, *args):
        r = subprocess.run([os.environ["QUARANTINE_SQL_PRINT"], what, *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            self.fail_now(f"quarantine_sql_print {what} {args}: {r.stderr}")
        return r.stdout

    def move(self, names, *flags, user=None, commit=True, via_function=True):
        """The move SQL in a transaction of USER (the owner), as the proxy runs it: by default the call
        of the function the prepare installed, else the inline block. Returns None, or the error's
        message when the block raised (the transaction is then rolled back)."""
        sql = self.sql_print("move", *flags, *(["--function"] if via_function else []), *names)
        c = self.connect(user or self.role("owner"))
        c.autocommit = False
        try:
            with c.cursor() as cur:
                cur.execute(sql)
            c.commit() if commit else c.rollback()
            return None
        except psycopg2.Error as e:
            c.rollback()
            return e.pgerror or str(e)
        finally:
            c.close()

    def conninfo(self, user, db):
        return f"host={self.host} port={self.port} user={user} dbname={db}"

    def predrop(self, *args, capture=True, store=True, env=None, timeout=120):
        cmd = [os.environ["PREDROP_BIN"], *args]
        if capture:
            cmd += ["--capture", self.conninfo(self.role("cap"), self.db)]
        if store:
            cmd += ["--store", self.conninfo("postgres", self.store_db)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=env)
        return Run(r.returncode, r.stdout, r.stderr)

    def held(self):
        """The quarantine's catalog rows as dicts (quarantine_table, oid, detail, bytes)."""
        rows = self.su(self.sql_print("catalog"))
        return [{"quarantine_table": r[0], "oid": r[1], "detail": r[2], "bytes": r[3]} for r in rows]

    def store_rows(self):
        rows = self.su("SELECT id::text, schema_name, table_name, state, state_reason FROM predrop.quarantine "
                       "ORDER BY dropped_at, id", db=self.store_db)
        return [dict(zip(("id", "schema", "table", "state", "reason"), r)) for r in rows]

    def set_dropped_at(self, quarantine_table, iso):
        """The test's clock: rewrites dropped_at in the quarantined table's comment (the truth)."""
        self.su(f"""DO $$ DECLARE d jsonb := obj_description('{QSCHEMA}.{quarantine_table}'::regclass, 'pg_class')::jsonb;
                 BEGIN EXECUTE format('COMMENT ON TABLE {QSCHEMA}.%I IS %L', '{quarantine_table}',
                                      jsonb_set(d, '{{dropped_at}}', to_jsonb('{iso}'::text))::text); END $$""")

    def check(self, cond, what, detail=""):
        if cond:
            self.passes += 1
            print(f"ok   {what}")
        else:
            self.failures.append(what)
            print(f"FAIL {what}\n{detail}")
        return cond

    def fail_now(self, msg):
        print(f"FAIL {msg}")
        self.cleanup()
        sys.exit(1)

    def cleanup(self):
        try:
            su = self.connect("postgres", "postgres")
            with su.cursor() as c:
                for d in (self.db, self.store_db):
                    c.execute(f'DROP DATABASE IF EXISTS "{d}" WITH (FORCE)')
                for role in ("reader", "cap", "owner"):
                    c.execute(f'DROP ROLE IF EXISTS "{self.role(role)}"')
            su.close()
        except psycopg2.Error as e:
            print(f"cleanup: {e}")

    def finish(self):
        print(f"{self.passes} checks passed, {len(self.failures)} failed")
        if self.failures:
            print("failed: " + "; ".join(self.failures))
            print(f"(databases {self.db} and {self.store_db} kept for inspection)")
            sys.exit(1)
        self.cleanup()
        sys.exit(0)


def main(fn, name):
    q = Quarantine(name)
    try:
        fn(q)
    except Exception as e:  # an unexpected error is a failed test, with its traceback
        import traceback
        traceback.print_exc()
        q.failures.append(f"unexpected {type(e).__name__}: {e}")
    q.finish()
