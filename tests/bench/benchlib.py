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


def _proc_stat(pid):
    """/proc/PID/stat's fields after the command name (so [1] is the parent, [11:15] the CPU ticks)."""
    with open("/proc/%s/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_ticks(pid):
    """A process's CPU ticks so far (user + system), or None once it is gone."""
    try:
        fields = _proc_stat(pid)
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def server_ticks(postmaster):
    """CPU ticks of the whole cluster so far: the postmaster, its live children (backends, predrop's
    pooled connections) and the children it reaped (pgbench's connections, once closed)."""
    if postmaster is None:
        return None
    try:
        total = sum(int(x) for x in _proc_stat(postmaster)[11:15])
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                st = _proc_stat(d)
            except OSError:
                continue
            if int(st[1]) == postmaster:
                total += int(st[11]) + int(st[12])
        return total
    except (OSError, IndexError, ValueError):
        return None


def machine_ticks():
    """(steal, all) CPU ticks of the whole machine so far, from /proc/stat: steal is the time the
    hypervisor ran something else while this guest's CPUs wanted to run. On this project's 2-core
    VMs it went from 0 to 20 % with the host's load, and of eight back-to-back 3 s runs of a c=1
    recreate churn direct the one at 20 % was the slowest (168 tps against 239 at 5 %): a ratio
    between two runs is only as good as their steal is alike."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]   # user nice system idle iowait irq softirq steal
    v += [0] * (8 - len(v))
    return v[7], sum(v)


def steal_pct(before, after):
    """The share of the machine's time stolen between two machine_ticks() readings, in %."""
    d = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / d if d > 0 else float("nan")


def postmaster_pid(data_directory):
    """The cluster's postmaster, from postmaster.pid in its data directory (SHOW data_directory), or
    None where this host cannot read it."""
    try:
        with open(os.path.join(data_directory, "postmaster.pid")) as f:
            return int(f.readline())
    except (OSError, ValueError):
        return None


class ServerCpu:
    """What a run costs the server, from /proc: the whole cluster (server_ticks) and the share of
    predrop's own connections (capture, store), so that a bench can say what a cycle costs the server
    as well as predrop. The server must run on this host, as a bench's does; where /proc does not
    show it, sample() returns None."""

    def __init__(self, h):
        self.hz = os.sysconf("SC_CLK_TCK")
        self.postmaster = postmaster_pid(h.q("SHOW data_directory", db="postgres")[0][0])

    def sample(self, h):
        """(all of the server's ticks, {pid: ticks} of predrop's connections), or None."""
        total = server_ticks(self.postmaster)
        if total is None:
            return None
        own = {}
        for (pid,) in h.q("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'predrop-%'", db="postgres"):
            ticks = cpu_ticks(pid)
            if ticks is not None:
                own[pid] = ticks
        return total, own

    def us_per(self, before, after, count):
        """(the server's CPU, predrop's connections' share) in µs per unit of count, between two
        samples; None without both."""
        if before is None or after is None or not count:
            return None
        # A connection opened during the run (the pool opens on demand) spent all of its CPU in it.
        own = sum(t - before[1].get(pid, 0) for pid, t in after[1].items())
        scale = 1e6 / self.hz / count
        return (after[0] - before[0]) * scale, own * scale


# 10,000 names x 100 versions: each version a pre_drop before and a post_create after paired
# with it, as a churn leaves them; the ledger gets a row per before.
_STORE_LOAD = """
INSERT INTO predrop.schema_snapshots (id, schema_name, table_name, reason, actor, column_count, row_count_estimate,
                                      schema_hash, columns_profile, stats_available, captured_at, database_name,
                                      table_oid, statement_kind, statement, pair_of)
SELECT gen_random_uuid(), 'load', 't' || (g %% 10000), CASE WHEN g %% 2 = 0 THEN 'pre_drop' ELSE 'post_create' END,
       'predrop', 4, 200, md5((g %% 7)::text) || 'abcdefgh',
       '[{"name":"id","ordinal":1,"pg_type":"integer","null_frac":0,"n_distinct":-1}]'::jsonb, true,
       now() - make_interval(secs => %(rows)s - g), %(db)s, 100000 + g, 'drop_table', 'DROP TABLE t', NULL
  FROM generate_series(1, %(rows)s) g;
INSERT INTO predrop.drop_events (id, outcome, snapshot_id, database_name, schema_name, table_name, table_oid,
                                 statement_kind, statement, reason, actor, occurred_at, drop_outcome)
SELECT gen_random_uuid(), 'written', NULL, %(db)s, 'load', 't' || (g %% 10000), 100000 + g, 'drop_table',
       'DROP TABLE t', 'pre_drop', 'predrop', now() - make_interval(secs => %(rows)s - g), 'dropped'
  FROM generate_series(1, %(rows)s) g;
"""


def load_store(h, rows):
    """rows snapshot rows (befores and afters of 10,000 names) and as many ledger rows into h's store,
    with random ids, as an older predrop or the reference application left them; not analysed."""
    c = h.connect(h.store_db)
    with c.cursor() as cur:
        cur.execute(_STORE_LOAD, {"rows": rows, "db": h.db})
    c.close()


def bench_hold(name, script):
    """A holdlib.Hold (its own database and store) for a bench, with its pgbench script written to
    the work dir. The ground-truth event trigger is the tests': a bench measures the DROP as
    production runs it. Returns (hold, script path)."""
    import holdlib
    h = holdlib.Hold(name)
    # After Hold, which clears PGSSLMODE: pgbench direct, through PgBouncer and through predrop, and
    # predrop's own connections, all plaintext (scripts/bench.sh says why).
    os.environ["PGSSLMODE"] = "disable"
    path = os.path.join(h.work, name + ".sql")
    with open(path, "w") as f:
        f.write(script)
    h.exec("DROP EVENT TRIGGER hold_truth_record_drop")
    return h, path
