#!/usr/bin/python3
"""The relay's floor (issue 23), run by run-relay-floor.sh: pgbench -S through PgBouncer, predrop and the
floor relays of relay_floor.cpp (a byte relay with nothing in it on epoll, on io_uring, on io_uring with
DEFER_TASKRUN, and a ring inside a Boost.Asio loop), interleaved rounds, direct alongside. For each
cell and target: tps, and the proxy's CPU and context switches a transaction over the counted seconds.
What it answers: how far predrop's relay is above the floor its kernel interface allows, and what
another interface's floor is on this machine. The proxies' CPU a transaction is the figure to read; tps
on two cores swings with the host from round to round.

Environment: PGHOST, PGPORT (the cluster), PGB_PORT and PGB_PID, PREDROP_PORT and PREDROP_PID, FLOORS
("name=port=pid ..."), RELAY_FLOOR_SECONDS (6: counted seconds a run, after 2 s), RELAY_FLOOR_REPS (3),
RELAY_FLOOR_CELLS ("1:prepared 16:prepared 64:simple", clients:protocol).
"""
import glob
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import cpu_ticks, machine_ticks, record, steal_pct, write_results  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
SECONDS = int(os.environ.get("RELAY_FLOOR_SECONDS", "6"))
WARMUP = 2
REPS = int(os.environ.get("RELAY_FLOOR_REPS", "3"))
CELLS = [(int(c.split(":")[0]), c.split(":")[1])
         for c in os.environ.get("RELAY_FLOOR_CELLS", "1:prepared 16:prepared 64:simple").split()]
DB = "relay_floor"


def context_switches(pid):
    """Voluntary and involuntary switches of all of a process's threads so far."""
    total = 0
    for status in glob.glob("/proc/%d/task/*/status" % pid):
        try:
            with open(status) as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            pass
    return total


def targets():
    env = os.environ
    out = [("direct", env["PGPORT"], 0), ("pgbouncer", env["PGB_PORT"], int(env["PGB_PID"])),
           ("predrop", env["PREDROP_PORT"], int(env["PREDROP_PID"]))]
    for spec in env.get("FLOORS", "").split():
        name, port, pid = spec.split("=")
        out.append((name, port, int(pid)))
    return out


def run(clients, protocol, port, pid):
    """One pgbench -S run; tps over the counted seconds (pgbench's per-second progress after the
    warm-up), and the proxy's CPU µs and context switches a transaction over the same seconds."""
    # Every target listens on loopback TCP, the floors included (they reach the server there too).
    cmd = ["pgbench", "-n", "-S", "-M", protocol, "-h", "127.0.0.1", "-p", str(port),
           "-U", "postgres", "-d", DB, "-c", str(clients), "-j", "2" if clients > 1 else "1",
           "-T", str(SECONDS + WARMUP), "-P", "1"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(WARMUP + 0.05)
    t0, c0, m0 = (cpu_ticks(pid) if pid else None), (context_switches(pid) if pid else 0), machine_ticks()
    try:
        out, err = p.communicate(timeout=SECONDS + WARMUP + 30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit("relay_floor: pgbench through port %s did not end %d s after its run" % (port, 30))
    t1, c1, m1 = (cpu_ticks(pid) if pid else None), (context_switches(pid) if pid else 0), machine_ticks()
    if p.returncode != 0:
        raise SystemExit("relay_floor: pgbench through port %s failed:\n%s%s" % (port, out, err))
    progress = [float(x) for x in re.findall(r"progress: [\d.]+ s, ([\d.]+) tps", err)][WARMUP:]
    tps = statistics.mean(progress) if progress else 0.0
    txs = tps * len(progress)
    cpu = (t1 - t0) / HZ * 1e6 / txs if pid and txs and t0 is not None and t1 is not None else float("nan")
    cs = (c1 - c0) / txs if pid and txs else float("nan")
    return tps, cpu, cs, steal_pct(m0, m1)


def main():
    subprocess.run(["psql", "-XAtq", "-d", "postgres", "-c", "SET client_min_messages = warning",
                    "-c", "DROP DATABASE IF EXISTS " + DB + " WITH (FORCE)", "-c", "CREATE DATABASE " + DB], check=True)
    subprocess.run(["pgbench", "-i", "-q", "-s", "1", DB], check=True, capture_output=True)
    ts = targets()
    print("relay floor: pgbench -S, %d rounds of %d counted s after %d s, targets rotated each round: %s"
          % (REPS, SECONDS, WARMUP, " ".join(n for n, _, _ in ts)), flush=True)
    runs = {}
    for r in range(REPS):
        for clients, protocol in CELLS:
            order = ts[r % len(ts):] + ts[:r % len(ts)]
            for name, port, pid in order:
                tps, cpu, cs, steal = run(clients, protocol, port, pid)
                runs.setdefault((clients, protocol, name), []).append((tps, cpu, cs, steal))
                print("  round %d  c=%-3d %-9s %-17s %9.0f tps  CPU %6.1f us/tx  %5.2f switches/tx  steal %2.0f%%"
                      % (r + 1, clients, protocol, name, tps, cpu, cs, steal), flush=True)
    print()
    print("medians of %d rounds; 'CPU / pgbouncer' is the proxy's own CPU a transaction against PgBouncer's"
          % REPS)
    print("%-16s %-17s %9s %8s %10s %15s %12s" % ("cell", "target", "tps", "/ pgb", "CPU us/tx", "CPU / pgbouncer",
                                                  "switches/tx"))
    for clients, protocol in CELLS:
        cell = "c=%d %s" % (clients, protocol)
        med = {n: [statistics.median(x[i] for x in runs[(clients, protocol, n)]) for i in range(3)] for n, _, _ in ts}
        for name, _, pid in ts:
            tps, cpu, cs = med[name]
            print("%-16s %-17s %9.0f %8.2f %10s %15s %12s" % (
                cell, name, tps, tps / med["pgbouncer"][0],
                "%.1f" % cpu if pid else "-", "%.2f" % (cpu / med["pgbouncer"][1]) if pid else "-",
                "%.2f" % cs if pid else "-"))
            key = "c%d_%s_%s" % (clients, protocol, name.replace("-", "_"))
            record("relay_floor", key + "_tps", round(tps))
            if pid:
                record("relay_floor", key + "_cpu_us_per_tx", round(cpu, 1))
                record("relay_floor", key + "_switches_per_tx", round(cs, 2))
    write_results("relay_floor")


if __name__ == "__main__":
    main()
