"""The compaction, inventory and findings panels, on a synced copy of a real PySpark checkpoint."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboards.models import Checkpoint, MetadataLog
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"


@pytest.fixture
def synced_dedup(copy_checkpoint) -> Checkpoint:
    """The file-source fixture with its file sink registered, after one sync."""
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    return checkpoint


def test_query_page_shows_each_compactible_log(viewer_client, synced_dedup):
    page = viewer_client.get(synced_dedup.get_absolute_url()).content.decode()
    table = page[page.index('id="metadata-logs"') : page.index("</table>", page.index('id="metadata-logs"'))]

    assert "file source" in table and "sources/0" in table
    assert "file sink" in table and "/output/_spark_metadata" in table
    # Sink: interval 3, latest batch 15, next compaction 17, 24 live entries (see test_metadatalog.py).
    assert "<td>3</td>" in table and "<td>15</td>" in table and "<td>17</td>" in table and "<td>24</td>" in table


def test_compact_size_chart_plots_each_compact_file(viewer_client, synced_dedup):
    sink = MetadataLog.objects.get(checkpoint=synced_dedup, kind="sink")
    url = reverse("dashboards:compact-size-chart", args=[synced_dedup.pk, sink.pk])

    figure = json.loads(viewer_client.get(url).content)

    sizes = figure["data"][0]
    log_dir = Path(sink.path.removeprefix("file://"))
    on_disk = [(log_dir / f"{b}.compact").stat().st_size for b in (11, 14)]
    assert 1_024 <= max(on_disk) < 1_024**2  # so the axis is in KB
    assert (sizes["x"], figure["layout"]["yaxis"]["title"]["text"]) == ([11, 14], "KB")
    assert [round(kb * 1_024) for kb in sizes["y"]] == on_disk
    assert [trace["name"] for trace in figure["data"]] == ["compact file size", "trend"]


def test_a_log_of_another_checkpoint_is_not_found(viewer_client, synced_dedup):
    other = make_checkpoint(name="other", url="/nowhere")
    sink = MetadataLog.objects.get(checkpoint=synced_dedup, kind="sink")
    url = reverse("dashboards:compact-size-chart", args=[other.pk, sink.pk])
    assert viewer_client.get(url).status_code == 404


def test_timeline_marks_the_sink_compaction_batches(viewer_client, synced_dedup):
    url = reverse("dashboards:batch-timeline-chart", args=[synced_dedup.pk])
    figure = json.loads(viewer_client.get(url).content)

    [compactions] = [trace for trace in figure["data"] if trace["name"] == "sink log compaction"]
    # Batches 12..15 are in the offset log; with interval 3, batch 14 is the compaction (14.compact on disk).
    assert compactions["y"] == [14]


def test_list_and_query_pages_show_an_integrity_error_with_its_file(viewer_client, copy_checkpoint):
    base = copy_checkpoint(DEDUP)
    latest = max(int(p.name) for p in (base / "checkpoint" / "offsets").iterdir() if p.name.isdigit())
    (base / "checkpoint" / "offsets" / str(latest)).write_bytes(b"")  # what a crash mid-write leaves
    checkpoint = make_checkpoint(name="damaged", url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)

    listing = viewer_client.get(reverse("dashboards:checkpoint-list")).content.decode()
    row = listing[listing.index("damaged") :]
    assert '<td class="findings"><span class="badge error" title="errors: a restart would fail">1</span>' in row

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()
    findings = page[page.index('id="findings"') : page.index("</table>", page.index('id="findings"'))]
    assert f"offsets/{latest}" in findings and "log-file-empty" in findings


def test_a_healthy_checkpoint_says_so(viewer_client, synced_dedup):
    page = viewer_client.get(synced_dedup.get_absolute_url()).content.decode()
    assert 'id="findings-none"' in page and "No findings at the last check" in page
    listing = viewer_client.get(reverse("dashboards:checkpoint-list")).content.decode()
    assert '<td class="findings">none</td>' in listing


def test_inventory_rows_count_the_files_on_disk(viewer_client, synced_dedup):
    from dashboards.models import DirectoryInventory

    rows = {row.path: row for row in DirectoryInventory.objects.latest_for(synced_dedup)}
    checkpoint_dir = synced_dedup.url.removeprefix("file://")
    for name in ("offsets", "commits"):
        on_disk = list((Path(checkpoint_dir) / name).iterdir())  # Hadoop's .N.crc files included
        assert (rows[name].files, rows[name].size_bytes) == (len(on_disk), sum(p.stat().st_size for p in on_disk))
    page = viewer_client.get(synced_dedup.get_absolute_url()).content.decode()
    assert 'id="inventory"' in page and 'id="inventory-growth"' in page


def test_inventory_growth_chart_has_a_point_per_pass(viewer_client, synced_dedup, settings):
    from datetime import timedelta

    later = synced_dedup.last_inspected_at + timedelta(seconds=settings.FULL_WALK_INTERVAL_SECONDS)
    sync_checkpoint(synced_dedup.pk, now=later)
    figure = json.loads(viewer_client.get(reverse("dashboards:inventory-growth-chart", args=[synced_dedup.pk])).content)
    offsets = next(trace for trace in figure["data"] if trace["name"] == "offsets")
    assert len(offsets["x"]) == 2


@pytest.fixture
def synced_agg(copy_checkpoint) -> Checkpoint:
    base = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink")
    checkpoint = make_checkpoint(name="agg", url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    return checkpoint


def test_query_page_shows_the_state_stores_and_their_heatmap(viewer_client, synced_agg):
    page = viewer_client.get(synced_agg.get_absolute_url()).content.decode()
    assert 'id="state-stores"' in page and 'id="state-heatmap"' in page

    figure = json.loads(viewer_client.get(reverse("dashboards:state-heatmap-chart", args=[synced_agg.pk])).content)
    heatmaps = {trace["y"][0]: trace for trace in figure["data"]}
    assert list(heatmaps) == ["versions since snapshot", "delta chain", "bytes on disk", "rows"]
    assert all(trace["x"] == ["0/default/0", "0/default/1"] for trace in heatmaps.values())
    report = json.loads((OUR_FIXTURES / "windowed_agg_file_sink" / "spark-report.json").read_text())
    rows = [int(text.replace(",", "")) for text in heatmaps["rows"]["text"][0]]
    assert sum(rows) == report["progress"][-1]["stateOperators"][0]["numRowsTotal"]
    # Each row has its scale, shown: sizes in blues from 0; restart costs from 0 to red at 20 and up.
    assert all(trace["colorbar"]["title"]["text"] for trace in heatmaps.values())
    assert heatmaps["rows"]["colorscale"][0] != heatmaps["delta chain"]["colorscale"][0]
    assert (heatmaps["delta chain"]["zmin"], heatmaps["delta chain"]["zmax"]) == (0, 20)


def test_decoding_sample_rows_goes_through_the_worker_and_shows_spark_s_keys(
    viewer_client, synced_agg, eager_celery, django_capture_on_commit_callbacks
):
    from dashboards.models import StatePartition

    partition = StatePartition.objects.get(checkpoint=synced_agg, partition=0)
    url = reverse("dashboards:state-partition-sample", args=[synced_agg.pk, partition.pk])
    # The task is sent on commit, which the test transaction only makes inside this block.
    with django_capture_on_commit_callbacks(execute=True):
        response = viewer_client.post(url)
    assert response.status_code == 302

    sample = partition.samples.get()
    assert sample.error == "" and sample.finished_at is not None
    assert sample.key_schema.startswith("struct<window:struct<start:timestamp,end:timestamp>")
    assert 0 < len(sample.rows) == partition.rows
    page = viewer_client.get(reverse("dashboards:state-partition", args=[synced_agg.pk, partition.pk])).content.decode()
    assert 'id="sample-rows"' in page and 'id="partition-files"' in page
    assert "Decoding" not in page  # nothing on the page still says the rows are on their way


def _schema_field_names(schema_file: Path) -> list[list[str]]:
    """The top-level field names of each schema (key, then value) Spark wrote into a state store's
    _metadata/schema: JSON documents after a binary header, read with json alone."""
    data, decoder, schemas = schema_file.read_bytes().decode("utf-8", "replace"), json.JSONDecoder(), []
    start = data.find('{"type":"struct"')
    while start != -1:
        schema, end = decoder.raw_decode(data, start)
        schemas.append([field["name"] for field in schema["fields"]])
        start = data.find('{"type":"struct"', end)
    return schemas


def _decode_sample(client, checkpoint, partition, capture):
    with capture(execute=True):
        client.post(reverse("dashboards:state-partition-sample", args=[checkpoint.pk, partition.pk]))
    page = client.get(reverse("dashboards:state-partition", args=[checkpoint.pk, partition.pk])).content.decode()
    return partition.samples.get(), page


def _header_names(page: str) -> list[str]:
    table = page[page.index('id="sample-rows"') : page.index("</thead>", page.index('id="sample-rows"'))]
    return re.findall(r'<th class="mono">([^<]*)</th>', table)


def test_sample_rows_are_a_table_with_a_column_per_field_of_the_schema_spark_wrote(
    viewer_client, synced_agg, eager_celery, django_capture_on_commit_callbacks
):
    from dashboards.models import StatePartition

    partition = StatePartition.objects.get(checkpoint=synced_agg, partition=0)
    sample, page = _decode_sample(viewer_client, synced_agg, partition, django_capture_on_commit_callbacks)

    schema_file = OUR_FIXTURES / "windowed_agg_file_sink/checkpoint/state/0/0/_metadata/schema"
    assert _schema_field_names(schema_file) == [["window", "key"], ["count"]]
    # The window struct's start and end (timestamps) become a column each, in the schema's order.
    assert _header_names(page) == ["window.start", "window.end", "key", "count"]
    assert "{&#x27;" not in page and "{'" not in page  # no Python dict shown
    first = sample.rows[0]
    cells = re.findall(r'<td class="mono">([^<]*)</td>', page[page.index("<tbody>", page.index('id="sample-rows"')) :])
    assert cells[:4] == [
        first["key"]["window"]["start"],
        first["key"]["window"]["end"],
        first["key"]["key"],
        str(first["value"]["count"]),
    ]


def test_a_join_sample_names_its_columns_as_spark_wrote_them_and_says_what_field0_is(
    viewer_client, copy_checkpoint, eager_celery, django_capture_on_commit_callbacks
):
    from dashboards.models import StatePartition

    fixture = OUR_FIXTURES / "stream_stream_join"
    checkpoint = make_checkpoint(name="join", url=str(copy_checkpoint(fixture) / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    partition = StatePartition.objects.get(checkpoint=checkpoint, partition=0, store="left-keyWithIndexToValue")
    sample, page = _decode_sample(viewer_client, checkpoint, partition, django_capture_on_commit_callbacks)

    schema_file = fixture / "checkpoint/state/0/0/left-keyWithIndexToValue/_metadata/schema"
    key_names, value_names = _schema_field_names(schema_file)
    assert (key_names, value_names) == (["field0", "index"], ["left_id", "left_key", "left_time", "matched"])
    assert sample.error == "" and sample.rows
    assert _header_names(page) == key_names + value_names
    assert 'id="sample-key-names"' in page and "<code>field0</code> is the first key column" in page


def test_a_rocksdb_format_2_partition_counts_and_decodes_the_rows_spark_reported(
    viewer_client, copy_checkpoint, eager_celery, django_capture_on_commit_callbacks
):
    from dashboards.models import StatePartition

    fixture = OUR_FIXTURES / "rocksdb_checkpoint_v2_dedup"
    checkpoint = make_checkpoint(name="rocks", url=str(copy_checkpoint(fixture) / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    partitions = StatePartition.objects.filter(checkpoint=checkpoint).order_by("partition")
    report = json.loads((fixture / "spark-report.json").read_text())
    # Version 12 loads as a zip plus two changelogs: counted from the zip's SST files.
    assert [p.rows_version for p in partitions] == [12, 12]
    assert sum(p.rows for p in partitions) == report["progress"][-1]["stateOperators"][0]["numRowsTotal"]

    partition = partitions[0]
    with django_capture_on_commit_callbacks(execute=True):
        viewer_client.post(reverse("dashboards:state-partition-sample", args=[checkpoint.pk, partition.pk]))

    sample = partition.samples.get()
    assert sample.error == "" and len(sample.rows) == partition.rows
    assert sample.key_schema == "struct<id:string,event_time:timestamp>"
    assert all(row["key"]["id"].startswith("e") for row in sample.rows)


@pytest.mark.parametrize("fixture", ["windowed_agg_file_sink", "rocksdb_checkpoint_v2_dedup"])
def test_a_sample_of_a_version_spark_cleaned_up_decodes_the_newest_committed_one_and_says_so(
    viewer_client, copy_checkpoint, eager_celery, django_capture_on_commit_callbacks, fixture
):
    from dashboards.models import StatePartition

    # Spark's maintenance deleted versions 1 to 5 of both (HDFS: 6.delta is the oldest file; RocksDB: 8_<id>.zip).
    checkpoint = make_checkpoint(name="cleaned", url=str(copy_checkpoint(OUR_FIXTURES / fixture) / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    partition = StatePartition.objects.filter(checkpoint=checkpoint).order_by("partition").first()
    rows_at_12 = partition.rows
    StatePartition.objects.filter(pk=partition.pk).update(rows_version=5)  # what a sync long ago left

    with django_capture_on_commit_callbacks(execute=True):
        viewer_client.post(reverse("dashboards:state-partition-sample", args=[checkpoint.pk, partition.pk]))

    sample = partition.samples.get()
    assert (sample.error, sample.version, len(sample.rows)) == ("", 12, rows_at_12)
    assert sample.note.startswith("Version 5, the newest the last sync knew of, was cleaned up by Spark's maintenance")
    page = viewer_client.get(reverse("dashboards:state-partition", args=[checkpoint.pk, partition.pk])).content.decode()
    assert 'id="sample-note"' in page and "Version 12" in page


def test_a_cleaned_up_version_with_no_newer_committed_one_is_an_error_that_says_what_to_do(
    viewer_client, copy_checkpoint, eager_celery, django_capture_on_commit_callbacks
):
    from dashboards.models import StatePartition

    checkpoint = make_checkpoint(
        name="cleaned", url=str(copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink") / "checkpoint")
    )
    sync_checkpoint(checkpoint.pk)
    partition = StatePartition.objects.filter(checkpoint=checkpoint).order_by("partition").first()
    StatePartition.objects.filter(pk=partition.pk).update(rows_version=5)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_committed_batch_id=4)  # syncs knew of nothing later

    with django_capture_on_commit_callbacks(execute=True):
        viewer_client.post(reverse("dashboards:state-partition-sample", args=[checkpoint.pk, partition.pk]))

    sample = partition.samples.get()
    assert sample.rows == [] and sample.version == 5
    assert "version 5 was cleaned up by Spark's maintenance" in sample.error and "sync the checkpoint" in sample.error


@pytest.mark.parametrize(("minutes_ago", "stale"), [(2, False), (5, True)])
def test_pages_flag_figures_whose_last_sync_is_older_than_three_intervals(viewer_client, minutes_ago, stale):
    from datetime import timedelta

    from django.utils import timezone

    checkpoint = make_checkpoint(sync_interval_seconds=60)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_synced_at=timezone.now() - timedelta(minutes=minutes_ago))

    detail = viewer_client.get(reverse("dashboards:checkpoint-detail", args=[checkpoint.pk])).content.decode()
    listing = viewer_client.get(reverse("dashboards:checkpoint-list")).content.decode()

    # 3 intervals of 60 s plus a minute of grace: 4 minutes.
    assert ('id="sync-overdue"' in detail) is stale
    assert ('data-status="failing-to-sync"' in listing and "no sync for" in listing) is stale


def _words(page: str, element_id: str) -> str:
    """The words of the paragraph with ``element_id``, without tags."""
    start = page.index(f'id="{element_id}"')
    text = re.sub(r"<[^>]+>", "", page[page.index(">", start) + 1 : page.index("</p>", start)])
    return " ".join(text.split())


def _state_as_of_line(page: str) -> str:
    """The words of the state panel's "as of" line and, when it is behind, its note."""
    note = _words(page, "state-behind-note") if 'id="state-behind-note"' in page else ""
    return f"{_words(page, 'state-as-of')} {note}".strip()


def test_a_timeline_whose_next_sync_is_late_says_so_loudly(viewer_client, synced_dedup):
    # Synced 10 minutes ago every 30 s: the next sync was due 9 min 30 s ago, and no worker ran it.
    Checkpoint.objects.filter(pk=synced_dedup.pk).update(last_synced_at=timezone.now() - timedelta(minutes=10))

    page = viewer_client.get(synced_dedup.get_absolute_url()).content.decode()

    line = _words(page, "timeline-as-of")
    assert re.fullmatch(
        r"As of batch 15, read 10 min( \d+ s)? ago\. The next sync is late: it was due 9 min 3\d s ago\.", line
    )
    assert '<p class="as-of-line behind" id="timeline-as-of"' in page


def test_panels_of_a_checkpoint_ckptweb_no_longer_syncs_say_no_read_is_coming(viewer_client, synced_dedup):
    Checkpoint.objects.filter(pk=synced_dedup.pk).update(is_enabled=False, latest_batch_id=20)

    page = viewer_client.get(synced_dedup.get_absolute_url()).content.decode()

    passes = {"findings-as-of": "full check", "metadata-logs-as-of": "log check", "inventory-as-of": "full check"}
    for element_id, pass_name in passes.items():
        assert re.fullmatch(
            r"As of batch 15, read \d+ s ago — 5 batches behind the latest \(20\)\. "
            rf"No {pass_name} will read it: ckptweb does not sync this checkpoint\.",
            _words(page, element_id),
        ), element_id


def test_the_state_panel_says_when_its_rows_were_read_not_when_the_full_pass_ran(viewer_client, synced_dedup):
    # State followed by a sync 40 s ago, three hours after the last full pass: the panel's time is the rows'.
    now = timezone.now()
    Checkpoint.objects.filter(pk=synced_dedup.pk).update(last_inspected_at=now - timedelta(hours=3))
    synced_dedup.state_partitions.update(updated_at=now - timedelta(seconds=40))
    version = max(synced_dedup.state_partitions.values_list("latest_version", flat=True))

    line = _state_as_of_line(viewer_client.get(synced_dedup.get_absolute_url()).content.decode())

    assert line.startswith(f"As of batch {version - 1} (state version {version}), read 4")
    assert "s ago." in line and " h " not in line and "full pass" not in line


def test_state_figures_behind_the_query_say_how_far_and_what_moves_them(viewer_client, synced_dedup):
    version = max(synced_dedup.state_partitions.values_list("latest_version", flat=True))
    Checkpoint.objects.filter(pk=synced_dedup.pk).update(latest_batch_id=version + 10)

    line = _state_as_of_line(viewer_client.get(synced_dedup.get_absolute_url()).content.decode())

    assert f"As of batch {version - 1} (state version {version}), read " in line
    assert f"— 11 batches behind the latest ({version + 10}). The next sync is due " in line
    assert "CKPTWEB_STATE_FOLLOW_MIN_SECONDS" in line and "CKPTWEB_INSPECT_INTERVAL_SECONDS" in line


def test_the_heatmap_of_200_partitions_keeps_one_scale_per_row_beside_it(
    viewer_client, synced_agg, django_assert_max_num_queries
):
    from dashboards.models import StatePartition

    synced_agg.state_partitions.all().delete()
    StatePartition.objects.bulk_create(
        StatePartition(
            checkpoint=synced_agg,
            operator=0,
            partition=p,
            store="default",
            provider="hdfs",
            path=f"state/0/{p}",
            latest_version=120,
            snapshot_version=120 - p % 37,
            delta_chain=p % 37,
            rows=1000 + 7 * p,
            bytes_on_disk=50_000 + 300 * p,
        )
        for p in range(200)
    )
    # The session, the user, the checkpoint, its partitions: none read again per partition.
    with django_assert_max_num_queries(8):
        answer = viewer_client.get(reverse("dashboards:state-heatmap-chart", args=[synced_agg.pk]))
    figure = json.loads(answer.content)

    heatmaps = {trace["y"][0]: trace for trace in figure["data"]}
    assert all(len(trace["x"]) == 200 and "texttemplate" not in trace for trace in heatmaps.values())
    assert heatmaps["delta chain"]["zmax"] == 36 and heatmaps["rows"]["zmax"] == 1000 + 7 * 199
    # Colour bars top to bottom in the order of the rows, none on another.
    centres = [trace["colorbar"]["y"] for trace in heatmaps.values()]
    assert centres == sorted(centres, reverse=True) and len(set(centres)) == 4


def test_the_batch_table_shows_each_batch_s_duration_rows_and_rates_from_spark_s_progress(viewer_client, synced_dedup):
    from dashboards.models import BatchProgress
    from workers.checkpoint.progress import progress_from_dict

    report = json.loads((DEDUP / "spark-report.json").read_text())["progress"]
    reported = {fields["batchId"]: fields for fields in report if fields["batchId"] != 13}  # batch 13's never arrived
    for fields in reported.values():
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")
    synced_dedup.last_synced_at = timezone.now()  # the table is rendered once per sync
    synced_dedup.save(update_fields=["last_synced_at"])

    html = viewer_client.get(reverse("dashboards:batch-table-panel", args=[synced_dedup.pk])).content.decode()
    rows = {
        int(batch): [
            " ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for batch, row in re.findall(r'<tr class="[^"]*">\s*<td><a [^>]+>(\d+)</a></td>(.*?)</tr>', html, re.S)
    }
    for batch_id, cells in rows.items():
        fields = reported.get(batch_id)
        if fields is None:
            assert cells[1] == "no progress received", (batch_id, cells)
            continue
        assert cells[2] == f"{fields['numInputRows']}", (batch_id, cells)
        assert float(cells[3].replace(",", "")) == round(fields["inputRowsPerSecond"], 1), (batch_id, cells)
        assert float(cells[4].replace(",", "")) == round(fields["processedRowsPerSecond"], 1), (batch_id, cells)
    assert any(batch_id not in reported for batch_id in rows) and any(batch_id in reported for batch_id in rows)


def test_the_state_panel_of_a_killed_batch_shows_the_committed_version_and_names_the_uncommitted_one(
    viewer_client, killed_synced
):
    # Batch 6 wrote state version 7 in both partitions and was killed before its commit.
    page = viewer_client.get(killed_synced.get_absolute_url()).content.decode()
    stores = page[page.index('id="state-stores"') : page.index("</table>", page.index('id="state-stores"'))]
    cells = re.findall(r"<td>([^<]*)</td>", stores)
    assert cells[:5] == ["0", "default", "hdfs", "2", "6"]
    note = page[page.index('id="state-uncommitted-0-default"') :].split("</p>")[0]
    assert " ".join(note.split()).endswith(
        "Operator 0 store default also holds version 7, written by a batch that has no commit: "
        "a restart runs that batch again and rewrites it. The figures above leave it out."
    )


def test_the_batch_table_shows_how_far_the_sources_were_behind_their_head_where_they_report_it(
    viewer_client, synced_dedup
):
    from dashboards.models import BatchProgress
    from kafka_progress import BEHIND_PER_BATCH, with_kafka_source
    from workers.checkpoint.progress import progress_from_dict

    report = json.loads((DEDUP / "spark-report.json").read_text())["progress"]
    # Batches 0-13 as Spark's file source reported them (no latestOffset), 14 and 15 from a Kafka source.
    stored = report[:14] + with_kafka_source(report[14:])
    for fields in stored:
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")
    synced_dedup.last_synced_at = timezone.now()  # the table is rendered once per sync
    synced_dedup.save(update_fields=["last_synced_at"])

    html = viewer_client.get(reverse("dashboards:batch-table-panel", args=[synced_dedup.pk])).content.decode()
    behind = {
        int(batch): " ".join(re.sub(r"<[^>]+>", " ", re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[5]).split())
        for batch, row in re.findall(r'<tr class="[^"]*">\s*<td><a [^>]+>(\d+)</a></td>(.*?)</tr>', html, re.S)
    }
    assert "Behind head (offsets)" in html
    assert behind == {k: f"{BEHIND_PER_BATCH * k:,}" if k >= 14 else "—" for k in behind}
    assert set(behind) >= {13, 14}
