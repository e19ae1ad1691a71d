"""Python side of the test harness: start/stop predrop through start-predrop.sh / stop-predrop.sh.

    from predrop_harness import Predrop
    with Predrop(workdir, "--config", cfg) as p:
        psycopg2.connect(host="127.0.0.1", port=p.port, ...)

Works with any python3 (standard library only).
"""
import os
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def settled_sessions(read_sessions, tries=30):
    """pg_stat_database.sessions of a database, once two readings a second apart agree (a
    backend's counts reach the statistics as it exits); None if they never do. read_sessions()
    returns the current count (SELECT sessions FROM pg_stat_database WHERE datname = ...)."""
    last = None
    for _ in range(tries):
        n = read_sessions()
        if n == last:
            return n
        last = n
        time.sleep(1.0)
    return None


class PredropStartError(RuntimeError):
    pass


class Predrop:
    def __init__(self, workdir, *extra_args, env=None):
        self.workdir = workdir
        self.extra_args = list(extra_args)
        self.env = env
        self.port = None
        self.pid = None
        self.log = None

    def start(self):
        env = dict(self.env if self.env is not None else os.environ)
        env.setdefault("PREDROP_OWNER_PID", str(os.getpid()))  # watchdog: stopped if this process dies
        r = subprocess.run(
            [os.path.join(HERE, "start-predrop.sh"), self.workdir, *self.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if r.returncode != 0:
            raise PredropStartError(r.stderr)
        kv = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        self.port = int(kv["PREDROP_PORT"])
        self.pid = int(kv["PREDROP_PID"])
        self.log = kv["PREDROP_LOG"]
        return self

    def stop(self, grace=10):
        """SIGTERM, then SIGKILL after `grace` seconds. Returns True when it stopped on SIGTERM."""
        if self.pid is None:
            return True
        r = subprocess.run([os.path.join(HERE, "stop-predrop.sh"), str(self.pid), str(grace)])
        self.pid = None
        return r.returncode == 0

    def alive(self):
        """True while the process runs (a zombie counts as dead)."""
        if self.pid is None:
            return False
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
