"""The state panel's tables, rendered once per version of the partitions' rows, on a synced copy of
a real PySpark checkpoint: every write the workers make reaches the next visit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboards.models import StatePartition
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.state_follow import FOLLOWED_FIELDS
from workers.state_partitions import delete_state_partitions_except
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"


@pytest.fixture
def synced(copy_checkpoint):
    base = copy_checkpoint(DEDUP)
    checkpoint = make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)
    assert checkpoint.state_partitions.count() > 1
    return checkpoint


def _partition_rows(page: str) -> dict[str, str]:
    """Directory -> the words of its row in the panel's partition table."""
    table = page[page.index('id="state-partitions"') : page.index("</table>", page.index('id="state-partitions"'))]
    rows = re.findall(r"<tr>\s*<td class=\"mono\"><a [^>]*>([^<]+)</a></td>(.*?)</tr>", table, re.S)
    return {path: " ".join(re.sub(r"<[^>]+>", " ", cells).split()) for path, cells in rows}


def _store_rows(page: str) -> str:
    table = page[page.index('id="state-stores"') : page.index("</table>", page.index('id="state-stores"'))]
    return " ".join(re.sub(r"<[^>]+>", " ", table).split())


def _follow(partition: StatePartition, *, rows: int, at) -> None:
    """Write the partition's rows as a sync following state does (workers.state_follow)."""
    partition.rows, partition.updated_at = rows, at
    StatePartition.objects.bulk_update([partition], FOLLOWED_FIELDS)


def test_a_second_visit_reads_no_partition_rows(viewer_client, synced):
    viewer_client.get(synced.get_absolute_url())

    with CaptureQueriesContext(connection) as queries:
        page = viewer_client.get(synced.get_absolute_url()).content.decode()

    read_rows = [q["sql"] for q in queries.captured_queries if '"dashboards_statepartition"."path"' in q["sql"]]
    assert read_rows == [] and len(_partition_rows(page)) == synced.state_partitions.count()


def test_rows_a_sync_follows_after_a_visit_reach_the_next_one(viewer_client, synced):
    url = synced.get_absolute_url()
    viewer_client.get(url)
    partition = synced.state_partitions.order_by("pk").first()

    _follow(partition, rows=424_242, at=timezone.now())
    page = viewer_client.get(url).content.decode()

    assert f"424,242 (v{partition.rows_version})" in _partition_rows(page)[partition.path]
    total = sum(synced.state_partitions.filter(operator=partition.operator).values_list("rows", flat=True))
    assert f"{total:,}" in _store_rows(page)


def test_a_write_stamped_before_the_newest_row_still_reaches_the_page(viewer_client, synced):
    # A worker whose clock lags the one that wrote last: the newest write time does not move.
    url = synced.get_absolute_url()
    now = timezone.now()
    synced.state_partitions.update(updated_at=now)
    viewer_client.get(url)
    partition = synced.state_partitions.order_by("pk").first()

    _follow(partition, rows=515_151, at=now - timedelta(seconds=5))
    page = viewer_client.get(url).content.decode()

    assert f"515,151 (v{partition.rows_version})" in _partition_rows(page)[partition.path]


def test_a_partition_the_full_walk_no_longer_finds_leaves_the_page(viewer_client, synced):
    url = synced.get_absolute_url()
    before = _partition_rows(viewer_client.get(url).content.decode())
    gone = synced.state_partitions.order_by("-pk").first()

    kept = synced.state_partitions.exclude(pk=gone.pk).values_list("operator", "partition", "store")
    delete_state_partitions_except(synced, [tuple(key) for key in kept])
    page = viewer_client.get(url).content.decode()

    assert set(before) - set(_partition_rows(page)) == {gone.path}
    assert f"Partitions ({len(before) - 1})" in page


def test_the_heatmap_shows_rows_a_sync_follows_after_it_was_drawn(viewer_client, synced):
    url = reverse("dashboards:state-heatmap-chart", args=[synced.pk])
    before = viewer_client.get(url).content.decode()
    partition = synced.state_partitions.order_by("pk").first()

    _follow(partition, rows=424_242, at=timezone.now())
    after = viewer_client.get(url).content.decode()

    assert "424242" not in before and "424242" in after
