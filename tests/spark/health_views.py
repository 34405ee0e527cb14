"""What the four places that show a query's state say of it: the list, its page, /metrics and the alert rules.

For the Spark tests that build states with real queries: the list's row and the page's header
through the Django test client, ``ckptweb_checkpoint_status`` from /metrics, and the shipped
alert rules (docs/prometheus/alerts.yml) evaluated by promtool over the scraped
``ckptweb_checkpoint_condition`` samples.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from django.urls import reverse

from dashboards.models import Checkpoint
from fixture_paths import REPO_DIR
from prometheus.scenario import checkpoint_sample, parse_exposition

# The alert each condition of the health model raises (docs/prometheus/alerts.yml).
ALERT_OF_CONDITION = {
    "stopped": "CkptwebQueryStopped",
    "stalled": "CkptwebQueryStalled",
    "falling-behind": "CkptwebQueryFallingBehind",
    "damaged": "CkptwebCheckpointDamaged",
    "not-a-checkpoint": "CkptwebNotACheckpoint",
    "failing-to-sync": "CkptwebSyncFailing",
}


def states_shown(client, checkpoints: dict[str, Checkpoint], promtool: str, tmp_path: Path) -> dict[str, dict]:
    """What the list, each query page, /metrics and the alert rules say of each checkpoint."""
    listing = client.get(reverse("dashboards:checkpoint-list")).content.decode()
    in_list = dict(re.findall(r'data-checkpoint="([^"]+)" data-status="([^"]+)"', listing))
    samples = parse_exposition(client.get("/metrics").content.decode())
    firing = alerts_firing(samples, list(checkpoints), promtool, tmp_path)
    shown = {}
    for name, checkpoint in checkpoints.items():
        page = client.get(checkpoint.get_absolute_url()).content.decode()
        header = re.search(r'id="query-status" data-status="([^"]+)"', page).group(1)
        metrics = [
            slug
            for slug in _slugs(samples)
            if checkpoint_sample(samples, "ckptweb_checkpoint_status", name, state=slug) == 1
        ]
        shown[name] = {
            "list": in_list.get(name),
            "header": header,
            "metrics": metrics[0] if len(metrics) == 1 else metrics,
            "alerts": firing[name],
        }
    return shown


def _slugs(samples: dict) -> set[str]:
    return {dict(labels)["state"] for name, labels in samples if name == "ckptweb_checkpoint_status"}


def alerts_firing(samples: dict, names: list[str], promtool: str, tmp_path: Path) -> dict[str, list[str]]:
    """Run promtool's rule tests over the scraped conditions held for 40 minutes, once per
    alert, expecting exactly the alerts ALERT_OF_CONDITION gives; read back which fired."""
    series = []
    expected: dict[str, list[dict]] = {alert: [] for alert in ALERT_OF_CONDITION.values()}
    for (sample, labels), value in samples.items():
        found = dict(labels)
        if sample != "ckptweb_checkpoint_condition" or found["checkpoint"] not in names:
            continue
        found = {key: val for key, val in found.items() if val}  # Prometheus drops empty labels
        selector = ",".join(f'{key}="{val}"' for key, val in sorted({"job": "ckptweb", **found}.items()))
        series.append({"series": f"ckptweb_checkpoint_condition{{{selector}}}", "values": f"{int(value)}x40"})
        if value == 1 and found["state"] in ALERT_OF_CONDITION:
            expected[ALERT_OF_CONDITION[found["state"]]].append(
                _expected_alert(ALERT_OF_CONDITION[found["state"]], found)
            )
    rules = REPO_DIR / "docs" / "prometheus" / "alerts.yml"
    tests = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "30m", "alertname": alert, "exp_alerts": cases} for alert, cases in expected.items()
                ],
            }
        ],
    }
    (tmp_path / "health_test.yml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [promtool, "test", "rules", str(tmp_path / "health_test.yml")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {
        name: sorted(
            alert
            for alert, cases in expected.items()
            if any(case["exp_labels"]["checkpoint"] == name for case in cases)
        )
        for name in names
    }


def _expected_alert(alert: str, labels: dict[str, str]) -> dict:
    """The alert as alerts.yml renders it for these labels (its templates use only these two)."""
    rule = next(
        rule
        for group in yaml.safe_load((REPO_DIR / "docs" / "prometheus" / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
        if rule.get("alert") == alert
    )

    def render(text: str) -> str:
        return text.replace("{{ $labels.checkpoint }}", labels["checkpoint"]).replace(
            "{{ $labels.query_name }}", labels.get("query_name", "")
        )

    return {
        "exp_labels": {"job": "ckptweb", **labels, **rule["labels"]},
        "exp_annotations": {key: render(value.strip()) for key, value in rule["annotations"].items()},
    }
