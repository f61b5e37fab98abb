#!/usr/bin/env python3
"""Prints the PromQL of every panel of deploy/grafana/heurist.json as a Prometheus rules file
(one recording rule each, Grafana's variables replaced by values), so `promtool check rules`
can parse them: CI checks the dashboard's queries that way (`.ci/run`)."""

import json
import pathlib
import sys

DASHBOARD = pathlib.Path(__file__).resolve().parent.parent / "deploy/grafana/heurist.json"
VARIABLES = {"$__rate_interval": "5m", "$job": "heurist", "$instance": ".*"}


def main() -> int:
    dashboard = json.loads(DASHBOARD.read_text())
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    count = 0
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            count += 1
            lines.append(f"      - record: dashboard:query_{count}")
            lines.append(f"        expr: {json.dumps(expr)}")
    if count == 0:
        print("no queries in the dashboard", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
