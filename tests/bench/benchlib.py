"""What the Python benches share: their results as (section, metric, value) rows, percentiles,
and (holdlib's) a free loopback port. Importing it puts tests/hold on the path, so a bench can
`import holdlib` next."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hold"))
from holdlib import free_port  # noqa: E402,F401

results = []


def record(section, metric, value):
    results.append((section, metric, value))


def pct(xs, p):
    """The p-th percentile of xs by nearest rank (nan when empty)."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]



def write_results(name):
    """Print the results as TSV (section, metric, value) and keep them in $BENCH_WORK/NAME-results.tsv,
    where scripts/bench.sh prints them as a table."""
    out = "".join("%s\t%s\t%s\n" % r for r in results)
    print("# results (section, metric, value)")
    sys.stdout.write(out)
    if os.environ.get("BENCH_WORK"):
        # A bench run by hand names a work dir that need not exist yet (scripts/bench.sh makes its own).
        os.makedirs(os.environ["BENCH_WORK"], exist_ok=True)
        with open(os.path.join(os.environ["BENCH_WORK"], "%s-results.tsv" % name), "w") as f:
            f.write(out)


def builds(env, label):
    """The predrop builds a bench compares: env ("label=/path/to/predrop ...", before and after a
    change) or, unset, PREDROP_BIN under label. Returns [(label, path)]."""
    spec = os.environ.get(env, "").split()
    if not spec:
        return [(label, os.environ["PREDROP_BIN"])]
    return [tuple(s.split("=", 1)) for s in spec]


def settle(h, timeout=60):
    """Waits until no predrop connection is running a statement: what a run left queued (outcome
    checks, absorbed afters) is that run's cost, not the next one's. Returns the seconds waited."""
    t0 = time.monotonic()
    quiet = 0
    while quiet < 3 and time.monotonic() - t0 < timeout:
        busy = h.q("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'predrop-%' "
                   "AND state = 'active' AND pid <> pg_backend_pid()", db="postgres")[0][0]
        quiet = quiet + 1 if busy == 0 else 0
        time.sleep(0.1)
    return time.monotonic() - t0


class ServerCpu:
    """The server's CPU from /proc: every process of the cluster (the backends that ended are in the
    postmaster's reaped-children times) and the share of predrop's own connections (capture, store),
    so that a bench can say what a cycle costs the server as well as predrop. The server must run on
    this host, as a bench's does; where /proc does not show it, sample() returns None."""

    def __init__(self, h):
        self.hz = os.sysconf("SC_CLK_TCK")
        try:
            data_dir = h.q("SHOW data_directory", db="postgres")[0][0]
            with open(os.path.join(data_dir, "postmaster.pid")) as f:
                self.postmaster = int(f.readline())
        except (OSError, ValueError, IndexError):
            self.postmaster = None

    @staticmethod
    def _stat(pid):
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()

    def sample(self, h):
        """(all of the server's ticks, {pid: ticks} of predrop's connections), or None."""
        if self.postmaster is None:
            return None
        try:
            pm = self._stat(self.postmaster)
            total = sum(int(x) for x in pm[11:15])
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        f = self._stat(int(entry))
                    except OSError:
                        continue
                    if int(f[1]) == self.postmaster:
                        total += int(f[11]) + int(f[12])
            own = {}
            for (pid,) in h.q("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'predrop-%'", db="postgres"):
                try:
                    f = self._stat(pid)
                except OSError:
                    continue
                own[pid] = int(f[11]) + int(f[12])
            return total, own
        except OSError:
            return None

    def us_per(self, before, after, count):
        """(the server's CPU, predrop's connections' share) in µs per unit of count, between two
        samples; None without both."""
        if before is None or after is None or not count:
            return None
        # A connection opened during the run (the pool opens on demand) spent all of its CPU in it.
        own = sum(t - before[1].get(pid, 0) for pid, t in after[1].items())
        scale = 1e6 / self.hz / count
        return (after[0] - before[0]) * scale, own * scale


def bench_hold(name, script):
    """A holdlib.Hold (its own database and store) for a bench, with its pgbench script written to
    the work dir. The ground-truth event trigger is the tests': a bench measures the DROP as
    production runs it. Returns (hold, script path)."""
    import holdlib
    h = holdlib.Hold(name)
    path = os.path.join(h.work, name + ".sql")
    with open(path, "w") as f:
        f.write(script)
    h.exec("DROP EVENT TRIGGER hold_truth_record_drop")
    return h, path
