#!/usr/bin/python3
"""The relay's floor (issue 23), run by run-relay-floor.sh: pgbench -S through PgBouncer, predrop and the
floor relays of relay_floor.cpp (a byte relay with nothing in it on epoll, on io_uring, on io_uring with
DEFER_TASKRUN, and a ring inside a Boost.Asio loop), interleaved rounds, direct alongside. For each cell
and target: tps, and the proxy's CPU, context switches and system calls (perf stat) a transaction over
the counted seconds. What it answers: how far predrop's relay is above the floor its kernel interface
allows, and what another interface's floor is on this machine. The proxies' CPU a transaction is the
figure to read; tps on two cores swings with the host from round to round.

Environment: PGHOST, PGPORT (the cluster), PGB_PORT and PGB_PID, PREDROP_PORT and PREDROP_PID, FLOORS
("name=port=pid ..."), RELAY_FLOOR_SECONDS (6: counted seconds a run, after 2 s), RELAY_FLOOR_REPS (3),
RELAY_FLOOR_CELLS ("1:prepared 16:prepared 64:simple", clients:protocol), RELAY_FLOOR_PERF (1: system
calls a transaction from perf stat, at a cost to the CPU column: see perf_works).
"""
import glob
import os
import math
import re
import signal
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


def perf_works():
    """Whether to count system calls: RELAY_FLOOR_PERF=1 and perf stat able to count them here
    (linux-perf, a bench package, and the right to trace). Off by default: the tracepoint costs every
    system call something, so it would raise the CPU column most for the relays that make the most
    calls, the epoll ones, and flatter io_uring's. Without it the system call column says "-", as
    run-bench.sh's does."""
    if os.environ.get("RELAY_FLOOR_PERF", "0") != "1":
        return False
    try:
        return subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-o", "/dev/null", "--", "true"],
                              capture_output=True).returncode == 0
    except OSError:
        return False


PERF = perf_works()


def perf_count(path, event):
    """EVENT's count in perf stat's CSV output (-x,), or None."""
    try:
        with open(path) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] == event and fields[0].isdigit():
                    return int(fields[0])
    except OSError:
        pass
    return None


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
    warm-up), and the proxy's CPU µs, context switches and system calls a transaction over the same
    seconds."""
    # Every target listens on loopback TCP, the floors included (they reach the server there too).
    cmd = ["pgbench", "-n", "-S", "-M", protocol, "-h", "127.0.0.1", "-p", str(port),
           "-U", "postgres", "-d", DB, "-c", str(clients), "-j", "2" if clients > 1 else "1",
           "-T", str(SECONDS + WARMUP), "-P", "1"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(WARMUP + 0.05)
    t0, c0, m0 = (cpu_ticks(pid) if pid else None), (context_switches(pid) if pid else 0), machine_ticks()
    perf_out = "%s/relay-floor-perf.%d.csv" % (os.environ.get("BENCH_WORK", "/tmp"), os.getpid())
    perf = (subprocess.Popen(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", str(pid), "-o", perf_out],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if pid and PERF else None)
    try:
        out, err = p.communicate(timeout=SECONDS + WARMUP + 30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit("relay_floor: pgbench through port %s did not end %d s after its run" % (port, 30))
    t1, c1, m1 = (cpu_ticks(pid) if pid else None), (context_switches(pid) if pid else 0), machine_ticks()
    syscalls = None
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait()
        syscalls = perf_count(perf_out, "raw_syscalls:sys_enter")
        if os.path.exists(perf_out):
            os.unlink(perf_out)
    if p.returncode != 0:
        raise SystemExit("relay_floor: pgbench through port %s failed:\n%s%s" % (port, out, err))
    progress = [float(x) for x in re.findall(r"progress: [\d.]+ s, ([\d.]+) tps", err)][WARMUP:]
    if not progress:
        # pgbench prints no progress line for the last second it runs: too short a run counts nothing.
        raise SystemExit("relay_floor: pgbench through port %s printed no progress after its %d s of warm-up "
                         "(RELAY_FLOOR_SECONDS=%d: use 3 or more)" % (port, WARMUP, SECONDS))
    tps = statistics.mean(progress)
    txs = tps * len(progress)
    cpu = (t1 - t0) / HZ * 1e6 / txs if pid and txs and t0 is not None and t1 is not None else float("nan")
    cs = (c1 - c0) / txs if pid and txs else float("nan")
    calls = syscalls / txs if syscalls is not None and txs else float("nan")
    return tps, cpu, cs, calls, steal_pct(m0, m1)


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
                tps, cpu, cs, calls, steal = run(clients, protocol, port, pid)
                runs.setdefault((clients, protocol, name), []).append((tps, cpu, cs, calls, steal))
                print("  round %d  c=%-3d %-9s %-17s %9.0f tps  CPU %6.1f us/tx  %5.2f switches/tx  %5.2f syscalls/tx"
                      "  steal %2.0f%%" % (r + 1, clients, protocol, name, tps, cpu, cs, calls, steal), flush=True)
    print()
    print("medians of %d rounds; 'CPU / pgbouncer' is the proxy's own CPU a transaction against PgBouncer's"
          % REPS)
    print("%-16s %-17s %9s %8s %10s %15s %12s %12s" % ("cell", "target", "tps", "/ pgb", "CPU us/tx",
                                                       "CPU / pgbouncer", "switches/tx", "syscalls/tx"))
    for clients, protocol in CELLS:
        cell = "c=%d %s" % (clients, protocol)
        med = {n: [statistics.median(x[i] for x in runs[(clients, protocol, n)]) for i in range(4)] for n, _, _ in ts}
        for name, _, pid in ts:
            tps, cpu, cs, calls = med[name]
            print("%-16s %-17s %9.0f %8.2f %10s %15s %12s %12s" % (
                cell, name, tps, tps / med["pgbouncer"][0],
                "%.1f" % cpu if pid else "-", "%.2f" % (cpu / med["pgbouncer"][1]) if pid else "-",
                "%.2f" % cs if pid else "-", "%.2f" % calls if pid and not math.isnan(calls) else "-"))
            key = "c%d_%s_%s" % (clients, protocol, name.replace("-", "_"))
            record("relay_floor", key + "_tps", round(tps))
            if pid:
                record("relay_floor", key + "_cpu_us_per_tx", round(cpu, 1))
                record("relay_floor", key + "_switches_per_tx", round(cs, 2))
                if not math.isnan(calls):
                    record("relay_floor", key + "_syscalls_per_tx", round(calls, 2))
    write_results("relay_floor")


if __name__ == "__main__":
    main()
