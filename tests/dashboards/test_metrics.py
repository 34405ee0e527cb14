"""/metrics: the collector's families against Spark's own figures, the query budget, the token."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kombu import Connection
from prometheus_client.parser import text_string_to_metric_families

from dashboards.models import Batch, BatchProgress, Checkpoint, Finding, MaintenanceRun, StatePartition, SyncRun
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES, REPO_DIR
from kafka_progress import BEHIND_PER_BATCH, with_kafka_source
from prometheus.scenario import (
    DEDUP,
    KILLED,
    checkpoint_sample,
    expected_batch_figures,
    files_on_disk,
    newest_progress,
    parse_exposition,
    register_synced_fixture,
)
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

# read_checkpoints, last runs, sync totals of the runs kept and of the runs pruned, progress,
# operators, state stores, state variables, logs, inventory, findings, maintenance runs, beat, event-log
# directories, the health model's figures, the newest reports' source lags (dashboards/metrics/collector.py).
METRICS_QUERIES = 16
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def test_batch_and_progress_gauges_match_the_offset_log_commit_log_and_progress_spark_wrote(client, copy_checkpoint):
    checkpoint, report, _ = register_synced_fixture(copy_checkpoint, KILLED)

    samples = scrape(client)

    for name, expected in expected_batch_figures(report).items():
        assert checkpoint_sample(samples, name, KILLED, query_id=report["query_id"]) == pytest.approx(expected), name
    assert (
        checkpoint_sample(samples, "ckptweb_checkpoint_uncommitted_batches", KILLED) == 1
    )  # offsets/6 without commits/6


def test_query_name_label_is_the_name_spark_reported(client, copy_checkpoint):
    _, report, _ = register_synced_fixture(copy_checkpoint, KILLED)

    samples = scrape(client)

    assert (
        checkpoint_sample(
            samples, "ckptweb_checkpoint_latest_batch_id", KILLED, query_name=newest_progress(report)["name"]
        )
        is not None
    )


def test_inventory_counts_every_file_of_the_checkpoint_by_kind(client, copy_checkpoint):
    _, _, base = register_synced_fixture(copy_checkpoint, KILLED)
    files, size = files_on_disk(base / "checkpoint")

    samples = scrape(client)

    for kind in files:
        assert checkpoint_sample(samples, "ckptweb_checkpoint_files", KILLED, kind=kind) == files[kind], kind
        assert checkpoint_sample(samples, "ckptweb_checkpoint_bytes", KILLED, kind=kind) == size[kind], kind


def test_compact_file_bytes_and_interval_are_those_of_the_newest_compact_file(client, copy_checkpoint):
    _, _, base = register_synced_fixture(copy_checkpoint, DEDUP)
    source_log = base / "checkpoint" / "sources" / "0"
    newest = max(source_log.glob("*.compact"), key=lambda path: int(path.stem))

    samples = scrape(client)

    # The fixture's source log has 2.compact and 5.compact: every third batch is compacted.
    assert checkpoint_sample(samples, "ckptweb_metadata_log_compact_interval_batches", DEDUP, log="sources/0") == 3
    assert (
        checkpoint_sample(samples, "ckptweb_metadata_log_compact_file_bytes", DEDUP, log="sources/0")
        == newest.stat().st_size
    )
    assert checkpoint_sample(samples, "ckptweb_metadata_log_latest_batch_id", DEDUP, log="sources/0") == 7


def test_state_store_figures_are_summed_over_partitions(client, copy_checkpoint):
    checkpoint, _, _ = register_synced_fixture(copy_checkpoint, KILLED)
    partitions = list(StatePartition.objects.filter(checkpoint=checkpoint))
    assert len(partitions) > 1

    samples = scrape(client)

    assert checkpoint_sample(samples, "ckptweb_state_store_partitions", KILLED) == len(partitions)
    assert checkpoint_sample(samples, "ckptweb_state_store_disk_bytes", KILLED) == sum(
        p.bytes_on_disk for p in partitions
    )
    assert checkpoint_sample(samples, "ckptweb_state_store_max_delta_chain", KILLED) == max(
        p.delta_chain for p in partitions
    )


def test_each_state_variable_of_a_transform_with_state_query_has_its_rows(client, copy_checkpoint):
    # pipelines/tws_queries.py: 7 rows a batch for 4 batches over 3 keys (value % 3).
    base = copy_checkpoint(OUR_FIXTURES / "tws" / "unsaferow")
    checkpoint = make_checkpoint(name="tws", url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)

    samples = scrape(client)

    def rows(variable: str, kind: str) -> float | None:
        return checkpoint_sample(
            samples, "ckptweb_state_variable_rows", "tws", operator_id="0", variable=variable, kind=kind
        )

    assert rows("count", "ValueState") == 3 and rows("by_parity", "MapState") == 6
    assert rows("recent", "ListState") == 28
    assert rows("$procTimers_keyToTimestamp", "timers (processing time)") == 3
    assert checkpoint_sample(samples, "ckptweb_state_variable_bytes", "tws", variable="recent") > 28 * 17


def test_state_operators_are_summed_unless_per_operator_labels_are_enabled(client, settings):
    checkpoint = _checkpoint_with_two_operators()

    summed = scrape(client)
    settings.METRICS_PER_OPERATOR = True
    split = scrape(client)

    assert checkpoint_sample(summed, "ckptweb_state_operator_rows", checkpoint.name) == 6 + 50
    assert checkpoint_sample(summed, "ckptweb_state_operator_cache_hits_total", checkpoint.name) == 20 + 44
    assert (
        checkpoint_sample(
            split, "ckptweb_state_operator_rows", checkpoint.name, operator_index="0", operator_name="stateStoreSave"
        )
        == 6
    )
    assert (
        checkpoint_sample(
            split, "ckptweb_state_operator_rows", checkpoint.name, operator_index="1", operator_name="symmetricHashJoin"
        )
        == 50
    )
    assert not any("operator_index" in dict(items) for (_, items) in summed)


def test_two_checkpoints_of_one_query_both_show_its_progress(client):
    checkpoint = _checkpoint_with_two_operators()
    make_checkpoint(name="copy", url="/data/copy", query=checkpoint.query)

    samples = scrape(client)

    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "two-operators") == 7
    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "copy") == 7
    assert checkpoint_sample(samples, "ckptweb_state_operator_rows", "copy") == 6 + 50


def test_each_source_s_lag_in_the_newest_report_is_a_gauge_and_a_source_reporting_none_has_no_sample(client):
    """A file source (as Spark 4.3 reported it: no latestOffset) joined with a Kafka source."""
    report = json.loads((OUR_FIXTURES / "file_source_dedup" / "spark-report.json").read_text())["progress"]
    for spark_wrote, with_kafka in zip(report[-2:], with_kafka_source(report[-2:]), strict=True):
        both = {**spark_wrote, "sources": [*spark_wrote["sources"], *with_kafka["sources"]]}
        row, _ = BatchProgress.objects.store(progress_from_dict(both, source="test"), origin="listener")
    make_checkpoint(name="join", query=row.query)
    newest = report[-1]["batchId"]

    samples = scrape(client)

    family = "ckptweb_progress_source_offsets_behind"
    assert checkpoint_sample(samples, family, "join", source_index="1", source="KafkaV2[Subscribe[orders]]") == (
        BEHIND_PER_BATCH * newest
    )
    assert [dict(items)["source_index"] for (name, items) in samples if name == family] == ["1"]


def test_findings_are_counted_by_severity_with_zero_for_the_others(client):
    checkpoint = make_checkpoint()
    Finding.objects.create(
        checkpoint=checkpoint, code="a", path="offsets/3", severity=Finding.Severity.ERROR, message="m"
    )
    Finding.objects.create(
        checkpoint=checkpoint, code="b", path="offsets/4", severity=Finding.Severity.ERROR, message="m"
    )
    Finding.objects.create(
        checkpoint=checkpoint, code="c", path="", severity=Finding.Severity.ERROR, message="m", resolved_at=T0
    )

    samples = scrape(client)

    assert checkpoint_sample(samples, "ckptweb_integrity_findings", "orders", severity="error") == 2
    assert checkpoint_sample(samples, "ckptweb_integrity_findings", "orders", severity="warning") == 0
    assert checkpoint_sample(samples, "ckptweb_integrity_findings", "orders", severity="info") == 0


def test_sync_runs_and_storage_calls_are_counters_and_the_last_run_is_described(client):
    checkpoint = make_checkpoint()
    _sync_run(checkpoint, T0, SyncRun.Status.OK, list_calls=2, read_calls=3, bytes_read=100)
    _sync_run(
        checkpoint,
        T0 + timedelta(minutes=1),
        SyncRun.Status.FAILED,
        list_calls=1,
        read_calls=0,
        bytes_read=0,
        seconds=4,
    )
    _sync_run(checkpoint, T0 + timedelta(minutes=2), SyncRun.Status.RUNNING, list_calls=1, read_calls=1, bytes_read=7)

    samples = scrape(client)

    assert checkpoint_sample(samples, "ckptweb_sync_runs_total", "orders", status="ok") == 1
    assert checkpoint_sample(samples, "ckptweb_sync_runs_total", "orders", status="failed") == 1
    assert checkpoint_sample(samples, "ckptweb_sync_runs_total", "orders", status="partial") == 0
    assert checkpoint_sample(samples, "ckptweb_sync_storage_calls_total", "orders", kind="list") == 4
    assert checkpoint_sample(samples, "ckptweb_sync_storage_read_bytes_total", "orders") == 107
    # The running sync has not finished: the last finished one is the failed one.
    assert checkpoint_sample(samples, "ckptweb_sync_last_run_failed", "orders") == 1
    assert checkpoint_sample(samples, "ckptweb_sync_last_run_duration_seconds", "orders") == 4
    assert (
        checkpoint_sample(samples, "ckptweb_sync_last_run_timestamp_seconds", "orders")
        == (T0 + timedelta(minutes=1, seconds=4)).timestamp()
    )


def test_a_never_synced_checkpoint_has_no_timestamp_samples_but_zero_counters(client):
    make_checkpoint()

    samples = scrape(client)

    assert checkpoint_sample(samples, "ckptweb_sync_last_success_timestamp_seconds", "orders") is None
    assert checkpoint_sample(samples, "ckptweb_checkpoint_latest_batch_timestamp_seconds", "orders") is None
    assert checkpoint_sample(samples, "ckptweb_sync_runs_total", "orders", status="failed") == 0


@pytest.mark.parametrize("batches", [10, 10_000])
def test_metrics_takes_a_fixed_number_of_queries_whatever_the_history(client, batches):
    for index in range(3):
        _checkpoint_with_history(index, batches)

    with CaptureQueriesContext(connection) as queries:
        samples = scrape(client)

    assert len(queries) == METRICS_QUERIES, [query["sql"] for query in queries]
    assert checkpoint_sample(samples, "ckptweb_checkpoint_latest_batch_id", "query-2") == batches - 1
    assert checkpoint_sample(samples, "ckptweb_sync_runs_total", "query-2", status="ok") == batches // 10
    assert checkpoint_sample(samples, "ckptweb_state_operator_rows", "query-2") == batches
    assert (
        checkpoint_sample(samples, "ckptweb_maintenance_runs_total", "query-2", action="purge", result="succeeded")
        == batches // 100
    )


def test_every_family_has_help_text_and_counters_end_in_total(client, copy_checkpoint):
    register_synced_fixture(copy_checkpoint, DEDUP)

    families = list(text_string_to_metric_families(client.get("/metrics").content.decode()))

    assert len(families) > 30
    for family in families:
        assert family.name.startswith("ckptweb_"), family.name
        assert family.documentation, family.name
        assert family.type in {"gauge", "counter"}, family.name
        if family.type == "counter":
            assert all(sample.name.endswith("_total") for sample in family.samples), family.name


def test_metrics_is_public_without_a_token(client, settings):
    settings.METRICS_TOKEN = ""

    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Token s3cret-token", "s3cret-token"])
def test_metrics_refuses_a_missing_or_wrong_token(client, settings, header):
    settings.METRICS_TOKEN = "s3cret-token"
    headers = {} if header is None else {"HTTP_AUTHORIZATION": header}

    response = client.get("/metrics", **headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_metrics_answers_the_bearer_token(client, settings):
    settings.METRICS_TOKEN = "s3cret-token"
    make_checkpoint()

    samples = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-token")

    assert checkpoint_sample(samples, "ckptweb_checkpoint_enabled", "orders") == 1


def test_openmetrics_is_served_when_prometheus_asks_for_it(client):
    make_checkpoint()

    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")

    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")


def test_an_unreachable_broker_is_exported_as_down_and_the_scrape_still_works(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    make_checkpoint()

    samples = scrape(client)

    assert samples[("ckptweb_broker_up", frozenset())] == 0
    assert not any(name == "ckptweb_broker_queue_messages" for name, _ in samples)
    assert checkpoint_sample(samples, "ckptweb_checkpoint_enabled", "orders") == 1


def test_the_embedded_broker_reports_the_messages_waiting_in_its_queue(client, settings, tmp_path):
    (tmp_path / "queue").mkdir()
    (tmp_path / "control").mkdir()
    settings.CELERY_BROKER_URL = "ckptwebfs://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(tmp_path / "queue"),
        "data_folder_out": str(tmp_path / "queue"),
        "control_folder": str(tmp_path / "control"),
    }
    with Connection("ckptwebfs://", transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as producer:
        for name, count in [("celery", 3), (settings.TASK_QUEUES["sync"], 2)]:
            queue = producer.SimpleQueue(name)
            for number in range(count):
                queue.put({"n": number})
            queue.close()

    samples = scrape(client)

    assert samples[("ckptweb_broker_up", frozenset())] == 1
    assert samples[("ckptweb_broker_queue_messages", frozenset({("queue", "celery")}))] == 3
    assert samples[("ckptweb_broker_queue_messages", frozenset({("queue", settings.TASK_QUEUES["sync"])}))] == 2
    assert samples[("ckptweb_broker_queue_messages", frozenset({("queue", settings.TASK_QUEUES["maintenance"])}))] == 0


def test_maintenance_runs_are_counted_by_action_and_result(client):
    checkpoint = make_checkpoint()
    for action, status, finished in [
        ("purge", "succeeded", T0),
        ("purge", "succeeded", T0 + timedelta(hours=1)),
        ("purge", "failed", T0),
        ("snapshot", "refused", None),
        ("compact", "running", None),
        ("cleanup", "planned", None),
    ]:
        MaintenanceRun.objects.create(checkpoint=checkpoint, action=action, status=status, finished_at=finished)

    samples = scrape(client)

    assert (
        checkpoint_sample(samples, "ckptweb_maintenance_runs_total", "orders", action="purge", result="succeeded") == 2
    )
    assert checkpoint_sample(samples, "ckptweb_maintenance_runs_total", "orders", action="purge", result="failed") == 1
    assert (
        checkpoint_sample(samples, "ckptweb_maintenance_runs_total", "orders", action="snapshot", result="refused") == 1
    )
    assert (
        checkpoint_sample(samples, "ckptweb_maintenance_runs_total", "orders", action="cleanup", result="succeeded")
        == 0
    )
    assert not any(dict(items).get("result") == "planned" for _, items in samples)
    assert checkpoint_sample(samples, "ckptweb_maintenance_runs_active", "orders", action="compact") == 1
    assert (
        checkpoint_sample(samples, "ckptweb_maintenance_last_success_timestamp_seconds", "orders", action="purge")
        == (T0 + timedelta(hours=1)).timestamp()
    )


def test_every_family_is_documented_and_the_dashboard_and_alerts_use_only_exported_metrics(client):
    make_checkpoint()
    families = {family.name for family in text_string_to_metric_families(client.get("/metrics").content.decode())}
    docs = REPO_DIR / "docs"

    documented = _family_names(re.findall(r"`(ckptweb_[a-z_]+)`", (docs / "metrics.md").read_text()))
    used = _family_names(re.findall(r"ckptweb_[a-z_]+", (docs / "prometheus" / "grafana-dashboard.json").read_text()))
    used |= _family_names(re.findall(r"ckptweb_[a-z_]+", (docs / "prometheus" / "alerts.yml").read_text()))

    assert documented == families
    assert used <= families


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return parse_exposition(response.content.decode())


def _sync_run(checkpoint, started, status, *, list_calls, read_calls, bytes_read, seconds=1):
    finished = None if status == SyncRun.Status.RUNNING else started + timedelta(seconds=seconds)
    return SyncRun.objects.create(
        checkpoint=checkpoint,
        started_at=started,
        finished_at=finished,
        status=status,
        list_calls=list_calls,
        read_calls=read_calls,
        bytes_read=bytes_read,
        error_count=int(status == SyncRun.Status.FAILED),
    )


def _progress_report(query_id: str, batch_id: int, operators: list[dict]) -> dict:
    """A report shaped like the fixtures' (StreamingQueryProgress.json), for made-up histories."""
    template = newest_progress(json.loads((OUR_FIXTURES / KILLED / "spark-report.json").read_text()))
    return {
        **template,
        "id": query_id,
        "runId": "00000000-0000-0000-0000-000000000001",
        "batchId": batch_id,
        "stateOperators": operators,
    }


def _operator(template: dict, name: str, rows: int, hits: int) -> dict:
    return {
        **template,
        "operatorName": name,
        "numRowsTotal": rows,
        "customMetrics": {**template["customMetrics"], "loadedMapCacheHitCount": hits},
    }


def _checkpoint_with_two_operators() -> Checkpoint:
    """The killed_mid_batch query's aggregation plus the stream_stream_join's join, as one query's report."""
    aggregation = newest_progress(json.loads((OUR_FIXTURES / KILLED / "spark-report.json").read_text()))[
        "stateOperators"
    ][0]
    join = newest_progress(json.loads((OUR_FIXTURES / "stream_stream_join" / "spark-report.json").read_text()))[
        "stateOperators"
    ][0]
    report = _progress_report("11111111-2222-3333-4444-555555555555", 7, [aggregation, join])
    row, _ = BatchProgress.objects.store(progress_from_dict(report, source="test"), origin="listener")
    return make_checkpoint(name="two-operators", query=row.query)


def _checkpoint_with_history(index: int, batches: int) -> Checkpoint:
    """query-<index> with ``batches`` batches and progress reports, a sync run per ten batches, a
    maintenance run per hundred, four state partitions."""
    name, query_id = f"query-{index}", f"00000000-0000-0000-0000-{index:012d}"
    operator = newest_progress(json.loads((OUR_FIXTURES / KILLED / "spark-report.json").read_text()))["stateOperators"][
        0
    ]
    progress = None
    for batch_id in (0, batches - 1):  # the newest report is what counts; history rows are bulk-made below
        progress, _ = BatchProgress.objects.store(
            progress_from_dict(
                _progress_report(query_id, batch_id, [_operator(operator, "agg", batches, 1)]), source="t"
            ),
            origin="listener",
        )
    checkpoint = make_checkpoint(
        name=name,
        url=f"/data/{name}",
        query=progress.query,
        latest_batch_id=batches - 1,
        latest_committed_batch_id=batches - 2,
    )
    Batch.objects.bulk_create(
        Batch(
            checkpoint=checkpoint,
            batch_id=b,
            offset_log_version=1,
            timestamp_ms=1_700_000_000_000 + b,
            watermark_ms=b,
            is_committed=b < batches - 1,
        )
        for b in range(batches)
    )
    BatchProgress.objects.bulk_create(
        BatchProgress(query=progress.query, batch_id=b, timestamp=T0, origin="listener") for b in range(1, batches - 1)
    )
    SyncRun.objects.bulk_create(
        SyncRun(
            checkpoint=checkpoint,
            started_at=T0 + timedelta(seconds=i),
            finished_at=T0 + timedelta(seconds=i + 1),
            status="ok",
        )
        for i in range(batches // 10)
    )
    StatePartition.objects.bulk_create(
        StatePartition(
            checkpoint=checkpoint,
            operator=0,
            partition=p,
            store="default",
            provider="hdfs",
            path=f"state/0/{p}",
            delta_chain=p,
        )
        for p in range(4)
    )
    Finding.objects.create(checkpoint=checkpoint, code="x", severity=Finding.Severity.WARNING, message="m")
    MaintenanceRun.objects.bulk_create(
        MaintenanceRun(checkpoint=checkpoint, action="purge", status="succeeded", finished_at=T0)
        for _ in range(batches // 100)
    )
    return checkpoint


def _family_names(names: list[str]) -> set[str]:
    """Counter samples end in _total; their family does not."""
    return {name.removesuffix("_total") for name in names}


def test_the_status_family_says_what_the_health_model_says_with_one_sample_per_state(client):
    from dashboards.health.query_status import State

    now = datetime.now(UTC)
    make_checkpoint(
        name="stuck",
        latest_batch_id=7,
        latest_batch_at=now - timedelta(hours=1),
        latest_committed_batch_id=6,
        last_synced_at=now,
    )

    samples = scrape(client)

    status = {
        state.slug: checkpoint_sample(samples, "ckptweb_checkpoint_status", "stuck", state=state.slug)
        for state in State
    }
    assert status == {state.slug: int(state is State.STALLED) for state in State}
    assert checkpoint_sample(samples, "ckptweb_checkpoint_condition", "stuck", state="stalled") == 1
    assert checkpoint_sample(samples, "ckptweb_checkpoint_condition", "stuck", state="stopped") == 0
    assert checkpoint_sample(samples, "ckptweb_checkpoint_status_since_timestamp_seconds", "stuck") == pytest.approx(
        (now - timedelta(hours=1)).timestamp()
    )
