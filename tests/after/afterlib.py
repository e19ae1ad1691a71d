"""Shared helpers of the after-capture end-to-end tests (tests/after/), for /usr/bin/python3.

Built on tests/hold/holdlib.py (own database, own store, own predrop per test). The ground truth of
what committed is an event trigger on ddl_command_end and sql_drop in the test database: it records
every CREATE / ALTER / DROP of a table or materialized view in truth.ddl, in the transaction that
ran it, so a rolled-back or never-committed change leaves no row.

    h = After("pandas")                  # a holdlib.Hold with truth.ddl installed
    h.start()                            # predrop with capture.after on (AFTER_TEST_CAPTURE_AFTER=false: off)
    h.expected_afters()                  # Counter {(table_oid, reason): n} the truth says must exist
    h.check_afters_match_truth()         # the store's post_create / post_alter rows against it
    h.diff("public.t")                   # predrop diff SCHEMA.TABLE --format json, parsed

AFTER_TEST_CAPTURE_AFTER=false starts predrop with capture.after: false, so every check of an after
must fail: that is how each test shows it can fail.
"""
import collections
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hold"))
import holdlib  # noqa: E402

DDL_TRUTH_SQL = r"""
CREATE TABLE truth.ddl (
  seq bigserial PRIMARY KEY, command_tag text, object_type text, schema_name text,
  object_identity text, objid oid, txid bigint, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION truth.record_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands()
           WHERE object_type IN ('table', 'table column', 'materialized view') AND schema_name <> 'truth' LOOP
    INSERT INTO truth.ddl (command_tag, object_type, schema_name, object_identity, objid, txid)
    VALUES (r.command_tag, r.object_type, r.schema_name, r.object_identity, r.objid, txid_current());
  END LOOP;
END $f$;
CREATE FUNCTION truth.record_ddl_drop() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_dropped_objects()
           WHERE object_type IN ('table', 'materialized view') AND schema_name <> 'truth' LOOP
    INSERT INTO truth.ddl (command_tag, object_type, schema_name, object_identity, objid, txid)
    VALUES (tg_tag, r.object_type, r.schema_name, r.object_identity, r.objid, txid_current());
  END LOOP;
END $f$;
CREATE EVENT TRIGGER after_truth_ddl ON ddl_command_end EXECUTE FUNCTION truth.record_ddl();
CREATE EVENT TRIGGER after_truth_ddl_drop ON sql_drop EXECUTE FUNCTION truth.record_ddl_drop();
"""

AFTER_REASONS = ("post_create", "post_alter")
CREATES = ("CREATE TABLE", "CREATE TABLE AS", "SELECT INTO", "CREATE MATERIALIZED VIEW")


def capture_after_enabled():
    v = os.environ.get("AFTER_TEST_CAPTURE_AFTER", "true")
    if v not in ("true", "false"):
        print("FAIL: AFTER_TEST_CAPTURE_AFTER=%s: true or false" % v)
        sys.exit(1)
    return v == "true"


class After(holdlib.Hold):
    def __init__(self, name, **kw):
        super().__init__(name, **kw)
        self.exec(DDL_TRUTH_SQL)

    def start(self, *args, extra_config="", **kw):
        """predrop with a short statistics poll, and capture.after as AFTER_TEST_CAPTURE_AFTER says."""
        config = ("capture:\n  after: %s\n  stats_poll_ms: 200\n%s"
                  % ("true" if capture_after_enabled() else "false", extra_config))
        return self.start_predrop("--hold-timeout-ms", "10000", *args, config=config, **kw)

    def through(self, sql):
        """One statement through predrop, in autocommit, on a connection of its own."""
        c = self.pconnect()
        try:
            with c.cursor() as cur:
                cur.execute(sql)
        finally:
            c.close()

    def snapshots(self, where="TRUE", params=None, **_):
        """Every row of predrop.schema_snapshots for this test's database, befores and afters, as dicts."""
        return holdlib.fetch_dicts(self.connect(self.store_db),
                                   "SELECT * FROM predrop.schema_snapshots WHERE database_name = %s AND (" + where + ")"
                                   " ORDER BY captured_at", (self.db,) + tuple(params or ()))

    def reset_truth(self):
        """Forget the DDL of the setup (run directly, not through predrop)."""
        self.exec("DELETE FROM truth.ddl")

    def ddl_truth(self):
        return holdlib.fetch_dicts(self.connect(), "SELECT * FROM truth.ddl ORDER BY seq")

    def expected_afters(self, truth=None):
        """What committed, as afters: per transaction, each table or materialized view it created or
        changed and that still exists at its end, once, post_create if the transaction created it."""
        truth = self.ddl_truth() if truth is None else truth
        by_txn = collections.OrderedDict()
        for r in truth:
            t = by_txn.setdefault(r["txid"], collections.OrderedDict())
            oid = int(r["objid"])
            if r["command_tag"].startswith("DROP"):
                t[oid] = "dropped"
            elif r["command_tag"] in CREATES:
                t[oid] = "post_create"
            elif t.get(oid) != "post_create":
                t[oid] = "post_alter"
        want = collections.Counter()
        for t in by_txn.values():
            for oid, what in t.items():
                if what != "dropped":
                    want[(oid, what)] += 1
        return want

    def afters(self, where="TRUE", params=()):
        return self.snapshots("reason IN ('post_create', 'post_alter') AND (" + where + ")", params)

    def got_afters(self):
        return collections.Counter((int(s["table_oid"]), s["reason"]) for s in self.afters())

    def check_afters_match_truth(self, label, timeout=15.0):
        """The store's post_create / post_alter rows are exactly what truth.ddl says committed."""
        want = self.expected_afters()
        got = self.wait_for(lambda: self.got_afters() == want and self.got_afters(), timeout=timeout) or self.got_afters()
        names = {int(r["objid"]): r["object_identity"] for r in self.ddl_truth()}
        show = lambda c: sorted(("%s(%s)" % (names.get(o, "?"), o), r, n) for (o, r), n in c.items())  # noqa: E731
        return self.check(got == want, "%s: the store's afters are what committed (%d)" % (label, sum(want.values())),
                          "committed without that after %s; afters nothing committed %s"
                          % (show(want - got)[:12], show(got - want)[:12]))

    def wait_after(self, where, params=(), n=1, timeout=15.0):
        return self.wait_for(lambda: (lambda r: r if len(r) >= n else None)(self.afters(where, params)), timeout=timeout) or []

    def snapshot(self, snap_id):
        r = self.snapshots("id = %s", (snap_id,))
        return r[0] if r else None

    def predrop_cli(self, *args, timeout=60):
        r = subprocess.run([self.bin, *args, "--store", self.store_conninfo()], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        return r

    def diff(self, *refs):
        """predrop diff REFS --format json, parsed (None and a failure when it does not answer)."""
        r = self.predrop_cli("diff", *refs, "--format", "json")
        try:
            d = json.loads(r.stdout)
        except ValueError:
            self.fail("predrop diff %s: exit %d, not JSON: %r %r" % (" ".join(refs), r.returncode, r.stdout[-300:], r.stderr[-300:]))
            return None
        return d

    @staticmethod
    def net_change(dd):
        """A diff's change as the text summary reads it: added and removed without the renamed
        columns (the JSON lists keep them, evidence/diff.hpp), renames as (from, to, evidence)."""
        ren = dd.get("renamed_candidates", [])
        to = {r["to"] for r in ren}
        frm = {r["from"] for r in ren}
        return {"added": [a for a in dd.get("added", []) if a not in to],
                "removed": [r for r in dd.get("removed", []) if r not in frm],
                "renamed": [(r["from"], r["to"], r.get("evidence")) for r in ren],
                "type_changed": [(t["column"], t["from"], t["to"]) for t in dd.get("type_changed", [])]}

    def check_pair(self, label, before_reason, after, oid=None):
        """AFTER completes a before of BEFORE_REASON (same OID when given); returns the before."""
        if not after:
            self.fail("%s: no after" % label)
            return None
        before = self.snapshot(after["pair_of"]) if after["pair_of"] else None
        self.check(before is not None, "%s: the %s is paired (pair_of %s names a snapshot)" % (label, after["reason"], after["pair_of"]))
        if before is None:
            return None
        self.check(before["reason"] == before_reason, "%s: its before is a %s" % (label, before_reason), before["reason"])
        self.check(before["captured_at"] < after["captured_at"], "%s: the before was captured first" % label)
        if oid is not None:
            self.check(int(before["table_oid"]) == oid == int(after["table_oid"]),
                       "%s: before and after are the same relation (oid %s)" % (label, oid),
                       (before["table_oid"], after["table_oid"]))
        return before


def main(fn, name, **kw):
    print("# capture.after: %s" % ("true" if capture_after_enabled() else "false"))
    holdlib.main(fn, name, cls=After, **kw)
