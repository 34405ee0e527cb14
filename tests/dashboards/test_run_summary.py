"""The Runs section and a batch against its run, from the progress Spark reported for a real query."""

from __future__ import annotations

import json
import re
import statistics
import uuid

import pytest
from django.urls import reverse

from dashboards.models import BatchProgress, Checkpoint
from dashboards.query_page.run_summary import Spread, nearest_rank
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"
RESTART_AT = 8


def _report() -> list[dict]:
    return json.loads((DEDUP / "spark-report.json").read_text())["progress"]


@pytest.fixture
def restarted(copy_checkpoint):
    """Spark's dedup query with its progress, as if restarted at batch 8 (a second run id from there)."""
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    second_run = str(uuid.uuid5(uuid.NAMESPACE_URL, "restart"))
    report = _report()
    for fields in report:
        if fields["batchId"] >= RESTART_AT:
            fields["runId"] = second_run
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")
    return checkpoint, report


def test_nearest_rank_takes_the_value_at_or_above_the_fraction():
    twenty = [float(value) for value in range(1, 21)]
    assert (nearest_rank(twenty, 0.5), nearest_rank(twenty, 0.95), nearest_rank([7.0], 0.95)) == (10.0, 19.0, 7.0)
    assert Spread.of([None, 3, 1, 2]) == Spread(1, 2, 3, 3) and Spread.of([None]) is None


def test_the_runs_section_shows_each_run_with_its_batches_and_spreads(viewer_client, restarted):
    checkpoint, report = restarted
    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()
    table = page[page.index('id="runs-table"') : page.index("</table>", page.index('id="runs-table"'))]
    rows = re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', table, re.S)

    runs = {fields["runId"] for fields in report}
    assert [run for run, _ in rows] == [fields["runId"] for fields in (report[-1], report[0])]  # newest first
    assert len(runs) == 2
    for run_id, cells in rows:
        mine = [fields for fields in report if fields["runId"] == run_id]
        durations = sorted(fields["batchDuration"] for fields in mine)
        text = " ".join(re.sub(r"<[^>]+>", " ", cells).split())
        assert f"{mine[0]['batchId']} – {mine[-1]['batchId']} ({len(mine)})" in text
        # 8 batches: the median by nearest rank is the 4th, the 95th percentile the 8th.
        assert f"{durations[0]} ms / {durations[3]} ms / {durations[7]} ms / {durations[7]} ms" in text, text
        process = sorted(fields["processedRowsPerSecond"] for fields in mine)
        assert f"{process[0]:,.1f} / {process[3]:,.1f} / {process[7]:,.1f} / {process[7]:,.1f}" in text, text


def test_a_query_without_progress_says_where_runs_come_from(viewer_client, copy_checkpoint):
    checkpoint = make_checkpoint(name="dedup", url=str(copy_checkpoint(DEDUP) / "checkpoint"))
    sync_checkpoint(checkpoint.pk)

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()

    assert 'id="runs-empty"' in page and 'href="#runs"' in page


def test_the_batch_page_compares_the_batch_with_its_run(viewer_client, restarted):
    checkpoint, report = restarted
    batch = next(fields for fields in report if fields["batchId"] == 12)
    run = [fields for fields in report if fields["runId"] == batch["runId"]]
    median = statistics.median_low(fields["batchDuration"] for fields in run)

    page = viewer_client.get(reverse("dashboards:batch-detail", args=[checkpoint.pk, 12])).content.decode()
    line = " ".join(
        re.sub(
            r"<[^>]+>",
            " ",
            page[page.index('id="batch-against-run"') : page.index("</p>", page.index('id="batch-against-run"'))],
        ).split()
    )

    assert f"({len(run)} batches of run" in line
    assert f"{batch['batchDuration'] / median:.1f}× the run's median batch duration of {median} ms." in line
    phase = re.search(r"furthest above its median: (\w+) ?, (\d+) ms against (\d+) ms", line)
    assert phase, line
    name, value, phase_median = phase.group(1), int(phase.group(2)), int(phase.group(3))
    assert value == batch["durationMs"][name]
    assert phase_median == statistics.median_low(fields["durationMs"][name] for fields in run) < value


def test_a_run_longer_than_the_window_is_summed_up_over_its_newest_batches(viewer_client, restarted, monkeypatch):
    from dashboards.query_page import run_summary

    checkpoint, report = restarted
    monkeypatch.setattr(run_summary, "WINDOW_BATCHES", 5)
    newest = [fields for fields in report if fields["batchId"] >= RESTART_AT]
    window = sorted(fields["batchDuration"] for fields in newest[-5:])

    section = run_summary.runs_section(Checkpoint.objects.with_progress_owner().get(pk=checkpoint.pk))

    run = section.runs[0]
    assert (run.first_batch_id, run.last_batch_id, run.window_first_batch_id, run.batches) == (8, 15, 11, None)
    assert (run.duration_ms.low, run.duration_ms.median, run.duration_ms.high) == (window[0], window[2], window[4])
    assert run.started_at.timestamp() == pytest.approx(_epoch(newest[0]["timestamp"]))


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_batch_range_chosen_for_the_charts_gets_its_own_row_across_runs(viewer_client, restarted):
    checkpoint, report = restarted
    chosen = [fields for fields in report if 5 <= fields["batchId"] <= 10]  # three batches of each run
    durations = sorted(fields["batchDuration"] for fields in chosen)

    page = viewer_client.get(checkpoint.get_absolute_url() + "?from=5&to=10").content.decode()
    start = page.index('id="runs-chosen-range"')
    text = " ".join(re.sub(r"<[^>]+>", " ", page[start : page.index("</tr>", start)]).split())

    assert "(5 to 10), every run" in text and "5 – 10 (6)" in text, text
    # 6 batches: the median by nearest rank is the 3rd, the 95th percentile the 6th.
    assert f"{durations[0]} ms / {durations[2]} ms / {durations[5]} ms / {durations[5]} ms" in text, text
    assert 'id="runs-chosen-range"' not in viewer_client.get(checkpoint.get_absolute_url()).content.decode()


def test_progress_that_arrives_after_a_visit_reaches_the_runs_and_runtime_sections(viewer_client, restarted):
    # The sections are read once per version of the progress (its batch id span): the first visit
    # fills the cache, a new batch's progress must move the version, not wait out the cache.
    checkpoint, report = restarted
    viewer_client.get(checkpoint.get_absolute_url())
    newest = dict(report[-1], batchId=report[-1]["batchId"] + 1, batchDuration=987_654)
    BatchProgress.objects.store(progress_from_dict(newest, source="test"), origin="listener")

    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()

    row = re.search(rf'<tr data-run="{newest["runId"]}">(.*?)</tr>', page, re.S).group(1)
    text = " ".join(re.sub(r"<[^>]+>", " ", row).split())
    # 987,654 ms: the run's longest batch now.
    assert f"{RESTART_AT} – {newest['batchId']} (9)" in text and "/ 16 min 27 s " in text, text
    runtime = page[page.index('id="runtime-as-of"') : page.index("</p>", page.index('id="runtime-as-of"'))]
    assert f"the newest is batch {newest['batchId']}," in runtime
