#!/usr/bin/env python3
"""Turn the bench's results.tsv into the side-by-side tables: report.py RESULTS.tsv

Lines of results.tsv (tab-separated):
  pgbench  <cell e.g. "-S c=16 prepared">  <target>  <tps>  <latency ms>  <failed>  <proxy CPU us/tx or ->
           [<proxy syscalls/tx or ->  <proxy context switches/tx or ->  [<server CPU us/tx or ->
           [<the machine's steal % over the counted seconds or ->]]]
  copy     <test: out|in>                  <target>  <seconds>  <bytes>  <proxy CPU ms or ->  <server backend CPU ms or ->
  rss      <target>  <clients>  <VmRSS kB>  <RssAnon kB>
Targets: direct, pgbouncer, predrop, and in pgbench lines optionally predrop_alt (a second predrop
configuration, scripts/bench.sh BENCH_PREDROP_ALT). Several lines for the same cell/target are repetitions (median).
"""
import collections
import math
import statistics
import sys

TARGETS = ("direct", "pgbouncer", "predrop")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def median_ci(xs):
    """Distribution-free interval for the median of paired ratios: the k-th smallest and k-th largest,
    k as large as keeps the coverage (two binomial tails at p = 1/2) at 95 % or more; with 5 runs the
    widest, min to max, covers 93.75 %. Returns (low, high, coverage) or None."""
    xs = sorted(x for x in xs if x is not None)
    n = len(xs)
    if n < 2:
        return None
    tail = lambda k: sum(math.comb(n, i) for i in range(k)) / 2 ** n   # P(fewer than k runs below the median)
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * tail(k + 1) >= 0.95:
        k += 1
    return xs[k - 1], xs[n - k], 1 - 2 * tail(k)


def fmt_ci(xs):
    ci = median_ci(xs)
    return "-" if ci is None else "{:.2f}-{:.2f} ({:.0%})".format(*ci)


def fmt(x, spec="{:,.0f}"):
    return "-" if x is None else spec.format(x)


def ratio(a, b):
    return None if a is None or not b else a / b


def table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    print(line(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    print()


def main():
    pg = collections.defaultdict(lambda: collections.defaultdict(list))
    copy = collections.defaultdict(lambda: collections.defaultdict(list))
    rss = collections.defaultdict(dict)
    order = []
    for line in open(sys.argv[1]):
        f = line.rstrip("\n").split("\t")
        num = lambda s: None if s in ("", "-", "nan") else float(s)
        if f[0] == "pgbench":
            if f[1] not in order:
                order.append(f[1])
            pg[f[1]][f[2]].append((num(f[3]), num(f[4]), num(f[5]), num(f[6]) if len(f) > 6 else None,
                                   num(f[7]) if len(f) > 7 else None, num(f[8]) if len(f) > 8 else None,
                                   num(f[9]) if len(f) > 9 else None, num(f[10]) if len(f) > 10 else None))
        elif f[0] == "copy":
            copy[f[1]][f[2]].append((num(f[3]), num(f[4]), num(f[5]) if len(f) > 5 else None,
                                     num(f[6]) if len(f) > 6 else None))
        elif f[0] == "rss":
            rss[f[1]][int(f[2])] = (num(f[3]), num(f[4]))

    if pg:
        print("pgbench (median of repetitions; tps and latency of the steady state: each run after its warm-up seconds)\n")
        rows = []
        for cell in order:
            by_run = [ratio(a[0], b[0]) for a, b in zip(pg[cell]["predrop"], pg[cell]["pgbouncer"])]
            m = {t: (med([x[0] for x in pg[cell][t]]), med([x[1] for x in pg[cell][t]]),
                     sum(x[2] or 0 for x in pg[cell][t]) if pg[cell][t] else None,
                     med([x[3] for x in pg[cell][t]])) for t in TARGETS}
            rows.append([cell,
                         fmt(m["direct"][0]), fmt(m["pgbouncer"][0]), fmt(m["predrop"][0]),
                         fmt(m["direct"][1], "{:.3f}"), fmt(m["pgbouncer"][1], "{:.3f}"), fmt(m["predrop"][1], "{:.3f}"),
                         fmt(ratio(m["predrop"][0], m["direct"][0]), "{:.2f}"),
                         fmt(ratio(m["predrop"][0], m["pgbouncer"][0]), "{:.2f}"),
                         fmt(ratio(m["predrop"][1], m["direct"][1]), "{:.2f}"),
                         fmt(ratio(m["predrop"][1], m["pgbouncer"][1]), "{:.2f}"),
                         fmt(m["predrop"][3], "{:.0f}"), fmt(m["pgbouncer"][3], "{:.0f}"),
                         "/".join(fmt(m[t][2], "{:.0f}") for t in TARGETS),
                         fmt(med(by_run), "{:.2f}"), fmt_ci(by_run), " ".join(fmt(x, "{:.2f}") for x in by_run)])
        table(["cell", "direct tps", "pgb tps", "predrop tps", "direct lat", "pgb lat", "predrop lat",
               "tps pd/direct", "tps pd/pgb", "lat pd/direct", "lat pd/pgb", "predrop CPU us/tx", "pgb CPU us/tx",
               "failed d/pgb/pd", "pd/pgb median of runs", "interval of that median", "tps pd/pgb by run"], rows)
        print("tps pd/pgb compares the medians; a run is one back-to-back triple of direct, pgbouncer and predrop\n"
              "(rotated order), so its ratio is measured under one state of the host, and 'median of runs' is the\n"
              "median of those paired ratios; its interval is distribution-free (order statistics, coverage in\n"
              "brackets): the range a rerun's median would fall in.\n")
        if any(x[4] is not None for cell in order for t in ("predrop", "pgbouncer") for x in pg[cell][t]):
            print("per transaction, the proxy's own process over the counted seconds (median of repetitions;\n"
                  "CPU from /proc, system calls and context switches from perf stat)\n")
            rows = []
            for cell in order:
                per = lambda t, i, spec: fmt(med([x[i] for x in pg[cell][t]]), spec)
                rows.append([cell, per("predrop", 3, "{:.1f}"), per("pgbouncer", 3, "{:.1f}"),
                             per("predrop", 4, "{:.2f}"), per("pgbouncer", 4, "{:.2f}"),
                             per("predrop", 5, "{:.2f}"), per("pgbouncer", 5, "{:.2f}")])
            table(["cell", "predrop CPU us", "pgb CPU us", "predrop syscalls", "pgb syscalls",
                   "predrop ctx switches", "pgb ctx switches"], rows)

        if any(x[6] is not None for cell in order for t in TARGETS for x in pg[cell][t]):
            targets = [t for t in (*TARGETS, "predrop_alt") if any(pg[cell][t] for cell in order)]
            print("per transaction, the server's CPU behind each target (the whole cluster, from /proc, over the\n"
                  "counted seconds; median of repetitions). A tps ratio the proxies' own CPU does not explain shows\n"
                  "here: PgBouncer's session pool hands each run the backends earlier runs warmed, while behind\n"
                  "predrop and direct each run's backends are new and still fault in shared buffers.\n")
            rows = [[cell, *(fmt(med([x[6] for x in pg[cell][t]]), "{:.1f}") for t in targets),
                     fmt(ratio(med([x[6] for x in pg[cell]["predrop"]]), med([x[6] for x in pg[cell]["pgbouncer"]])), "{:.2f}")]
                    for cell in order]
            table(["cell", *("server us/tx behind " + t for t in targets), "predrop/pgb"], rows)

        if any(x[7] is not None for cell in order for t in TARGETS for x in pg[cell][t]):
            print("the share of the machine's time the hypervisor stole while each run was counted (%, by run in\n"
                  "the order of the paired ratios above): a pair whose steal differs by much is the host's\n"
                  "difference as much as the proxies'.\n")
            rows = [[cell, *(" ".join(fmt(x[7], "{:.0f}") for x in pg[cell][t]) for t in TARGETS)] for cell in order]
            table(["cell", *("steal % behind " + t for t in TARGETS)], rows)

    alt_cells = [cell for cell in order if pg[cell]["predrop_alt"]]
    if alt_cells:
        print("predrop_alt: the same binary with BENCH_PREDROP_ALT, a fourth target of the same runs;\n"
              "ratios are medians of paired runs, with their intervals\n")
        rows = []
        for cell in alt_cells:
            alt, pd, pgb = pg[cell]["predrop_alt"], pg[cell]["predrop"], pg[cell]["pgbouncer"]
            vs_pgb = [ratio(a[0], b[0]) for a, b in zip(alt, pgb)]
            vs_pd = [ratio(a[0], b[0]) for a, b in zip(alt, pd)]
            pd_pgb = [ratio(a[0], b[0]) for a, b in zip(pd, pgb)]
            per = lambda runs, i, spec: fmt(med([x[i] for x in runs]), spec)
            rows.append([cell, per(alt, 0, "{:.0f}"), per(pd, 0, "{:.0f}"), per(pgb, 0, "{:.0f}"),
                         fmt(med(vs_pgb), "{:.2f}"), fmt_ci(vs_pgb), fmt(med(pd_pgb), "{:.2f}"), fmt_ci(pd_pgb),
                         fmt(med(vs_pd), "{:.2f}"), fmt_ci(vs_pd),
                         per(alt, 3, "{:.1f}"), per(pd, 3, "{:.1f}"), per(alt, 5, "{:.2f}"), per(pd, 5, "{:.2f}")])
        table(["cell", "alt tps", "predrop tps", "pgb tps", "alt/pgb", "interval", "pd/pgb", "interval",
               "alt/pd", "interval", "alt CPU us/tx", "pd CPU us/tx", "alt ctx sw/tx", "pd ctx sw/tx"], rows)

    if copy:
        print("COPY (median wall seconds around psql; MB = 10^6 bytes)\n")
        rows, server_rows = [], []
        # A run's throughput ratio is the inverse of its wall-time ratio; its server busy share is the
        # backend's CPU time over the wall time.
        busy = lambda run: ratio(run[3], run[0] * 1000) if run[3] is not None and run[0] else None
        for test in sorted(copy):
            by_run = [ratio(b[0], a[0]) for a, b in zip(copy[test]["predrop"], copy[test]["direct"])]
            busy_by_run = [ratio(busy(a), busy(b)) for a, b in zip(copy[test]["predrop"], copy[test]["direct"])]
            busy_pgb = [ratio(busy(a), busy(b)) for a, b in zip(copy[test]["pgbouncer"], copy[test]["direct"])]
            m = {t: (med([x[0] for x in copy[test][t]]), med([x[1] for x in copy[test][t]]),
                     med([x[2] for x in copy[test][t]])) for t in TARGETS}
            mbs = {t: (m[t][1] / 1e6 / m[t][0]) if m[t][0] and m[t][1] else None for t in TARGETS}
            size = next((m[t][1] for t in TARGETS if m[t][1]), None)
            rows.append([test, fmt(size / 1e6 if size else None, "{:.1f}"),
                         *("%s (%s)" % (fmt(m[t][0], "{:.2f}"), fmt(mbs[t], "{:.0f}")) for t in TARGETS),
                         fmt(ratio(mbs["predrop"], mbs["direct"]), "{:.2f}"),
                         fmt(ratio(mbs["predrop"], mbs["pgbouncer"]), "{:.2f}"),
                         fmt(m["predrop"][2]), fmt(m["pgbouncer"][2]),
                         fmt(med(by_run), "{:.2f}"), fmt_ci(by_run), " ".join(fmt(x, "{:.2f}") for x in by_run),
                         str(len(copy[test]["predrop"]))])
            server_rows.append([test, *(fmt(med([x[3] for x in copy[test][t]])) for t in TARGETS),
                                *(fmt(med([busy(x) for x in copy[test][t]]), "{:.0%}") for t in TARGETS),
                                fmt(med(busy_by_run), "{:.2f}"), fmt_ci(busy_by_run), fmt(med(busy_pgb), "{:.2f}"),
                                " ".join(fmt(x, "{:.2f}") for x in busy_by_run)])
        table(["test", "MB", "direct s (MB/s)", "pgbouncer s (MB/s)", "predrop s (MB/s)",
               "throughput pd/direct", "throughput pd/pgb", "predrop CPU ms", "pgb CPU ms",
               "pd/direct median of runs", "interval of that median", "pd/direct by run", "n"], rows)
        if any(r[1] != "-" for r in server_rows):
            print("COPY at equal server speed: the server backend's CPU ms per COPY and its busy share of the wall\n"
                  "time. The backend is the bottleneck, and its CPU time for the same rows moves with the host by\n"
                  "as much as the wall time does; a proxy that never stalls it leaves it as busy as direct, so\n"
                  "busy pd/direct (paired by run) is the throughput ratio with the host's speed taken out.\n")
            table(["test", "server CPU ms direct", "pgbouncer", "predrop", "server busy direct", "pgbouncer", "predrop",
                   "busy pd/direct median of runs", "interval of that median", "busy pgb/direct", "busy pd/direct by run"],
                  server_rows)

    if rss:
        print("RSS with idle clients (fresh process; VmRSS from /proc/PID/status)\n")
        rows = []
        for target in ("predrop", "pgbouncer"):
            steps = rss.get(target, {})
            base, base_anon = steps.get(0, (None, None))
            for n in sorted(steps):
                vm, anon = steps[n]
                delta = None if base is None or vm is None else vm - base
                per = None if not n or delta is None else delta * 1024 / n
                delta_anon = None if base_anon is None or anon is None else anon - base_anon
                per_anon = None if not n or delta_anon is None else delta_anon * 1024 / n
                rows.append([target, n, fmt(vm / 1024 if vm else None, "{:.2f} MB"), fmt(anon / 1024 if anon else None, "{:.2f} MB"),
                             fmt(delta, "{:+,.0f} kB") if n else "-", fmt(per, "{:,.0f} B"), fmt(per_anon, "{:,.0f} B")])
        table(["proxy", "clients", "VmRSS", "RssAnon", "VmRSS delta vs 0", "per client (VmRSS)", "per client (RssAnon)"], rows)
        print("per client = (RSS with N idle clients - RSS of the same process with 0) / N; target: VmRSS per client <= 4096 B\n")


if __name__ == "__main__":
    main()
