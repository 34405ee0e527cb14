"""docs/prometheus: the alerting rules pass promtool, and every alert fires in the rule unit tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fixture_paths import REPO_DIR

pytestmark = pytest.mark.prometheus

DOCS = REPO_DIR / "docs" / "prometheus"


def _run(*command: str, cwd: Path = DOCS) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def _alert_names() -> set[str]:
    groups = yaml.safe_load((DOCS / "alerts.yml").read_text())["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}


def test_the_alerting_rules_pass_promtool_check_rules(promtool):
    result = _run(promtool, "check", "rules", "alerts.yml")

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alert_names())} rules found" in result.stdout


def test_the_rule_unit_tests_pass(promtool):
    result = _run(promtool, "test", "rules", "alerts_test.yml")

    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_in_which_it_fires():
    tests = yaml.safe_load((DOCS / "alerts_test.yml").read_text())["tests"]
    firing = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}

    assert firing == _alert_names()


def test_the_rule_unit_tests_fail_when_an_alert_would_not_fire(promtool, tmp_path):
    """The unit tests can fail: expecting silence where an alert fires is reported."""
    shutil.copy(DOCS / "alerts.yml", tmp_path)
    tests = yaml.safe_load((DOCS / "alerts_test.yml").read_text())
    for test in tests["tests"]:
        for case in test["alert_rule_test"]:
            case["exp_alerts"] = []
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests))

    result = _run(promtool, "test", "rules", "alerts_test.yml", cwd=tmp_path)

    assert result.returncode != 0
    for name in _alert_names():
        assert f"alertname: {name}" in result.stdout + result.stderr, name


def test_the_example_scrape_config_passes_promtool_check_config(promtool, tmp_path):
    shutil.copy(DOCS / "prometheus.yml", tmp_path)
    shutil.copy(DOCS / "alerts.yml", tmp_path)
    (tmp_path / "ckptweb-metrics-token").write_text("a-token\n")

    result = _run(promtool, "check", "config", "prometheus.yml", cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
