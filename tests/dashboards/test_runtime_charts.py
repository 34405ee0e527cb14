"""The query page's Runtime section: Spark UI's charts from the stored progress, with marks where something happened."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboards.models import (
    Batch,
    BatchProgress,
    Checkpoint,
    Finding,
    MaintenanceRun,
    MetadataLog,
    StateOperatorMetrics,
    StreamingQuery,
)
from dashboards.query_page.runtime_charts import RUNTIME_CHARTS
from dashboards.query_page.runtime_marks import describe_conf_change
from dashboards.query_page.runtime_series import RUNTIME_MAX_POINTS
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from kafka_progress import BEHIND_PER_BATCH, with_kafka_source
from progress_history import (
    LAG_SPIKE_BATCH,
    RATE_SPIKE_BATCH,
    ROWS_SPIKE_BATCH,
    SLOW_BATCH,
    START_MS,
    fill_progress_history,
)
from runtime_expectations import assert_drawn_as_reported, epoch_ms, marks_of
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"
ALL_PARTS = [chart.part for chart in RUNTIME_CHARTS]
STATELESS_PARTS = [chart.part for chart in RUNTIME_CHARTS if not chart.is_stateful]


def _report(name: str) -> list[dict]:
    return json.loads((OUR_FIXTURES / name / "spark-report.json").read_text())["progress"]


def _store(progress: list[dict]) -> None:
    for fields in progress:
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")


def _registered(copy_checkpoint, name: str, **options) -> Checkpoint:
    base = copy_checkpoint(OUR_FIXTURES / name)
    sink = {"sink_log_url": str(base / "output")} if (base / "output").is_dir() else {}
    checkpoint = make_checkpoint(name=name, url=str(base / "checkpoint"), **sink, **options)
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    return checkpoint


def _figures(client, checkpoint: Checkpoint, query: str = "") -> dict:
    response = client.get(reverse("dashboards:runtime-charts", args=[checkpoint.pk]) + query)
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def dedup(copy_checkpoint) -> Checkpoint:
    """Spark's file source -> dropDuplicates -> file sink run, synced, with the progress it reported."""
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    _store(_report("file_source_dedup"))
    return checkpoint


@pytest.mark.parametrize(
    "name", ["file_source_dedup", "stream_stream_join", "rocksdb_changelog_agg", "windowed_agg_file_sink"]
)
def test_every_runtime_chart_draws_what_spark_reported_for_each_batch(viewer_client, copy_checkpoint, name):
    checkpoint = _registered(copy_checkpoint, name)
    progress = _report(name)
    _store(progress)

    figures = _figures(viewer_client, checkpoint)

    assert list(figures) == ALL_PARTS
    assert_drawn_as_reported(figures, progress)


def test_every_runtime_figure_is_valid_for_plotly(viewer_client, dedup):
    Finding.objects.create(
        checkpoint=dedup, code="empty-file", severity=Finding.Severity.ERROR, path="commits/13", message="empty"
    )

    for figure in _figures(viewer_client, dedup).values():
        go.Figure(figure)  # plotly.py's schema check: raises ValueError naming a wrong property


def test_a_rocksdb_query_says_why_it_has_no_cache_hit_ratio(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "rocksdb_changelog_agg")
    _store(_report("rocksdb_changelog_agg"))

    cache = _figures(viewer_client, checkpoint)["state-cache"]

    go.Figure(cache)
    assert [trace for trace in cache["data"] if trace.get("yaxis") != "y2"] == []
    assert "only the HDFS state store provider reports" in cache["layout"]["meta"]["sentence"]
    assert max(len(line) for line in cache["layout"]["annotations"][0]["text"].split("<br>")) <= 44  # fits a phone


def test_the_lag_chart_draws_each_source_behind_its_head_at_every_batch(viewer_client, dedup):
    progress = with_kafka_source(_report("file_source_dedup"))
    _store(progress)

    lag = _figures(viewer_client, dedup)["behind-head"]

    go.Figure(lag)
    (line,) = [trace for trace in lag["data"] if trace.get("yaxis") != "y2"]
    assert line["name"] == "0: KafkaV2[Subscribe[orders]]"
    assert line["x"] == [epoch_ms(p["timestamp"]) for p in progress]
    assert line["y"] == [BEHIND_PER_BATCH * p["batchId"] for p in progress]
    assert line["customdata"] == [p["batchId"] for p in progress]
    assert lag["layout"]["yaxis"]["title"]["text"] == "offsets"


def test_a_query_whose_sources_report_no_lag_says_so_instead_of_a_lag_chart(viewer_client, dedup):
    lag = _figures(viewer_client, dedup)["behind-head"]

    assert [trace for trace in lag["data"] if trace.get("yaxis") != "y2"] == []
    assert lag["layout"]["meta"]["sentence"].startswith("No source reported how far it is behind its head")
    assert max(len(line) for line in lag["layout"]["annotations"][0]["text"].split("<br>")) <= 44


def test_every_axis_of_a_drawn_chart_has_its_unit(viewer_client, dedup):
    _store(with_kafka_source(_report("file_source_dedup")))
    figures = _figures(viewer_client, dedup)

    units = {part: figure["layout"]["yaxis"]["title"]["text"] for part, figure in figures.items()}
    assert units == {
        # Spark ran the fixture in 2026 on rows of 2024: a gap of about 1,000 days.
        "rates": "rows/s",
        "input-rows": "rows",
        "batch-duration": "ms",
        "phases": "ms",
        "watermark-gap": "d",
        "behind-head": "offsets",
        "state-rows": "rows",
        "state-changes": "rows",
        "state-memory": "KB",  # Spark reported up to 4,608 bytes
        "state-cache": "hit ratio",
    }
    assert {
        (figure["layout"]["xaxis"]["type"], figure["layout"]["xaxis"]["title"]["text"]) for figure in figures.values()
    } == {("date", "batch start (UTC)")}


def test_batches_of_ten_seconds_or_more_are_drawn_in_seconds(viewer_client, dedup):
    BatchProgress.objects.filter(query=dedup.query, batch_id=7).update(
        batch_duration_ms=12_500, duration_ms={"addBatch": 12_000, "walCommit": 500}
    )

    figures = _figures(viewer_client, dedup)

    duration, phases = figures["batch-duration"], figures["phases"]
    assert duration["layout"]["yaxis"]["title"]["text"] == phases["layout"]["yaxis"]["title"]["text"] == "s"
    line = duration["data"][0]
    assert line["y"][line["customdata"].index(7)] == 12.5
    add_batch = next(trace for trace in phases["data"] if trace["name"] == "addBatch")
    assert add_batch["y"][add_batch["customdata"].index(7)] == 12.0


def test_a_point_links_to_its_batch_page(viewer_client, dedup):
    figure = _figures(viewer_client, dedup)["rates"]

    link = figure["layout"]["meta"]["link"]
    assert link.format(figure["data"][0]["customdata"][-1]) == reverse("dashboards:batch-detail", args=[dedup.pk, 15])
    assert "batch %{customdata}" in figure["data"][0]["hovertemplate"]


def test_a_query_without_watermark_says_so_instead_of_an_empty_gap_chart(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    progress = _report("file_source_dedup")
    for fields in progress:
        fields["eventTime"] = {}
    _store(progress)

    gap = _figures(viewer_client, checkpoint)["watermark-gap"]

    assert [trace for trace in gap["data"] if trace.get("yaxis") != "y2"] == []
    assert gap["layout"]["meta"]["sentence"].startswith("No event-time watermark in this range")
    assert gap["layout"]["annotations"][0]["text"].replace("<br>", " ") == gap["layout"]["meta"]["sentence"]
    assert gap["layout"]["xaxis"]["visible"] is False and gap["layout"]["yaxis"]["visible"] is False


def test_a_stateless_query_gets_no_state_charts(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    progress = _report("file_source_dedup")
    for fields in progress:
        fields["stateOperators"] = []
    _store(progress)

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()

    assert list(_figures(viewer_client, checkpoint)) == STATELESS_PARTS
    assert [part for part in ALL_PARTS if f'data-chart-part="{part}"' in page] == STATELESS_PARTS


def test_the_page_reserves_a_box_for_every_runtime_chart_fetched_from_one_address(viewer_client, dedup):
    page = viewer_client.get(dedup.get_absolute_url() + "?from=3&to=9").content.decode()

    address = reverse("dashboards:runtime-charts", args=[dedup.pk]) + "?from=3&amp;to=9"
    assert page.count(f'data-chart-url="{address}"') == len(ALL_PARTS)
    assert '<a href="#runtime">Runtime</a>' in page
    assert "newest is batch 15" in page and "(progress listener)" in page


def test_without_progress_the_section_says_how_to_get_it_instead_of_drawing_axes(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()

    section = page[page.index('<section id="runtime">') :]
    section = section[: section.index("</section>")]
    assert "No progress received</strong>: add the ckptweb listener or register the Spark event-log folder." in section
    assert "data-chart-url" not in section
    assert str(checkpoint.query.query_id) in section
    assert "CkptwebProgressListener(" in section


def test_progress_behind_the_checkpoint_is_said_to_be_behind(viewer_client, dedup):
    Checkpoint.objects.filter(pk=dedup.pk).update(latest_batch_id=40)

    page = viewer_client.get(dedup.get_absolute_url()).content.decode()

    assert "The checkpoint is 25 batches further: their progress has not arrived" in page


def test_a_batch_range_draws_only_its_batches(viewer_client, dedup):
    figures = _figures(viewer_client, dedup, "?from=3&to=9")

    assert_drawn_as_reported(figures, [p for p in _report("file_source_dedup") if 3 <= p["batchId"] <= 9])


# --- marks -----------------------------------------------------------------------------------


def _times(progress: list[dict]) -> dict[int, int]:
    return {p["batchId"]: epoch_ms(p["timestamp"]) for p in progress}


def test_file_sink_compactions_are_marked_on_every_chart_at_the_batch_spark_compacted(viewer_client, dedup):
    times = _times(_report("file_source_dedup"))
    spark_compacted = sorted(
        int(p.name.removesuffix(".compact")) for p in (DEDUP / "output" / "_spark_metadata").glob("*.compact")
    )
    interval = dedup.metadata_logs.get(kind=MetadataLog.Kind.SINK).compact_interval
    _store(with_kafka_source(_report("file_source_dedup")))  # the lag chart drawn too, not a sentence

    figures = _figures(viewer_client, dedup)

    expected = [(times[b], f"file sink log compaction: _spark_metadata/{b}.compact", b) for b in (2, 5, 8, 11, 14)]
    assert interval == 3 and set(spark_compacted) <= {b for _, _, b in expected}  # Spark kept the newest two
    for figure in figures.values():
        assert marks_of(figure)["log compaction"] == expected
    lines = {shape["x0"] for shape in figures["rates"]["layout"]["shapes"]}
    assert lines == {x for x, _, _ in expected} | {
        x for marks in marks_of(figures["rates"]).values() for x, _, _ in marks
    }


def test_a_file_source_compaction_is_marked_at_the_batch_whose_offset_reached_it(viewer_client, dedup):
    log = dedup.metadata_logs.get(kind=MetadataLog.Kind.SOURCE)
    # Batches 12..15 are on storage (logOffsets 6, 6, 7, 7); older offsets were purged. Give the
    # earlier ones offsets as Spark writes them: a new file every other batch.
    offsets = {b: b // 2 for b in range(1, 12)}
    Batch.objects.bulk_create(
        Batch(
            checkpoint=dedup,
            batch_id=b,
            offset_log_version=1,
            timestamp_ms=1,
            watermark_ms=0,
            sources=[json.dumps({"logOffset": o})],
        )
        for b, o in offsets.items()
    )

    marks = marks_of(_figures(viewer_client, dedup)["input-rows"])["log compaction"]

    source_marks = [(batch, text) for _, text, batch in marks if text.startswith("file source")]
    assert log.compact_interval == 3
    assert source_marks == [
        (4, "file source 0 log compaction: sources/0/2.compact"),
        (10, "file source 0 log compaction: sources/0/5.compact"),
    ]


def _store_restarted(progress: list[dict], *, at_batch: int) -> str:
    """Store the progress as if the query was restarted at ``at_batch``; return the new run id."""
    new_run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"run from {at_batch}"))
    _store([{**p, "runId": new_run} if p["batchId"] >= at_batch else p for p in progress])
    return new_run


def test_a_restart_is_marked_at_the_first_batch_of_the_new_run(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    progress = _report("file_source_dedup")
    new_run = _store_restarted(progress, at_batch=8)

    marks = marks_of(_figures(viewer_client, checkpoint)["batch-duration"])

    assert marks["query restart"] == [(_times(progress)[8], f"query restarted: run {new_run[:8]}… from batch 8", 8)]


def test_a_run_that_reran_the_last_batch_of_the_previous_one_starts_at_that_batch(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    progress = _report("file_source_dedup")
    _store(progress[:9])
    rerun = {
        **progress[8],
        "runId": str(uuid.uuid5(uuid.NAMESPACE_URL, "rerun")),
        "timestamp": "2026-11-22T05:00:00.000Z",
    }
    _store([rerun] + [{**p, "runId": rerun["runId"]} for p in progress[9:]])

    [(time, _, batch)] = marks_of(_figures(viewer_client, checkpoint)["rates"])["query restart"]

    assert (time, batch) == (epoch_ms(rerun["timestamp"]), 8)


def test_a_pinned_conf_that_changed_at_a_restart_is_marked_with_the_change(viewer_client, copy_checkpoint):
    checkpoint = _registered(copy_checkpoint, "file_source_dedup")
    progress = _report("file_source_dedup")
    _store_restarted(progress, at_batch=14)
    conf = Batch.objects.get(checkpoint=checkpoint, batch_id=13).conf
    Batch.objects.filter(checkpoint=checkpoint, batch_id__gte=14).update(
        conf={**conf, "spark.sql.shuffle.partitions": "8"}
    )

    marks = marks_of(_figures(viewer_client, checkpoint)["state-rows"])

    old = conf["spark.sql.shuffle.partitions"]
    assert marks["pinned SQL conf changed"] == [
        (_times(progress)[14], f"pinned SQL conf changed: spark.sql.shuffle.partitions {old} → 8", 14)
    ]


def test_a_conf_change_lists_the_first_keys_and_counts_the_rest():
    old = {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
    new = {"a": "1", "b": "20", "c": "30", "d": "40", "f": "6"}
    assert describe_conf_change(old, new) == "b 2 → 20; c 3 → 30; d 4 → 40; 2 more"
    assert describe_conf_change({}, {"x": "y"}) == "x (unset) → y"


def test_a_maintenance_run_is_marked_when_it_started_and_links_to_its_page(viewer_client, dedup):
    started = datetime.fromisoformat("2026-11-22T04:24:00.500+00:00")
    run = MaintenanceRun.objects.create(
        checkpoint=dedup,
        action="snapshot",
        status=MaintenanceRun.Status.SUCCEEDED,
        started_at=started,
        finished_at=started + timedelta(seconds=3),
    )
    MaintenanceRun.objects.create(checkpoint=dedup, action="purge", status=MaintenanceRun.Status.PLANNED)  # never ran

    marks = marks_of(_figures(viewer_client, dedup)["phases"])

    assert marks["maintenance run"] == [
        (
            epoch_ms("2026-11-22T04:24:00.500Z"),
            f"maintenance #{run.pk}: Write state snapshots (Succeeded)",
            run.get_absolute_url(),
        )
    ]


def test_the_newest_state_snapshots_are_marked_at_the_batch_whose_state_they_hold(viewer_client, dedup):
    # What Spark wrote: the newest N.snapshot of each partition directory (version N: after batch N - 1).
    newest = {}
    for snapshot in (DEDUP / "checkpoint" / "state").glob("*/*/*.snapshot"):
        newest[snapshot.parent] = max(newest.get(snapshot.parent, 0), int(snapshot.name.removesuffix(".snapshot")))
    versions = sorted(set(newest.values()))
    times = _times(_report("file_source_dedup"))

    marks = marks_of(_figures(viewer_client, dedup)["state-memory"])["state snapshot"]

    assert versions == [16]
    assert marks == [(times[15], "newest state snapshot of 2 of 2 store partitions: version 16", 15)]


def test_open_findings_are_marked_at_their_batch_or_when_first_seen(viewer_client, dedup):
    seen = datetime.fromisoformat("2026-11-22T04:24:01+00:00")
    Finding.objects.create(
        checkpoint=dedup, code="empty-file", severity=Finding.Severity.ERROR, path="commits/13", message="empty"
    )
    Finding.objects.create(
        checkpoint=dedup,
        code="leftover",
        severity=Finding.Severity.INFO,
        path="state/0/0/.tmp",
        message="x",
        first_seen_at=seen,
    )
    Finding.objects.create(
        checkpoint=dedup, code="gone", severity=Finding.Severity.ERROR, path="commits/12", message="x", resolved_at=seen
    )
    link = dedup.get_absolute_url() + "#integrity"

    marks = marks_of(_figures(viewer_client, dedup)["watermark-gap"])["integrity finding"]

    assert marks == [
        (epoch_ms("2026-11-22T04:24:01.000Z"), "info finding leftover: state/0/0/.tmp (first seen then)", link),
        (_times(_report("file_source_dedup"))[13], "error finding empty-file: commits/13", link),
    ]


def test_marks_outside_the_batch_range_are_left_out(viewer_client, dedup):
    MaintenanceRun.objects.create(
        checkpoint=dedup, action="purge", status="succeeded", started_at=datetime(2030, 1, 1, tzinfo=UTC)
    )

    marks = marks_of(_figures(viewer_client, dedup, "?from=3&to=6")["rates"])

    assert marks == {
        "log compaction": [
            (_times(_report("file_source_dedup"))[5], "file sink log compaction: _spark_metadata/5.compact", 5)
        ]
    }


# --- long histories ---------------------------------------------------------------------------


def test_a_long_history_is_downsampled_and_keeps_every_spike(viewer_client):
    checkpoint = fill_progress_history(6_000, name="long")

    figures = _figures(viewer_client, checkpoint)

    def line(part, name):
        return next(trace for trace in figures[part]["data"] if trace["name"] == name)

    assert all(len(trace["x"]) <= RUNTIME_MAX_POINTS for figure in figures.values() for trace in figure["data"])
    rate, duration, rows, lag = (
        line("rates", "input rate"),
        line("batch-duration", "batch duration"),
        line("state-rows", "0: dedupe"),
        line("behind-head", "0: KafkaV2[Subscribe[orders]]"),
    )
    assert rate["customdata"][rate["y"].index(10_000.0)] == RATE_SPIKE_BATCH
    assert lag["customdata"][lag["y"].index(70_000)] == LAG_SPIKE_BATCH
    assert duration["customdata"][duration["y"].index(90.0)] == SLOW_BATCH  # drawn in seconds
    assert rows["customdata"][rows["y"].index(10**9)] == ROWS_SPIKE_BATCH
    assert all(
        "lowest and highest of every" in figure["layout"]["annotations"][-1]["text"] for figure in figures.values()
    )
    gap = line("watermark-gap", "watermark gap")
    assert set(gap["y"]) == {5.0}


def test_the_runtime_charts_make_as_many_queries_at_8000_batches_as_at_2000(
    viewer_client, django_assert_max_num_queries
):
    short, long = fill_progress_history(2_000, name="short"), fill_progress_history(8_000, name="long")
    for checkpoint in (short, long):
        MaintenanceRun.objects.create(
            checkpoint=checkpoint, action="purge", status="succeeded", started_at=timezone.now()
        )
    # Each range is built afresh (its own cache entries); the first request also reads the session.
    _figures(viewer_client, short, "?from=0")
    with CaptureQueriesContext(connection) as short_queries:
        _figures(viewer_client, short, "?from=1")
    short_count = len(short_queries)  # now: the next request empties the connection's query log
    _figures(viewer_client, long, "?from=0")
    with django_assert_max_num_queries(short_count):
        _figures(viewer_client, long, "?from=1")


def test_the_runtime_charts_are_built_once_until_new_progress_arrives(viewer_client, dedup):
    first = _figures(viewer_client, dedup)
    with CaptureQueriesContext(connection) as queries:
        assert _figures(viewer_client, dedup) == first
    assert not any("ds_bucket" in q["sql"] for q in queries.captured_queries)

    _store([{**_report("file_source_dedup")[-1], "batchId": 16, "timestamp": "2026-11-22T04:30:00.000Z"}])

    rates = _figures(viewer_client, dedup)["rates"]
    assert rates["data"][0]["customdata"][-1] == 16


@pytest.mark.parametrize(
    ("gap_ms", "unit", "drawn"),
    [
        (9_000, "s", 9.0),
        (599_000, "s", 599.0),
        (600_000, "min", 10.0),
        (36_000_000, "h", 10.0),
        (5 * 86_400_000, "h", 120.0),
        (864_000_000, "d", 10.0),
    ],
)
def test_the_watermark_gap_is_drawn_in_the_unit_its_longest_value_reads_best_in(
    viewer_client, dedup, gap_ms, unit, drawn
):
    for row in BatchProgress.objects.filter(query=dedup.query, watermark__gt=datetime(1971, 1, 1, tzinfo=UTC)):
        row.watermark = row.timestamp - timedelta(milliseconds=gap_ms)
        row.save(update_fields=["watermark"])

    gap = _figures(viewer_client, dedup)["watermark-gap"]

    assert gap["layout"]["yaxis"]["title"]["text"] == unit
    assert set(gap["data"][0]["y"]) == {drawn}


def test_a_copy_behind_the_live_checkpoint_shows_only_its_own_batches_progress(
    viewer_client, admin_client, copy_checkpoint, dedup
):
    from prometheus.scenario import checkpoint_sample, parse_exposition

    # A copy of the dedup query taken after batch 13 (same query id): its batches 14 and 15 never happened.
    base = copy_checkpoint(OUR_FIXTURES / "file_source_dedup", "copy")
    for log in ("offsets", "commits"):
        for batch_id in (14, 15):
            (base / "checkpoint" / log / str(batch_id)).unlink()
    copy = make_checkpoint(name="copy", url=str(base / "checkpoint"))
    sync_checkpoint(copy.pk)
    copy.refresh_from_db()
    assert (copy.query_id, copy.latest_batch_id, dedup.latest_batch_id) == (dedup.query_id, 13, 15)

    def newest_drawn(checkpoint) -> int:
        return max(_figures(viewer_client, checkpoint)["rates"]["data"][0]["customdata"])

    def newest_served(checkpoint) -> int:
        page = viewer_client.get(reverse("api-progress-list", args=[checkpoint.pk])).json()
        return max(row["batch_id"] for row in page["results"])

    samples = parse_exposition(admin_client.get("/metrics").content.decode())
    # The copy takes progress up to its newest batch (batch 14 is the live one's, never the copy's); the live one all.
    assert (newest_drawn(copy), newest_drawn(dedup)) == (13, 15)
    assert (newest_served(copy), newest_served(dedup)) == (13, 15)
    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "copy") == 13
    assert checkpoint_sample(samples, "ckptweb_progress_batch_id", "file_source_dedup") == 15


def test_a_query_with_more_stateful_operators_than_colours_has_every_one_drawn_and_told_apart(viewer_client):
    operators = 10  # the palette has 8 colours
    query = StreamingQuery.objects.create(query_id=uuid.uuid5(uuid.NAMESPACE_DNS, "many-operators"))
    checkpoint = make_checkpoint(name="many-operators", url="/nowhere/many-operators", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=2)
    for batch_id in range(3):
        progress = BatchProgress.objects.create(
            query=query,
            batch_id=batch_id,
            timestamp=datetime.fromtimestamp((START_MS + batch_id * 1000) / 1000, tz=UTC),
            origin="listener",
            batch_duration_ms=500,
        )
        StateOperatorMetrics.objects.bulk_create(
            StateOperatorMetrics(
                progress=progress,
                operator_index=index,
                operator_name=f"op{index}",
                num_rows_total=index,
                memory_used_bytes=1_000,
            )
            for index in range(operators)
        )

    traces = _figures(viewer_client, checkpoint)["state-rows"]["data"]

    assert sorted(trace["y"][0] for trace in traces) == list(range(operators))
    assert len({(trace["line"]["color"], trace["line"]["dash"]) for trace in traces}) == operators


def test_every_runtime_hover_names_its_batch(viewer_client, dedup):
    figures = _figures(viewer_client, dedup)

    for part, figure in figures.items():
        for trace in figure["data"]:
            if trace.get("yaxis") != "y2":
                assert "batch %{customdata}" in trace["hovertemplate"], (part, trace["name"])
    phase = next(trace for trace in figures["phases"]["data"] if trace["name"] == "addBatch")
    assert phase["customdata"] == [p["batchId"] for p in _report("file_source_dedup")]


def test_state_memory_is_drawn_in_kb_and_hovered_as_people_write_sizes(viewer_client, dedup):
    reported = {p["batchId"]: p["stateOperators"][0]["memoryUsedBytes"] for p in _report("file_source_dedup")}
    largest = max(reported, key=reported.get)

    memory = next(t for t in _figures(viewer_client, dedup)["state-memory"]["data"] if t.get("yaxis") != "y2")

    assert reported[largest] == 4_608
    assert dict(zip(memory["customdata"], memory["text"], strict=True))[largest] == "4.5 KB"
    assert memory["hovertemplate"] == "%{text} · batch %{customdata}<extra>0: dedupe</extra>"


def test_counts_are_ticked_in_whole_numbers_from_zero(viewer_client, dedup):
    figures = _figures(viewer_client, dedup)

    for part in ("input-rows", "state-rows", "state-changes"):
        yaxis = figures[part]["layout"]["yaxis"]
        assert (yaxis["tickformat"], yaxis["rangemode"]) == (",d", "tozero"), part


def test_a_thousand_sink_compactions_in_view_are_marked_in_counted_bands_that_add_up(viewer_client):
    checkpoint = fill_progress_history(6_000, name="compacting")
    MetadataLog.objects.create(
        checkpoint=checkpoint, path="/out/_spark_metadata", kind=MetadataLog.Kind.SINK, compact_interval=6
    )

    figures = _figures(viewer_client, checkpoint)

    for figure in figures.values():
        lane = marks_of(figure)["log compaction"]
        counts = [int(hover.split(" ")[0].replace(",", "")) for _, hover, _ in lane]
        assert sum(counts) == 1_000 and len(lane) <= 24  # batches 5, 11, ... 5999: (batch + 1) % 6 == 0
        assert lane[0][1].startswith(f"{counts[0]} log compactions from batch 5 to ")
        assert lane[-1][1].endswith(" to 5999: click to show these batches, or zoom in")
        assert lane[0][2] == f"?from=5&to={6 * counts[0] - 1}#runtime"
        assert len(figure["layout"]["shapes"]) == len(lane)
