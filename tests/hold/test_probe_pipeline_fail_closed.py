#!/usr/bin/python3
"""Probe: fail closed inside a pipeline of five Syncs, with statements before and after the refused DROP.

guarded has on_failure: closed and the store's gate is closed (tests/hold/probelib.py), so the snapshot of guarded.victim times out
(hold timeout 500 ms) and predrop refuses the DROP. Whatever predrop does to refuse it, the client
must see what the server gives for the same pipeline with the DROP replaced by a statement that
raises: the same messages in the same order, each byte for byte, errors compared by their presence
only (their fields are predrop's own). Two pipelines on a bare socket (the DROP prepared by name in
the first segment and executed in the third; the DROP parsed, bound and executed in the third), and
libpq's pipeline mode (tests/hold/hold_libpq.cpp, mode pipeline5) compared line for line.
Afterwards guarded.victim exists and the server recorded no drop.
"""
import subprocess

import holdlib
import probelib
import rawpg

CONFIG = """
rules:
  - {schema: "guarded", on_failure: closed}
default: {action: snapshot, on_failure: open}
"""
DROP = "DROP TABLE guarded.victim"
RAISES = "DO $$BEGIN RAISE EXCEPTION 'refused in place of the DROP'; END$$"
LOG = "INSERT INTO guarded.log VALUES (1)"


def run_select(sql):
    return rawpg.parse("", sql) + rawpg.bind("", "") + rawpg.describe_portal("") + rawpg.execute("")


def run_named(stmt):
    return rawpg.bind("", stmt) + rawpg.execute("")


def pipeline(shape, victim):
    """Five segments, each ending in Sync; the third holds the victim between two INSERTs."""
    if shape == "named":
        seg1 = rawpg.parse("s_victim", victim) + rawpg.parse("s_log", LOG)
        middle = run_named("s_victim")
    else:
        seg1 = rawpg.parse("s_log", LOG)
        middle = rawpg.parse("", victim) + rawpg.bind("", "") + rawpg.execute("")
    segs = [seg1,
            run_named("s_log") + run_select("SELECT 2"),
            run_named("s_log") + middle + run_named("s_log"),
            run_select("SELECT count(*) FROM guarded.log"),
            run_named("s_log") + run_select("SELECT 5")]
    return b"".join(s + rawpg.sync() for s in segs)


def normalised(msgs):
    return [(t, b"") if t == "E" else (t, b) for t, b in msgs]


def transcript(h, port, shape, victim):
    h.exec("TRUNCATE guarded.log")
    c = rawpg.Raw(port, h.db)
    c.send(pipeline(shape, victim))
    msgs = c.read_until_ready(count=5, timeout=20)
    c.send(rawpg.query("SELECT count(*) FROM guarded.log"))
    msgs += c.read_until_ready(timeout=10)
    c.send(rawpg.terminate())
    c.close()
    print("# %s pipeline, %s, port %d: %s" % (shape, victim.split()[0], port, rawpg.describe(msgs)))
    return msgs


def libpq_transcript(h, conninfo, victim):
    h.exec("TRUNCATE guarded.log")
    r = subprocess.run([probelib.hold_libpq(), conninfo, "pipeline5", victim], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    print("# hold_libpq pipeline5 %s (exit %d):\n%s" % (victim.split()[0], r.returncode,
                                                         "\n".join("#   " + l for l in r.stdout.splitlines())))
    return r.returncode, r.stdout.splitlines()


def test(h):
    h.exec("CREATE SCHEMA guarded; CREATE TABLE guarded.victim (a int); CREATE TABLE guarded.log (n int)")
    oid = h.oid("guarded.victim")
    h.start_predrop("--hold-timeout-ms", "500", config=CONFIG)
    with probelib.StoreGate(h):
        for shape in ("named", "unnamed"):
            direct = transcript(h, h.port, shape, RAISES)
            through = transcript(h, h.p.port, shape, DROP)
            h.check(rawpg.describe(direct).count("E") == 1, "%s pipeline direct: one error, in the third segment"
                    % shape, rawpg.describe(direct))
            same = normalised(direct) == normalised(through)
            h.check(same, "%s pipeline: every reply through predrop is the server's for the raising statement"
                    % shape, "direct  %s\n  predrop %s" % (rawpg.describe(direct), rawpg.describe(through)))
            if not same:
                for i, (a, b) in enumerate(zip(normalised(direct), normalised(through))):
                    if a != b:
                        print("# first difference at message %d: direct %r, predrop %r" % (i, a, b))
                        break
        rc_d, direct = libpq_transcript(h, h.conninfo(), RAISES)
        rc_p, through = libpq_transcript(h, h.proxy_conninfo(), DROP)
        h.check(rc_d == 0, "libpq pipeline5 direct: five syncs, every result read")
        h.check(rc_p == 0 and direct == through, "libpq pipeline5: the results through predrop are those direct",
                "direct %s\n  predrop %s" % (direct, through))
    probelib.check_survived(h, "pipelines with a refused DROP", "guarded.victim", oid)
    h.check(h.p.alive(), "predrop is still running")


if __name__ == "__main__":
    holdlib.main(test, "pipeline_closed")
