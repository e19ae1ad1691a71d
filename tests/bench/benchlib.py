"""What the Python benches share: their results as (section, metric, value) rows, percentiles,
and (holdlib's) a free loopback port."""
import os
import sys

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

