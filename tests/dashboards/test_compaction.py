"""dashboards.query_page.compaction: the compact-file growth projection, on sizes worked out by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboards.query_page.compaction import CompactionOutlook, median_trigger_seconds, project_compaction


def test_linear_growth_crosses_where_a_compaction_needs_a_whole_trigger_interval():
    # 1,000 bytes more every 10 batches = 100 bytes/batch from 0 at batch -1; 10 s at 1,000 B/s = 10,000 B.
    sizes = [(9, 1_000), (19, 2_000), (29, 3_000)]
    outlook = project_compaction(sizes, latest_batch_id=30, trigger_seconds=10, bytes_per_second=1_000)
    assert outlook == CompactionOutlook(
        bytes_per_batch=pytest.approx(100.0),
        intercept_bytes=pytest.approx(100.0),
        threshold_bytes=10_000,
        crossing_batch_id=99,
        time_to_crossing=timedelta(seconds=690),
    )


def test_a_log_already_past_the_threshold_crosses_now():
    outlook = project_compaction(
        [(9, 50_000), (19, 60_000)], latest_batch_id=25, trigger_seconds=1, bytes_per_second=1_000
    )
    assert (outlook.crossing_batch_id, outlook.time_to_crossing) == (25, timedelta(0))


def test_shrinking_or_flat_logs_never_cross():
    outlook = project_compaction([(9, 5_000), (19, 4_000)], latest_batch_id=20, trigger_seconds=10, bytes_per_second=1)
    assert (outlook.crossing_batch_id, outlook.time_to_crossing) == (None, None)


@pytest.mark.parametrize("sizes", [[], [(9, 100)]])
def test_fewer_than_two_compact_files_give_no_projection(sizes):
    assert project_compaction(sizes, latest_batch_id=10, trigger_seconds=10, bytes_per_second=1) is None


def test_the_trigger_interval_is_the_median_gap_between_known_batch_times():
    assert median_trigger_seconds([0, 1_000, 3_000, 5_000, 60_000]) == pytest.approx(2.0)
    assert median_trigger_seconds([0, 5_000]) is None
