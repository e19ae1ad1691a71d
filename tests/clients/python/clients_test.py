#!/usr/bin/python3
"""psycopg2, SQLAlchemy and pandas direct vs through predrop.

Run with Debian's /usr/bin/python3 (python3-psycopg2, python3-sqlalchemy, python3-pandas). Every
scenario runs against a fresh database directly, then against a fresh database of the same name
through predrop; the transcripts (results, error texts, SQLSTATEs, notices; never PIDs or timings)
must be identical. Things that need no comparison (cancel latency, notification sender PID, pandas
round-trip equality) are checked in place and recorded as "check ok"/"CHECK FAILED" lines.
"""
import datetime
import decimal
import difflib
import hashlib
import io
import os
import re
import select
import sys
import tempfile
import threading
import time

import pandas as pd
import psycopg2
import psycopg2.extensions
import psycopg2.extras
import sqlalchemy as sa
from sqlalchemy import orm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from predrop_harness import Predrop  # noqa: E402

HOST = os.environ.get("PGHOST", "127.0.0.1")
DIRECT_PORT = int(os.environ.get("PGPORT", "0"))
USER = os.environ.get("PGUSER", "postgres")
DB = "cl_python"


class Transcript:
    def __init__(self):
        self.lines = []

    def __call__(self, *parts):
        self.lines.append(" ".join(str(p) for p in parts))

    def check(self, ok, what):
        self("check ok:" if ok else "CHECK FAILED:", what)

    def error(self, label, e):
        diag = getattr(e, "diag", None)
        self(label, type(e).__name__, "pgcode=%s" % getattr(e, "pgcode", None),
             "primary=%s" % (diag.message_primary if diag else None),
             "detail=%s" % (diag.message_detail if diag else None))
        self("  text:", str(e).strip().replace("\n", " | "))


def admin():
    c = psycopg2.connect(host=HOST, port=DIRECT_PORT, dbname="postgres", user=USER)
    c.autocommit = True
    return c


def recreate_db():
    c = admin()
    with c.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
        cur.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {DB} TEMPLATE template0")
    c.close()


def drop_db():
    c = admin()
    with c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    c.close()


# ------------------------------------------------------------------------------------------------
def psycopg2_scenario(t, port):
    conn = psycopg2.connect(host=HOST, port=port, dbname=DB, user=USER, sslmode="disable",
                            application_name="py-clients")
    t("server_version", conn.server_version, "encoding", conn.encoding,
      "std_strings", conn.get_parameter_status("standard_conforming_strings"),
      "tz", conn.get_parameter_status("TimeZone"))
    t.check(conn.info.backend_pid == _one(conn, "SELECT pg_backend_pid()"), "backend_pid matches pg_backend_pid()")
    cur = conn.cursor()
    cur.execute("""CREATE TABLE things (id serial PRIMARY KEY, i int, f float8, n numeric(12,3), s text,
                   b bytea, d date, ts timestamptz, arr int[], j jsonb, flag bool, u uuid)""")
    row = (7, 1.25, decimal.Decimal("12.345"), "ünï ☃ 'quote' \\ back", b"\x00\x01\xff",
           datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc),
           [1, 2, None], psycopg2.extras.Json({"a": [1, 2], "b": None}), True, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    cur.execute("INSERT INTO things (i, f, n, s, b, d, ts, arr, j, flag, u) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id", row)
    t("insert returning", cur.fetchone(), cur.rowcount, cur.statusmessage)
    cur.execute("INSERT INTO things (i, s) VALUES (%(i)s, %(s)s)", {"i": None, "s": None})
    cur.executemany("INSERT INTO things (i, s, f) VALUES (%s, %s, %s)", [(k, "many %d" % k, k / 3) for k in range(2000)])
    t("executemany rowcount", cur.rowcount)
    psycopg2.extras.execute_values(cur, "INSERT INTO things (i, s) VALUES %s", [(k, "values %d" % k) for k in range(5000)], page_size=700)
    psycopg2.extras.execute_batch(cur, "UPDATE things SET flag = %s WHERE i = %s", [(k % 2 == 0, k) for k in range(300)], page_size=50)
    conn.commit()
    cur.execute("SELECT id, i, f, n, s, b, d, ts, arr, j, flag, u FROM things ORDER BY id LIMIT 3")
    t("description", [(d.name, d.type_code) for d in cur.description])
    for r in cur.fetchall():
        t("row", tuple(bytes(x) if isinstance(x, memoryview) else x for x in r))
    cur.execute("SELECT count(*), sum(i), count(flag), sum(f)::numeric(20,6) FROM things")
    t("aggregate", cur.fetchone())

    # Server-side (named) cursor, iterated in chunks, fetchmany, scroll.
    with conn.cursor(name="ssc") as ss:
        ss.itersize = 500
        ss.execute("SELECT g, md5(g::text) FROM generate_series(1, 30000) g")
        h = hashlib.md5()
        n = 0
        for g, m in ss:
            h.update(m.encode())
            n += 1
        t("server-side cursor rows", n, h.hexdigest())
    with conn.cursor(name="ssc2", scrollable=True) as ss:
        ss.execute("SELECT i, s FROM things WHERE i IS NOT NULL ORDER BY id")
        t("fetchmany", ss.fetchmany(3))
        ss.scroll(100, mode="absolute")
        t("after scroll", ss.fetchone())
    conn.commit()

    # Transactions: rollback, savepoints, errors, isolation, autocommit.
    cur.execute("INSERT INTO things (i) VALUES (-1)")
    conn.rollback()
    t("after rollback", _one(conn, "SELECT count(*) FROM things WHERE i = -1"))
    try:
        cur.execute("INSERT INTO things (id) VALUES (1)")
    except psycopg2.Error as e:
        t.error("duplicate key", e)
    t("status after error", conn.get_transaction_status())
    try:
        cur.execute("SELECT 1")
    except psycopg2.Error as e:
        t.error("in failed transaction", e)
    conn.rollback()
    cur.execute("SAVEPOINT sp")
    try:
        cur.execute("SELECT 1/0")
    except psycopg2.Error as e:
        t.error("division", e)
    cur.execute("ROLLBACK TO SAVEPOINT sp")
    cur.execute("SELECT 'after savepoint'")
    t("savepoint", cur.fetchone())
    conn.commit()
    conn.set_session(isolation_level="SERIALIZABLE", readonly=True)
    cur.execute("SHOW transaction_isolation")
    t("isolation", cur.fetchone())
    try:
        cur.execute("CREATE TABLE ro (x int)")
    except psycopg2.Error as e:
        t.error("read-only", e)
    conn.rollback()
    conn.set_session(isolation_level="DEFAULT", readonly=False)
    conn.autocommit = True
    cur.execute("SELECT current_setting('transaction_isolation')")
    t("autocommit", cur.fetchone())
    with conn.cursor() as c2:
        for bad in ("SELEC 1", "SELECT * FROM missing_table", "SELECT 'x'::int", "INSERT INTO things (id, i) VALUES ('a', 1)"):
            try:
                c2.execute(bad)
            except psycopg2.Error as e:
                t.error(bad, e)
    conn.autocommit = False

    # Notices.
    cur.execute("DO $$ BEGIN RAISE NOTICE 'py notice %', 1; RAISE WARNING 'py warning'; END $$")
    t("notices", [n.strip() for n in conn.notices])
    conn.commit()

    # COPY through copy_expert.
    buf = io.StringIO()
    cur.copy_expert("COPY (SELECT id, i, s FROM things ORDER BY id) TO STDOUT WITH (FORMAT csv)", buf)
    data = buf.getvalue()
    t("copy out", len(data), hashlib.md5(data.encode()).hexdigest())
    cur.execute("CREATE TABLE things2 (id int, i int, s text)")
    cur.copy_expert("COPY things2 FROM STDIN WITH (FORMAT csv)", io.StringIO(data))
    cur.execute("SELECT count(*), md5(string_agg(id || ',' || coalesce(i::text, '') || ',' || coalesce(s, ''), ';' ORDER BY id)) FROM things2")
    t("copy in", cur.fetchone())
    conn.commit()

    # LISTEN/NOTIFY between two connections.
    a, b = _autocommit_conn(port), _autocommit_conn(port)
    a.cursor().execute("LISTEN py_chan")
    b.cursor().execute("NOTIFY py_chan, 'hello py'")
    b.cursor().execute("SELECT pg_notify('py_chan', 'second ☃')")
    got = []
    deadline = time.time() + 5
    while len(got) < 2 and time.time() < deadline:
        if select.select([a], [], [], max(0, deadline - time.time())) == ([], [], []):
            break
        a.poll()
        while a.notifies:
            n = a.notifies.pop(0)
            got.append((n.channel, n.payload))
            t.check(n.pid == b.info.backend_pid, "notification pid is the sender's backend pid")
    t("notifications", got)
    a.close()
    b.close()

    # Cancel a long query from another thread.
    c = _autocommit_conn(port)
    timer = threading.Timer(0.3, c.cancel)
    t0 = time.time()
    timer.start()
    try:
        c.cursor().execute("SELECT pg_sleep(30)")
        t("cancel: query was not cancelled")
    except psycopg2.Error as e:
        t.error("cancelled", e)
    elapsed = time.time() - t0
    print("  cancel returned after %.3f s" % elapsed, file=sys.stderr)
    t.check(elapsed < 5, "cancelled pg_sleep(30) returned within 5 s")
    t("usable after cancel", _one(c, "SELECT 'alive'"))
    c.close()
    conn.close()

    # Password auth through psycopg2 (libpq underneath).
    for user, pw in (("scram_user", "scram-secret"), ("scram_user", "nope"), ("md5_user", "md5-secret"), ("md5_user", "nope")):
        try:
            c = psycopg2.connect(host=HOST, port=port, dbname=DB, user=user, password=pw, sslmode="disable")
            t("auth", user, "ok", _one(c, "SELECT current_user"))
            c.close()
        except psycopg2.OperationalError as e:
            t("auth", user, "failed:", re.sub(r"port \d+", "port <port>", str(e).strip()))


def _one(conn, sql):
    with conn.cursor() as c:
        c.execute(sql)
        return c.fetchone()[0]


def _autocommit_conn(port):
    c = psycopg2.connect(host=HOST, port=port, dbname=DB, user=USER, sslmode="disable")
    c.autocommit = True
    return c


# ------------------------------------------------------------------------------------------------
def sqlalchemy_scenario(t, port):
    engine = sa.create_engine(f"postgresql+psycopg2://{USER}@{HOST}:{port}/{DB}?sslmode=disable", future=True)
    md = sa.MetaData()
    people = sa.Table("people", md,
                      sa.Column("id", sa.Integer, primary_key=True),
                      sa.Column("name", sa.String(50), nullable=False, unique=True),
                      sa.Column("born", sa.Date),
                      sa.Column("score", sa.Numeric(8, 2)))
    md.create_all(engine)
    with engine.begin() as c:
        c.execute(people.insert(), [{"name": "p%03d" % i, "born": datetime.date(1990, 1, 1) + datetime.timedelta(days=i),
                                     "score": decimal.Decimal(i) / 4} for i in range(500)])
    with engine.connect() as c:
        r = c.execute(sa.select(people.c.name, people.c.score).where(people.c.id.in_([1, 2, 250])).order_by(people.c.id))
        t("core select", r.all())
        t("text bind", c.execute(sa.text("SELECT count(*) FROM people WHERE score > :s"), {"s": 50}).scalar_one())
    try:
        with engine.begin() as c:
            c.execute(people.insert(), {"name": "tx-row"})
            c.execute(people.insert(), {"name": "p001"})  # duplicate: the whole block rolls back
    except sa.exc.IntegrityError as e:
        t("integrity error", e.orig.pgcode, e.orig.diag.message_primary, e.orig.diag.constraint_name)
    with engine.connect() as c:
        t("tx-row rolled back", c.execute(sa.text("SELECT count(*) FROM people WHERE name = 'tx-row'")).scalar_one())
        # Server-side cursor via stream_results.
        res = c.execution_options(stream_results=True, yield_per=100).execute(sa.text("SELECT g FROM generate_series(1, 20000) g"))
        t("stream_results sum", sum(row[0] for row in res))

    Base = orm.declarative_base()

    class Author(Base):
        __tablename__ = "authors"
        id = sa.Column(sa.Integer, primary_key=True)
        name = sa.Column(sa.String(40), nullable=False)
        books = orm.relationship("Book", back_populates="author", cascade="all, delete-orphan", order_by="Book.id")

    class Book(Base):
        __tablename__ = "books"
        id = sa.Column(sa.Integer, primary_key=True)
        title = sa.Column(sa.Text, nullable=False)
        author_id = sa.Column(sa.ForeignKey("authors.id"), nullable=False)
        author = orm.relationship("Author", back_populates="books")

    Base.metadata.create_all(engine)
    with orm.Session(engine) as s:
        s.add_all([Author(name="a%d" % i, books=[Book(title="t%d-%d" % (i, j)) for j in range(3)]) for i in range(20)])
        s.commit()
        a = s.execute(sa.select(Author).where(Author.name == "a7")).scalar_one()
        t("orm relationship", a.name, [b.title for b in a.books])
        a.books[0].title = "renamed"
        s.delete(a.books[1])
        s.commit()
        t("orm after update", [b.title for b in s.execute(sa.select(Book).where(Book.author_id == a.id).order_by(Book.id)).scalars()])
        s.execute(sa.update(Author).where(Author.id > 15).values(name="bulk"))
        s.rollback()
        t("orm rollback", s.execute(sa.select(sa.func.count()).select_from(Author).where(Author.name == "bulk")).scalar_one())
    engine.dispose()


# ------------------------------------------------------------------------------------------------
def pandas_scenario(t, port):
    engine = sa.create_engine(f"postgresql+psycopg2://{USER}@{HOST}:{port}/{DB}?sslmode=disable")
    n = 3000
    df = pd.DataFrame({
        "id": range(n),
        "name": ["name %d ü" % i if i % 17 else None for i in range(n)],
        "value": [i / 7 for i in range(n)],
        "flag": [i % 3 == 0 for i in range(n)],
        "when": pd.date_range("2024-01-01", periods=n, freq="h"),
    })
    df.to_sql("frame", engine, if_exists="replace", index=False)
    back = pd.read_sql("SELECT * FROM frame ORDER BY id", engine)
    t.check(back.equals(df), "DataFrame round-trip equal")
    t("frame dtypes", dict(back.dtypes.astype(str)))
    t("frame md5", hashlib.md5(back.to_csv(index=False).encode()).hexdigest(), back.shape)
    # Replace with a different shape, multi-row inserts, chunks.
    df2 = pd.DataFrame({"k": ["a", "b", "c"] * 400, "v": range(1200)})
    df2.to_sql("frame", engine, if_exists="replace", index=True, method="multi", chunksize=250)
    back2 = pd.read_sql("SELECT * FROM frame ORDER BY \"index\"", engine, index_col="index")
    back2.index.name = None
    t.check(back2.equals(df2), "replaced DataFrame round-trip equal")
    with engine.connect() as c:
        t("frame columns", [r[0] for r in c.execute(sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'frame' ORDER BY ordinal_position"))])
    df2.to_sql("frame", engine, if_exists="append", index=True)
    t("after append", pd.read_sql("SELECT count(*) AS n FROM frame", engine)["n"].iloc[0])
    chunks = list(pd.read_sql("SELECT * FROM frame ORDER BY v", engine, chunksize=500))
    t("read chunks", len(chunks), sum(len(c) for c in chunks))
    engine.dispose()


SCENARIOS = [("psycopg2", psycopg2_scenario), ("sqlalchemy", sqlalchemy_scenario), ("pandas", pandas_scenario)]


def run_all(port):
    t = Transcript()
    for name, fn in SCENARIOS:
        recreate_db()
        t("===", name)
        try:
            fn(t, port)
        except Exception as e:  # an unexpected failure is part of the transcript (and fails the diff)
            t("SCENARIO ABORTED:", type(e).__name__, str(e).strip().replace("\n", " | "))
    return t.lines


def main():
    if not DIRECT_PORT:
        print("FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)")
        return 1
    workdir = tempfile.mkdtemp(prefix="clients-python.", dir=os.environ.get("PREDROP_TEST_WORKDIR", "/tmp"))
    print("# python: work dir", workdir, "psycopg2", psycopg2.__version__, "sqlalchemy", sa.__version__, "pandas", pd.__version__)
    direct = run_all(DIRECT_PORT)
    with Predrop(workdir) as p:
        proxied = run_all(p.port)
        alive = p.alive()
        log = p.log_text()
    drop_db()
    for name, lines in (("direct", direct), ("predrop", proxied)):
        with open(os.path.join(workdir, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    failures = 0
    diff = list(difflib.unified_diff(direct, proxied, "direct", "predrop", lineterm="", n=2))
    if diff:
        failures += 1
        print("FAIL: transcripts differ direct vs through predrop:")
        print("\n".join(diff[:120]))
    else:
        print("ok: transcripts identical (%d lines)" % len(direct))
    for line in proxied:
        if line.startswith(("CHECK FAILED", "SCENARIO ABORTED")):
            failures += 1
            print("FAIL (through predrop):", line)
    for line in direct:
        if line.startswith(("CHECK FAILED", "SCENARIO ABORTED")):
            failures += 1
            print("FAIL (direct, the test itself is broken):", line)
    if not alive:
        failures += 1
        print("FAIL: predrop died during the test")
    if failures:
        print("----- predrop log -----\n" + log[-4000:])
        print("python: %d failure(s)" % failures)
        return 1
    print("python: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
