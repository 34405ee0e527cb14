"""Min/max-per-bucket downsampling: the pure reference, and the SQL statement checked against it."""

from __future__ import annotations

import random

import pytest

from dashboards.models import Batch
from dashboards.query_page.chart_series import TIMELINE_SHAPE, BatchRange
from dashboards.query_page.downsample import (
    MAX_POINTS_PER_SERIES,
    SeriesShape,
    bucket_width_for,
    downsample_rows,
    select_downsampled,
)
from dashboards.query_page.timeline_rollups import refresh_timeline_rollups, timeline_series
from factories import make_checkpoint

SHAPE = SeriesShape(key="batch_id", values=("timestamp_ms", "next_batch_watermark_ms"))
SEEDS = [1, 2, 3, 4]


def _random_rows(seed: int, count: int, *, value_range: int = 1_000_000) -> list[dict]:
    """Rows with gaps in the keys, ties (a small value_range) and unknown (None) values."""
    rng = random.Random(seed)
    keys = sorted(rng.sample(range(count * 3), count))
    return [
        {
            "batch_id": key,
            "timestamp_ms": rng.randrange(value_range),
            "next_batch_watermark_ms": None if rng.random() < 0.2 else rng.randrange(value_range),
        }
        for key in keys
    ]


def test_a_bucket_keeps_its_lowest_and_highest_row_and_the_series_its_ends():
    rows = [{"batch_id": b, "y": y} for b, y in enumerate([5, 1, 9, 4, 4, 7, 2, 2, 8, 3])]
    kept = downsample_rows(rows, SeriesShape(key="batch_id", values=("y",)), width=5)
    # Bucket 0-4: min 1 at batch 1, max 9 at batch 2; bucket 5-9: min 2 at batch 6 (the first of
    # the tie), max 8 at batch 8; ends: batches 0 and 9.
    assert [row["batch_id"] for row in kept] == [0, 1, 2, 6, 8, 9]


def test_a_width_of_one_keeps_every_row():
    rows = _random_rows(1, 300)
    assert downsample_rows(rows, SHAPE, width=1) == rows


@pytest.mark.parametrize("seed", SEEDS)
def test_downsampling_keeps_the_ends_and_the_global_extremes_of_each_value(seed):
    rows = _random_rows(seed, 20_000)
    kept = downsample_rows(rows, SHAPE, width=bucket_width_for(rows[-1]["batch_id"] + 1, len(SHAPE.values)))
    assert kept[0] == rows[0] and kept[-1] == rows[-1]
    for value in SHAPE.values:
        present = [row[value] for row in rows if row[value] is not None]
        assert min(present) in {row[value] for row in kept}
        assert max(present) in {row[value] for row in kept}


@pytest.mark.parametrize("span", [1, 1_999, 2_000, 2_001, 60_000, 1_000_000])
@pytest.mark.parametrize("values", [1, 3, 4])
def test_a_series_downsampled_to_its_width_fits_the_point_budget(span, values):
    width = bucket_width_for(span, values)
    buckets = -(-span // width)
    # Two rows per value per bucket, plus the two ends.
    assert buckets * 2 * values + 2 <= MAX_POINTS_PER_SERIES or width == 1 and span <= MAX_POINTS_PER_SERIES


def test_a_budget_too_small_for_one_bucket_is_refused():
    with pytest.raises(ValueError, match="cannot hold"):
        bucket_width_for(10_000, 4, max_points=9)


def test_partitions_are_downsampled_separately_and_kept_in_order():
    rows = [{"op": op, "batch_id": b, "y": (b * 7 + op) % 11} for op in (1, 0) for b in range(40)]
    shape = SeriesShape(key="batch_id", values=("y",), partition="op")
    kept = downsample_rows(rows, shape, width=10)
    expected = []
    for op in (0, 1):
        series = [row for row in rows if row["op"] == op]
        keys = {0, 39}
        for start in range(0, 40, 10):
            bucket = series[start : start + 10]
            keys |= {
                min(bucket, key=lambda r: (r["y"], r["batch_id"]))["batch_id"],
                min(bucket, key=lambda r: (-r["y"], r["batch_id"]))["batch_id"],
            }
        expected += [(op, key) for key in sorted(keys)]
    assert [(row["op"], row["batch_id"]) for row in kept] == expected


def _store(rows: list[dict], checkpoint) -> None:
    Batch.objects.bulk_create(Batch(checkpoint=checkpoint, offset_log_version=1, watermark_ms=0, **row) for row in rows)


def _store_as_the_sync_does(rows: list[dict], checkpoint) -> None:
    """Store the batches and refresh their timeline roll-ups, as the sync's _store_batches does."""
    _store(rows, checkpoint)
    refresh_timeline_rollups(checkpoint.pk, [row["batch_id"] for row in rows])


@pytest.mark.django_db
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("width", [1, 7, 100])
def test_the_sql_statement_keeps_the_rows_the_reference_keeps(seed, width):
    rows = _random_rows(seed, 3_000, value_range=50 if seed % 2 else 1_000_000)
    checkpoint = make_checkpoint()
    _store(rows, checkpoint)
    queryset = checkpoint.batches.values("batch_id", "timestamp_ms", "next_batch_watermark_ms")
    assert select_downsampled(queryset, SHAPE, width=width) == downsample_rows(rows, SHAPE, width=width)


@pytest.mark.django_db
def test_the_sql_statement_downsamples_each_partition_like_the_reference():
    first, second = make_checkpoint(name="first", url="/a"), make_checkpoint(name="second", url="/b")
    rows = {first: _random_rows(5, 1_500, value_range=30), second: _random_rows(6, 900)}
    for checkpoint, checkpoint_rows in rows.items():
        _store(checkpoint_rows, checkpoint)
    shape = SeriesShape(key="batch_id", values=SHAPE.values, partition="checkpoint_id")
    queryset = Batch.objects.filter(checkpoint__in=[first, second]).values("checkpoint_id", *SHAPE.values, "batch_id")
    reference_rows = [{"checkpoint_id": c.pk, **row} for c, checkpoint_rows in rows.items() for row in checkpoint_rows]
    expected = downsample_rows(reference_rows, shape, width=40)
    assert len(expected) < len(reference_rows)
    assert select_downsampled(queryset, shape, width=40) == expected


@pytest.mark.django_db
def test_the_timeline_series_keeps_what_the_reference_keeps_of_the_timed_batches():
    rng = random.Random(9)
    checkpoint = make_checkpoint()
    rows, clock = [], 1_600_000_000_000
    for batch_id in range(6_000):
        clock += rng.choice([1_000, 1_000, 2_000, 60_000])
        rows.append(
            {"batch_id": batch_id, "timestamp_ms": 0 if batch_id < 10 else clock, "is_committed": rng.random() > 0.01}
        )
    _store_as_the_sync_does(rows, checkpoint)

    series = timeline_series(checkpoint, BatchRange())

    timed = [row for row in rows if row["timestamp_ms"] > 0]
    reference = [
        {
            "batch_id": row["batch_id"],
            "watermark_ms": 0,
            "committed_flag": int(row["is_committed"]),
            "interval_ms": None if i == 0 else row["timestamp_ms"] - timed[i - 1]["timestamp_ms"],
        }
        for i, row in enumerate(timed)
    ]
    width = _next_power_of_two(bucket_width_for(6_000, len(TIMELINE_SHAPE.values)))
    assert series.bucket_width == width > 1
    _assert_reference_points_plus_one_end(
        [p.batch_id for p in series.points], downsample_rows(reference, TIMELINE_SHAPE, width=width)
    )
    assert {p.batch_id for p in series.points if not p.is_committed} >= {
        min(r["batch_id"] for r in bucket) for bucket in _uncommitted_by_bucket(reference, width)
    }


def _next_power_of_two(value: int) -> int:
    power = 1
    while power < value:
        power *= 2
    return power


def _assert_reference_points_plus_one_end(drawn: list[int], reference_rows: list[dict]) -> None:
    """The series draws what the reference keeps, in order, plus at most the settled part's last row."""
    expected = [row["batch_id"] for row in reference_rows]
    assert drawn == sorted(drawn)
    assert set(expected) <= set(drawn)
    assert len(set(drawn) - set(expected)) <= 1


@pytest.mark.django_db
def test_a_live_querys_new_batch_and_commit_reach_the_timeline_through_its_rollups():
    rng = random.Random(11)
    checkpoint = make_checkpoint()
    clock, rows = 1_600_000_000_000, []
    for batch_id in range(8_010):
        clock += rng.choice([1_000, 1_000, 5_000, 600_000])
        rows.append({"batch_id": batch_id, "timestamp_ms": clock, "is_committed": batch_id < 8_009})
    _store_as_the_sync_does(rows, checkpoint)

    # The running query commits its last batch and plans one more, as Spark does; the sync
    # refreshes the roll-ups of what it stored.
    Batch.objects.filter(checkpoint=checkpoint, batch_id=8_009).update(is_committed=True)
    _store([{"batch_id": 8_010, "timestamp_ms": clock + 1_000, "is_committed": False}], checkpoint)
    refresh_timeline_rollups(checkpoint.pk, [8_009, 8_010])
    rows[-1]["is_committed"] = True
    rows.append({"batch_id": 8_010, "timestamp_ms": clock + 1_000, "is_committed": False})
    series = timeline_series(checkpoint, BatchRange())

    assert [(p.batch_id, p.is_committed) for p in series.points if not p.is_committed] == [(8_010, False)]
    reference = [
        {
            "batch_id": row["batch_id"],
            "watermark_ms": 0,
            "committed_flag": int(row["is_committed"]),
            "interval_ms": None if i == 0 else row["timestamp_ms"] - rows[i - 1]["timestamp_ms"],
        }
        for i, row in enumerate(rows)
    ]
    _assert_reference_points_plus_one_end(
        [p.batch_id for p in series.points], downsample_rows(reference, TIMELINE_SHAPE, width=series.bucket_width)
    )
    intervals = {p.batch_id: p.interval_ms for p in series.points}
    assert all(intervals[row["batch_id"]] == row["interval_ms"] for row in reference if row["batch_id"] in intervals)


def _uncommitted_by_bucket(rows: list[dict], width: int) -> list[list[dict]]:
    buckets: dict[int, list[dict]] = {}
    for row in rows:
        if not row["committed_flag"]:
            buckets.setdefault(row["batch_id"] // width, []).append(row)
    return list(buckets.values())
