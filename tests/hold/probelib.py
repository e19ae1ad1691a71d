"""Shared pieces of the relay probes (tests/hold/test_probe_*.py): a hold that lasts as long as the
test wants, and the checks that a held statement never reached the server.

The hold is made to last with a gate in the store: a trigger on predrop.schema_snapshots makes
predrop's snapshot INSERT wait (in pg_sleep, polling a one-row table) while the gate is closed, so
with a long hold timeout the statement stays held until the test opens the gate (at the latest
until the store's statement_timeout, 10 s), and with a short one the snapshot fails: fail open or
fail closed. A lock on the snapshot table would not do: predrop's store sessions give up on a lock
after 2 s.
"""
import os
import subprocess
import time

import holdlib  # noqa: F401  (puts tests/support on sys.path)

GATE_SQL = """
CREATE TABLE IF NOT EXISTS public.probe_gate (closed boolean NOT NULL);
INSERT INTO public.probe_gate SELECT false WHERE NOT EXISTS (SELECT FROM public.probe_gate);
CREATE OR REPLACE FUNCTION public.probe_gate_wait() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $f$
BEGIN
  WHILE (SELECT closed FROM public.probe_gate) LOOP
    PERFORM pg_sleep(0.02);
  END LOOP;
  RETURN NEW;
END $f$;
DROP TRIGGER IF EXISTS probe_gate ON predrop.schema_snapshots;
CREATE TRIGGER probe_gate BEFORE INSERT ON predrop.schema_snapshots
  FOR EACH ROW EXECUTE FUNCTION public.probe_gate_wait();
"""


class StoreGate:
    """Closed: every snapshot write waits. Install after predrop has migrated the store."""

    def __init__(self, h):
        self.h = h
        h.exec(GATE_SQL, db=h.store_db)

    def close(self):
        self.h.exec("UPDATE public.probe_gate SET closed = true", db=self.h.store_db)
        return self

    def open(self):
        self.h.exec("UPDATE public.probe_gate SET closed = false", db=self.h.store_db)

    def __enter__(self):
        return self.close()

    def __exit__(self, *exc):
        self.open()
        wait_drained(self.h)
        return False


def store_waiters(h):
    """predrop's snapshot writes waiting at the closed gate: one per hold kept on by it."""
    return h.sq("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'predrop-store' "
                "AND state = 'active' AND wait_event = 'PgSleep'", (h.store_db,))[0][0]


def store_busy(h):
    return h.sq("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'predrop-store' "
                "AND state = 'active'", (h.store_db,))[0][0]


def wait_drained(h, timeout=15.0):
    """After opening the gate: no snapshot write of an earlier hold is still going."""
    return h.wait_for(lambda: store_busy(h) == 0, timeout=timeout, interval=0.05)


def wait_held(h, label, before=0, timeout=10.0):
    """True once a snapshot write more than BEFORE waits at the closed gate (the statement is held)."""
    ok = h.wait_for(lambda: store_waiters(h) > before, timeout=timeout, interval=0.05)
    h.check(bool(ok), "%s: the statement is held (predrop's snapshot write waits at the closed gate)" % label)
    return bool(ok)


def wait_snapshot(h, oid, timeout=10.0):
    """After the gate opened: the snapshot of OID is written, so its hold has ended one way or the other."""
    return h.wait_for(lambda: h.snapshots("table_oid = %s", (oid,)), timeout=timeout, interval=0.1)


def check_survived(h, label, qualified, oid):
    h.check(h.exists(qualified), "%s: %s still exists" % (label, qualified))
    h.check(not h.truth("objid = %s", (oid,)), "%s: the server recorded no drop of %s" % (label, qualified),
            h.truth("objid = %s", (oid,)))


def hold_libpq():
    exe = os.environ.get("HOLD_LIBPQ")
    if not exe:
        raise RuntimeError("HOLD_LIBPQ unset (ctest sets it to the hold_libpq target)")
    return exe


class Driver:
    """hold_libpq run in a mode that waits for a line on stdin before its next step."""

    def __init__(self, conninfo, mode, *args):
        self.proc = subprocess.Popen([hold_libpq(), conninfo, mode] + list(args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []

    def wait_line(self, prefix, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                return None
            self.lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line.rstrip("\n")
        return None

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=30.0):
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            self.lines.append("(killed after %d s)" % timeout)
        self.lines += out.splitlines()
        print("\n".join("#   " + l for l in self.lines))
        return self.proc.returncode
