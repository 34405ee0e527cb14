"""A real Prometheus scrapes a running ckptweb and finds a fixture checkpoint's figures as Spark wrote them.

Debian's prometheus runs on a free loopback port with its own configuration (the example
docs/prometheus/prometheus.yml with a 1 s interval and this test's target and token) and its own
data directory; it never talks to a system Prometheus.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from fixture_paths import REPO_DIR
from prometheus.scenario import DEDUP, KILLED, expected_batch_figures, files_on_disk, register_synced_fixture
from worker_process import free_port

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

DOCS = REPO_DIR / "docs" / "prometheus"
TOKEN = "scrape-token-for-the-test"
# Rule evaluation and scrapes every 2 s: a result is due within seconds, later on a loaded machine.
WAIT_SECONDS = 120


def _write_config(directory: Path, target: str) -> Path:
    """The example config, pointed at the live server, scraping every two seconds."""
    config = yaml.safe_load((DOCS / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "2s", "evaluation_interval": "2s"}
    job = config["scrape_configs"][0]
    job["scrape_timeout"] = "2s"
    job["static_configs"] = [{"targets": [target]}]
    (directory / "ckptweb-metrics-token").write_text(TOKEN)
    (directory / "alerts.yml").write_text((DOCS / "alerts.yml").read_text())
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def prometheus(prometheus_binary, live_server, settings, tmp_path):
    """Start prometheus scraping the live server; yield a function that runs an instant query."""
    settings.METRICS_TOKEN = TOKEN
    port = free_port()
    config = _write_config(tmp_path, urllib.parse.urlsplit(live_server.url).netloc)
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            prometheus_binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"

    def query(promql: str) -> list[dict]:
        url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    try:
        _wait_for(lambda: _is_ready(base), "prometheus to start", process, tmp_path)
        query.wait = lambda promql: _wait_for(lambda: query(promql), f"a result for {promql}", process, tmp_path)
        query.base = base
        yield query
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _is_ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _wait_for(predicate, what: str, process: subprocess.Popen, directory: Path):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, (directory / "prometheus.log").read_text()
        result = predicate()
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}\n" + (directory / "prometheus.log").read_text())


def _value(results: list[dict]) -> float:
    assert len(results) == 1, results
    return float(results[0]["value"][1])


def _latest(prometheus, selector: str) -> float:
    """The newest scraped value of one series.

    last_over_time skips the stale markers a slow or failed scrape writes, so a busy machine
    cannot make a series vanish between the wait and the assertion.
    """
    return _value(prometheus(f"last_over_time({selector}[5m])"))


def test_prometheus_scrapes_the_figures_spark_wrote_into_a_fixture_checkpoint(copy_checkpoint, prometheus):
    _, report, base = register_synced_fixture(copy_checkpoint, KILLED)
    files, size = files_on_disk(base / "checkpoint")

    prometheus.wait(f'ckptweb_checkpoint_latest_batch_id{{checkpoint="{KILLED}"}}')

    assert _value(prometheus('max_over_time(up{job="ckptweb"}[5m])')) == 1
    for name, expected in expected_batch_figures(report).items():
        selector = f'{name}{{checkpoint="{KILLED}",query_id="{report["query_id"]}"}}'
        assert _latest(prometheus, selector) == pytest.approx(expected), name
    for kind in files:
        assert _latest(prometheus, f'ckptweb_checkpoint_files{{checkpoint="{KILLED}",kind="{kind}"}}') == files[kind], (
            kind
        )
        assert _latest(prometheus, f'ckptweb_checkpoint_bytes{{checkpoint="{KILLED}",kind="{kind}"}}') == size[kind], (
            kind
        )
    assert _latest(prometheus, f'ckptweb_sync_runs_total{{checkpoint="{KILLED}",status="ok"}}') == 1


def test_prometheus_sees_the_compact_file_of_each_log_and_evaluates_the_alert_rules(copy_checkpoint, prometheus):
    _, _, base = register_synced_fixture(copy_checkpoint, DEDUP)
    newest_source_compact = (base / "checkpoint" / "sources" / "0" / "5.compact").stat().st_size
    newest_sink_compact = (base / "output" / "_spark_metadata" / "14.compact").stat().st_size

    prometheus.wait(f'ckptweb_metadata_log_compact_file_bytes{{checkpoint="{DEDUP}"}}')

    assert (
        _latest(prometheus, f'ckptweb_metadata_log_compact_file_bytes{{checkpoint="{DEDUP}",kind="source"}}')
        == newest_source_compact
    )
    assert (
        _latest(prometheus, f'ckptweb_metadata_log_compact_file_bytes{{checkpoint="{DEDUP}",kind="sink"}}')
        == newest_sink_compact
    )
    assert (
        _latest(prometheus, f'ckptweb_metadata_log_compact_interval_batches{{checkpoint="{DEDUP}",kind="source"}}') == 3
    )
    # The fixture's batches, every one committed, were planned hours ago and no progress comes: the
    # health model says stopped, and the real Prometheus evaluates the rule file and holds
    # CkptwebQueryStopped as pending (its `for:` is 5 minutes).
    alerts = prometheus.wait(f'ALERTS{{alertname="CkptwebQueryStopped",checkpoint="{DEDUP}"}}')
    assert alerts[0]["metric"]["alertstate"] in {"pending", "firing"}
    with urllib.request.urlopen(f"{prometheus.base}/api/v1/rules", timeout=5) as response:
        groups = json.load(response)["data"]["groups"]
    assert {rule["health"] for group in groups for rule in group["rules"]} <= {"ok", "unknown"}


def test_every_query_of_the_grafana_dashboard_runs_on_the_scraped_series(copy_checkpoint, prometheus):
    register_synced_fixture(copy_checkpoint, DEDUP)
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    prometheus.wait(f'ckptweb_progress_batch_id{{checkpoint="{DEDUP}"}}')
    prometheus.wait('count_over_time(up{job="ckptweb"}[1m]) >= 3')  # rate() and increase() need two samples

    empty = []
    for query in queries:
        promql = query.replace("$checkpoint", ".*").replace("$__rate_interval", "1m")
        if not prometheus(promql):  # a PromQL error fails inside prometheus()
            empty.append(query)

    # The fixture has no integrity finding, no maintenance run, no beat run and no event-log
    # directory: every other panel has data.
    quiet = ("integrity_findings", "maintenance", "beat", "event_log")
    assert [query for query in empty if not any(word in query for word in quiet)] == []
