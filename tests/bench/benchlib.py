"""What the Python benches share: their results as (section, metric, value) rows, percentiles,
and a free loopback port."""
import socket

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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
