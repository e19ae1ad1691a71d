#!/usr/bin/python3
"""alerts_fill.py RULES TEMPLATE OUT: writes TEMPLATE (alerts_test.yml) with rule_files set to RULES
and every exp_annotations description "@rule" replaced by that alert's description in RULES."""
import os
import sys

import yaml

rules_path, template, out = sys.argv[1:4]
rules = yaml.safe_load(open(rules_path, encoding="utf-8"))
desc = {r["alert"]: r.get("annotations", {}).get("description")
        for g in rules["groups"] for r in g["rules"] if "alert" in r}
test = yaml.safe_load(open(template, encoding="utf-8"))
test["rule_files"] = [os.path.abspath(rules_path)]
for t in test["tests"]:
    for a in t.get("alert_rule_test", []):
        for e in a.get("exp_alerts", []):
            ann = e.get("exp_annotations", {})
            if ann.get("description") == "@rule":
                if desc.get(a["alertname"]) is None:
                    sys.exit(f"alert {a['alertname']} has no description in {rules_path}")
                ann["description"] = desc[a["alertname"]]
with open(out, "w", encoding="utf-8") as f:
    yaml.safe_dump(test, f, sort_keys=False)
