"""The reply comparison of the quarantine's wire tests (tests/quarantine/test_wire_*.py).

A quarantined DROP reaches the server as a DO block in the statement's place; the client must see
exactly what the server would have said to the DROP itself. So every scenario runs twice, on two
databases prepared by the same SQL: once straight to the server (the direct database) and once through
predrop with a quarantine rule (the Hold's database), and what each client saw is compared whole.
Then the ground truth: truth.drops (the sql_drop event trigger of holdlib) in the direct database
has the table and in predrop's has not, the table's OID now lives in the quarantine schema, and the
ledger says quarantined.

    w = Wire("psql")
    w.setup("CREATE TABLE t (a int)")     # in both databases
    w.start()                             # predrop with the quarantine rule
    oid = w.oid("public.t")               # predrop's database
    d, v = w.psql_both("DROP TABLE t;")   # the script's whole output, direct and via
    w.same("DROP TABLE t", d, v)
    w.check_quarantined("public.t", oid)
"""
import difflib
import os
import pprint
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hold"))
import holdlib  # noqa: E402

QSCHEMA = "predrop_quarantine"
CONFIG = """
rules:
  - {kinds: [drop_table, drop_schema], action: quarantine}
"""
PSQL_HEAD = "\\set VERBOSITY verbose\n\\set ON_ERROR_STOP 0\n"


class Wire(holdlib.Hold):
    def __init__(self, name):
        super().__init__(name)
        self.direct_db = self.db + "_direct"
        self.other = self.db + "_other"   # a second login role, owner of nothing
        self.compared = 0
        self._admin_conn("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.direct_db)
        self._admin_conn("CREATE DATABASE %s TEMPLATE template0" % self.direct_db)
        self.exec(holdlib.TRUTH_SQL, db=self.direct_db)
        self._admin_conn("DROP ROLE IF EXISTS %s" % self.other)
        self._admin_conn("CREATE ROLE %s LOGIN" % self.other)

    def setup(self, sql):
        """SQL (OTHER stands for the second role) run in both databases."""
        sql = sql.replace("OTHER", self.other)
        for db in (self.direct_db, self.db):
            self.exec(sql, db=db)

    def start(self, *args):
        return self.start_predrop("--hold-timeout-ms", "10000", *args, config=CONFIG)

    # ---- running a client on both sides ----

    def sides(self):
        """(label, host, port, database) of the direct run and the run through predrop."""
        return [("direct", self.host, self.port, self.direct_db), ("via", self.host, self.p.port, self.db)]

    def psql_run(self, script, port, db, user="postgres", variables=()):
        cmd = ["psql", "-X", "-a", "-h", self.host, "-p", str(port), "-U", user, "-d", db, "-f", "-"]
        for k, v in variables:
            cmd += ["-v", "%s=%s" % (k, v)]
        r = subprocess.run(cmd, input=PSQL_HEAD + script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=120)
        return "%s\n(psql exit %d)\n" % (r.stdout, r.returncode)

    def psql_both(self, script, user="postgres", variables=None):
        """The script through psql (verbose, ON_ERROR_STOP off) direct and via; VARIABLES(side) gives
        psql -v pairs per side (names that must differ between the runs, such as a 2PC gid)."""
        out = []
        for side, _, port, db in self.sides():
            out.append(self.psql_run(script, port, db, user, variables(side) if variables else ()))
        return out[0], out[1]

    def same(self, label, direct, via):
        """DIRECT and VIA are what the client saw; they must be equal."""
        self.compared += 1
        if direct == via:
            self.ok("%s: the client saw the same through predrop as direct" % label)
            print("\n".join("#   " + l for l in str(direct).splitlines()))
            return True
        a, b = (x.splitlines() if isinstance(x, str) else pprint.pformat(x, width=160).splitlines()
                for x in (direct, via))
        diff = "\n".join(difflib.unified_diff(a, b, "direct", "via predrop", lineterm=""))
        self.fail("%s: the client saw something else through predrop than direct:\n%s" % (label, diff))
        return False

    # ---- ground truth ----

    def dq(self, sql, params=None):
        return self.q(sql, params, db=self.direct_db)

    def in_quarantine(self, oid):
        r = self.q("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE c.oid = %s AND n.nspname = %s", (oid, QSCHEMA))
        return r[0][0] if r else None

    def quarantine_count(self):
        r = self.q("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", (QSCHEMA,))
        return r[0][0]

    def direct_dropped(self, schema, name):
        return bool(self.dq("SELECT 1 FROM truth.drops WHERE schema_name = %s AND object_name = %s",
                            (schema, name)))

    def via_dropped(self, oid):
        return bool(self.q("SELECT 1 FROM truth.drops WHERE objid = %s", (oid,)))

    def check_quarantined(self, qualified, oid, ledger=True):
        """QUALIFIED (oid OID in predrop's database) was quarantined there and dropped direct."""
        schema, name = qualified.split(".", 1)
        self.check(self.direct_dropped(schema, name), "%s: direct, the server really dropped it" % qualified)
        self.check(not self.via_dropped(oid), "%s: through predrop, truth.drops has no drop of oid %s" % (qualified, oid),
                   self.q("SELECT * FROM truth.drops WHERE objid = %s", (oid,)))
        qname = self.in_quarantine(oid)
        self.check(qname is not None and qname.startswith("q%d_" % oid),
                   "%s: through predrop, oid %s is in %s (as %s)" % (qualified, oid, QSCHEMA, qname))
        self.check(not self.exists(qualified), "%s: through predrop, the name is gone from its schema" % qualified)
        if ledger:
            self.check_ledger(schema, name, oid)

    def check_ledger(self, schema, name, oid, label=None):
        """The newest ledger row of OID says quarantined, with the id of the held row predrop.quarantine
        has for it, and that row names it (an earlier statement the server refused, such as DROP SCHEMA
        without CASCADE, or one undone by ROLLBACK TO SAVEPOINT, left its own row, not_dropped)."""
        label = label or "%s.%s" % (schema, name)

        def written():
            # Event ids sort in the order predrop made them (capture/store_writer.hpp, new_uuid).
            return sorted(self.events("schema_name = %s AND table_name = %s AND table_oid = %s AND outcome = 'written'",
                                      (schema, name, oid)), key=lambda r: str(r["id"]))

        def newest():
            rows = written()
            return rows[-1:] if rows and rows[-1]["drop_outcome"] is not None else []
        ev = self.wait_for(newest, timeout=15)
        e = ev[0] if ev else None
        self.check(e is not None and e["drop_outcome"] == "quarantined" and e.get("quarantine_id") is not None,
                   "%s: the ledger's row says quarantined, with its quarantine_id" % label,
                   [(r["outcome"], r["drop_outcome"], r.get("quarantine_id")) for r in self.events(
                       "schema_name = %s AND table_name = %s AND table_oid = %s", (schema, name, oid))])

        def held():
            return self.sq("SELECT id::text, state, snapshot_id::text, event_id::text, application_name, client_addr "
                           "FROM predrop.quarantine WHERE database_name = %s AND table_oid = %s", (self.db, oid))
        rows = self.wait_for(held, timeout=15)
        self.check(len(rows) == 1 and rows[0][1] == "held", "%s: predrop.quarantine has a held row" % label, rows)
        if e is not None and e.get("quarantine_id") is not None and rows:
            self.check(str(e["quarantine_id"]) == rows[0][0], "%s: the ledger's quarantine_id is the held row's id" % label,
                       (str(e["quarantine_id"]), rows[0][0]))
            # Where the table saw two DROPs, the earlier one's outcome check may run after the later
            # one's move stood, and find the table quarantined too: the row is still the later's.
            want = (str(e["snapshot_id"]), str(e["id"]), e["application_name"], e["client_addr"])
            self.check(tuple(rows[0][2:]) == want,
                       "%s: the held row has its DROP's snapshot, ledger row, application and client" % label,
                       (tuple(rows[0][2:]), want))
            earlier = [(str(r["id"]), r["drop_outcome"], r.get("quarantine_id")) for r in written()[:-1]
                       if r.get("quarantine_id") is not None and str(r["quarantine_id"]) == rows[0][0]]
            self.check(not earlier, "%s: no earlier DROP's ledger row claims the quarantine" % label, earlier)

    def held_drops(self, oid, count):
        """The ledger rows of OID's held DROPs (written or deduplicated), in the order made, once there
        are COUNT and every one has its outcome: (application, drop_outcome, quarantine_id, id)."""
        def rows():
            r = sorted(self.events("table_oid = %s AND outcome IN ('written', 'deduplicated')", (oid,)),
                       key=lambda e: str(e["id"]))
            return r if len(r) == count and all(e["drop_outcome"] is not None for e in r) else []
        return [(e["application_name"], e["drop_outcome"], str(e["quarantine_id"]) if e.get("quarantine_id") else None,
                 str(e["id"])) for e in self.wait_for(rows, timeout=15)]

    def check_first_stood(self, oid, label):
        """Two DROPs of OID's table, the second a DROP TABLE IF EXISTS that found nothing to move: the
        first is quarantined and predrop.quarantine's row names it, the second is not_dropped."""
        held = self.wait_for(lambda: self.sq("SELECT id::text, event_id::text FROM predrop.quarantine "
                                             "WHERE database_name = %s AND table_oid = %s", (self.db, oid)), timeout=15)
        got = self.held_drops(oid, 2)
        self.check(len(held) == 1 and [g[1:3] for g in got] == [("quarantined", held[0][0]), ("not_dropped", None)]
                   and held[0][1] == got[0][3],
                   "%s: the first DROP, whose move stood, is quarantined and holds the row; the second not_dropped"
                   % label, (held, got))

    def check_kept(self, qualified, oid, label):
        """Nothing happened to QUALIFIED on either side: still in its schema, never dropped."""
        schema, name = qualified.split(".", 1)
        self.check(self.oid(qualified) == oid and self.in_quarantine(oid) is None,
                   "%s: through predrop, %s is still in its schema" % (label, qualified))
        self.check(self.dq("SELECT to_regclass(%s) IS NOT NULL", (qualified,))[0][0],
                   "%s: direct, %s is still there" % (label, qualified))
        self.check(not self.via_dropped(oid) and not self.direct_dropped(schema, name),
                   "%s: %s dropped on neither side" % (label, qualified))

    def check_really_dropped(self, schema, name, oid, label):
        """Dropped for real on both sides (what the quarantine passes through)."""
        self.check(self.via_dropped(oid) and self.in_quarantine(oid) is None,
                   "%s: through predrop, %s.%s (oid %s) was really dropped" % (label, schema, name, oid))
        self.check(self.direct_dropped(schema, name), "%s: direct, %s.%s was really dropped" % (label, schema, name))

    def cleanup(self):
        super().cleanup()
        for sql in ("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.direct_db, "DROP ROLE IF EXISTS %s" % self.other):
            try:
                self._admin_conn(sql)
            except Exception as e:  # noqa: BLE001
                print("# cleanup: %s: %s" % (sql, e))

    def finish(self):
        print("# %d client replies compared" % self.compared)
        super().finish()


def main(fn, name):
    holdlib.main(fn, name, cls=Wire)

