#!/usr/bin/python3
"""Checks the PromQL in deploy/grafana/predrop-dashboard.json and deploy/prometheus/predrop-alerts.yml
against the metrics predrop's admin endpoint exposes.

  promql_check.py DASHBOARD ALERTS OUT_RULES
Every expression may name only the metrics below (histograms with _bucket/_sum/_count; any
process_* standard metric), and label matchers on an enumerated label may only use its values.
Writes OUT_RULES: the dashboard's expressions (Grafana variables substituted) as recording rules,
so `promtool check rules OUT_RULES` validates their syntax. Exits 1 on any failure.
"""
import json
import re
import sys

import yaml

# The admin endpoint's metrics (keep in step with proxy/metrics.cpp and deploy/README.md).
COUNTERS_GAUGES = {
    "predrop_client_connections": {},
    "predrop_server_connections": {},
    "predrop_bytes_total": {"direction": {"client_to_server", "server_to_client"}},
    "predrop_statements_total": {"path": {"prefiltered", "parsed", "cache_hit", "parse_error"}},
    "predrop_intercepted_statements_total": {"kind": {"drop_table", "drop_schema", "drop_owned", "alter_table",
                                                      "truncate", "drop_matview", "drop_view",
                                                      "drop_foreign_table"}},
    "predrop_snapshots_total": {"outcome": {"written", "table_missing", "timeout", "capture_error", "store_error",
                                            "policy_skip", "disabled", "deduplicated"}},
    "predrop_rejected_statements_total": {},
    "predrop_unresolved_statements_total": {},
    "predrop_unparsed_statements_total": {},
    "predrop_drop_outcomes_total": {"outcome": {"dropped", "not_dropped", "quarantined"}},
    "predrop_quarantined_total": {},
    "predrop_quarantine_tables": {},
    "predrop_quarantine_bytes": {},
    "predrop_quarantine_database_bytes_max": {},
    "predrop_quarantine_max_bytes": {},
    "predrop_quarantine_purged_total": {"reason": {"expired", "cap"}},
    "predrop_undrops_total": {},
    "predrop_capture_pool_connections": {"state": {"idle", "busy"}},
    "predrop_config_reloads_total": {"result": {"ok", "failed"}},
    "predrop_build_info": {"version": None},
    "predrop_store_up": {},
    "predrop_store_last_success_timestamp_seconds": {},
}
HISTOGRAMS = ["predrop_hold_duration_seconds", "predrop_capture_duration_seconds"]
KNOWN = dict(COUNTERS_GAUGES)
for h in HISTOGRAMS:
    KNOWN[h + "_bucket"] = {"le": None}
    KNOWN[h + "_sum"] = {}
    KNOWN[h + "_count"] = {}
PHASES = {"capture_wait", "catalog", "store_wait", "store_write"}
KNOWN["predrop_capture_phase_seconds_bucket"] = {"phase": PHASES, "le": None}
KNOWN["predrop_capture_phase_seconds_sum"] = {"phase": PHASES}
KNOWN["predrop_capture_phase_seconds_count"] = {"phase": PHASES}
# Labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = {"job", "instance", "le", "__name__"}

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "atan2"}

errors = []


def check_expr(where, expr):
    found = []
    # label matchers: name op "value"
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # blank string literals for the token scan
    for m in re.finditer(r'([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}', expr):
        metric, body = m.group(1), m.group(2)
        for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', body):
            label, op, value = lm.groups()
            if metric in KNOWN:
                allowed = KNOWN[metric].get(label, "absent")
                if label in TARGET_LABELS:
                    continue
                if allowed == "absent":
                    errors.append(f"{where}: {metric} has no label {label}")
                elif allowed is not None and "$" not in value:
                    alts = value.split("|") if op in ("=~", "!~") else [value]
                    bad = [a for a in alts if a not in allowed]
                    if bad:
                        errors.append(f"{where}: {metric}{{{label}}} has no value(s) {bad}; known: {sorted(allowed)}")
    # identifiers that are metric names: drop {...} matchers, [...] ranges, by/without/on (...) lists
    scan = re.sub(r'\{[^}]*\}', ' ', text)
    scan = re.sub(r'\[[^\]]*\]', ' ', scan)
    scan = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', scan)
    for m in re.finditer(r'(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?', scan):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        found.append(name)
        if name not in KNOWN and not name.startswith("process_"):
            errors.append(f"{where}: unknown metric {name!r} in: {expr}")
    if not found:
        errors.append(f"{where}: no metric found in: {expr}")
    return found


def grafana_vars(expr):
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$__interval", "1m")
    return re.sub(r'\$\{?(\w+)\}?', '.*', expr)


def main():
    dash_path, alerts_path, out_rules = sys.argv[1:4]
    used = set()
    with open(dash_path, encoding="utf-8") as f:
        try:
            dash = json.load(f)
        except json.JSONDecodeError as e:
            errors.append(f"{dash_path}: JSON: {e}")
            return
    panels = []

    def walk(ps):
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    exprs = []
    for p in panels:
        for t in p.get("targets", []):
            if "expr" in t:
                exprs.append((f"dashboard panel {p.get('title')!r}", t["expr"]))
        if p.get("type") not in ("row",) and not p.get("targets"):
            errors.append(f"dashboard panel {p.get('title')!r} has no query")
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            m = re.match(r'label_values\((.*),\s*\w+\)$', q)
            exprs.append((f"dashboard variable {v.get('name')}", m.group(1) if m else q))
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        errors.append("dashboard panel ids are not unique")
    for where, e in exprs:
        used.update(check_expr(where, e))

    # the panels the deployment guide promises
    titles = " | ".join(p.get("title", "") for p in panels).lower()
    for want in ("by kind", "snapshot outcomes", "fail-open", "p50", "p99", "connections", "bytes by direction",
                 "config reloads"):
        if want not in titles:
            errors.append(f"dashboard: no panel titled with {want!r}")
    for metric in ("predrop_intercepted_statements_total", "predrop_snapshots_total",
                   "predrop_hold_duration_seconds_bucket", "predrop_client_connections",
                   "predrop_server_connections", "predrop_bytes_total", "predrop_config_reloads_total"):
        if metric not in used:
            errors.append(f"dashboard: no panel uses {metric}")

    with open(alerts_path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    alert_names = []
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            alert_names.append(r.get("alert"))
            check_expr(f"alert {r.get('alert')}", r["expr"])
    for want in ("PredropSnapshotFailed", "PredropStoreUnreachable", "PredropHoldP99OverTimeout",
                 "PredropConfigReloadFailed"):
        if want not in alert_names:
            errors.append(f"alerts: {want} missing")

    with open(out_rules, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:expr_{i}", "expr": grafana_vars(e)} for i, (_, e) in enumerate(exprs)]}]}, f)
    print(f"{len(exprs)} dashboard expressions, {len(alert_names)} alerts checked")


if __name__ == "__main__":
    main()
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)
