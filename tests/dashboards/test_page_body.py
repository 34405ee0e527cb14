"""The query page below its overview, rendered once per page version (dashboards/query_page/page_body.py),
on a synced copy of a real PySpark checkpoint: a repeat visit renders none of its sections, every
writer's change reaches the next visit, and what says how long ago is the request's own."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboards.models import BatchProgress, Checkpoint, DirectoryInventory, Finding, MetadataLog, StateScan
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"
BODY_TEMPLATE = "dashboards/partials/query_page_body.html"


@pytest.fixture
def synced(copy_checkpoint):
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    return Checkpoint.objects.get(pk=checkpoint.pk)


def _visit(client, checkpoint, query: str = "") -> tuple[str, list[str]]:
    response = client.get(reverse("dashboards:checkpoint-detail", args=[checkpoint.pk]) + query)
    assert response.status_code == 200
    return response.content.decode(), [template.name for template in response.templates]


def _words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return _words(html[start : html.index("</section>", start)])


def test_a_repeat_visit_renders_no_section_and_shows_the_same_page(viewer_client, synced):
    first, first_templates = _visit(viewer_client, synced)
    again, again_templates = _visit(viewer_client, synced)

    assert BODY_TEMPLATE in first_templates and BODY_TEMPLATE not in again_templates
    for section in ("timeline", "runtime", "runs", "state", "integrity", "compaction", "files", "batches"):
        assert _section(first, section) == _section(again, section), section
    assert "ckptweb-slot" not in again  # every marker filled, or emptied


def test_each_batch_range_and_table_page_is_a_body_of_its_own(viewer_client, synced):
    whole, _ = _visit(viewer_client, synced)
    ranged, templates = _visit(viewer_client, synced, "?from=2&to=5")
    assert BODY_TEMPLATE in templates
    assert 'name="from" min="0" value="2"' in ranged and 'name="from" min="0" value=""' in whole


def _new_finding(checkpoint: Checkpoint) -> str:
    Finding.objects.create(checkpoint=checkpoint, code="test", severity=Finding.Severity.ERROR, message="a new finding")
    return "a new finding"


def _finding_seen_again_with_a_new_message(checkpoint: Checkpoint) -> str:
    finding = Finding.objects.create(checkpoint=checkpoint, code="test", severity=Finding.Severity.ERROR, message="old")
    checkpoint.findings.filter(pk=finding.pk).update(
        message="the message of its next pass", last_seen_at=timezone.now()
    )
    return "the message of its next pass"


def _log_read_again(checkpoint: Checkpoint) -> str:
    log = checkpoint.metadata_logs.order_by("pk").first()
    MetadataLog.objects.filter(pk=log.pk).update(live_entries=987_654, updated_at=timezone.now())
    return "987,654"


def _inventory_taken_again(checkpoint: Checkpoint) -> str:
    row = DirectoryInventory.objects.latest_for(checkpoint).first()
    row.pk, row.taken_at, row.files = None, row.taken_at + timedelta(minutes=5), 424_242
    row.save()
    return "424,242"


def _scan_under_way(checkpoint: Checkpoint) -> str:
    StateScan.objects.create(checkpoint=checkpoint, version=3, partitions=7, chunks=5, chunks_done=2)
    return "2 of 5 chunks done"


@pytest.mark.parametrize(
    "write",
    [_new_finding, _finding_seen_again_with_a_new_message, _log_read_again, _inventory_taken_again, _scan_under_way],
)
def test_what_a_pass_writes_after_a_visit_reaches_the_next_one(viewer_client, synced, write):
    before, _ = _visit(viewer_client, synced)
    shown = write(synced)
    assert shown not in _words(before)

    after, templates = _visit(viewer_client, synced)

    assert shown in _words(after) and BODY_TEMPLATE in templates


def test_a_finding_the_next_pass_resolves_leaves_the_page(viewer_client, synced):
    finding = Finding.objects.create(
        checkpoint=synced, code="test", severity=Finding.Severity.ERROR, message="gone soon"
    )
    assert "gone soon" in _visit(viewer_client, synced)[0]
    Finding.objects.filter(pk=finding.pk).update(resolved_at=timezone.now())
    assert "gone soon" not in _visit(viewer_client, synced)[0]


def test_progress_that_arrives_after_a_visit_reaches_the_next_one(viewer_client, synced):
    report = json.loads((DEDUP / "spark-report.json").read_text())["progress"]
    *earlier, newest = sorted(report, key=lambda fields: fields["batchId"])
    for fields in earlier:
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")
    before = _section(_visit(viewer_client, synced)[0], "runtime")
    assert f"the newest is batch {earlier[-1]['batchId']}," in before

    BatchProgress.objects.store(progress_from_dict(newest, source="spark-report.json"), origin="listener")
    after = _section(_visit(viewer_client, synced)[0], "runtime")

    assert f"the newest is batch {newest['batchId']}," in after


def test_how_long_ago_is_the_request_s_own_while_the_sections_are_not_rendered_again(
    viewer_client, synced, monkeypatch
):
    first, _ = _visit(viewer_client, synced)
    later = timezone.now() + timedelta(hours=5)
    monkeypatch.setattr(timezone, "now", lambda: later)

    again, templates = _visit(viewer_client, synced)

    assert BODY_TEMPLATE not in templates
    for line in ("timeline-as-of", "findings-as-of", "inventory-as-of", "metadata-logs-as-of", "state-as-of"):
        assert "5 h" not in _as_of_text(first, line) and "5 h" in _as_of_text(again, line), line
    assert "5 h" in _words(again[again.index('id="full-walk"') :])


def _as_of_text(html: str, line_id: str) -> str:
    start = html.index(f'id="{line_id}"')
    return _words(html[start : html.index("</p>", start)])
