"""Min/max-per-bucket downsampling of long series, in SQL and as a pure reference.

A series is rows keyed by an integer (a batch id), optionally split into partitions (one line per
stateful operator). Rows are grouped into buckets of ``width`` consecutive keys; from each bucket
we keep, for every plotted value, the row holding its minimum and the row holding its maximum
(the lowest key wins a tie), plus the first and last row of each partition. Spikes and dips
therefore survive, unlike with averaging or every-nth sampling, and every point drawn is a real
row. The SQL version does the bucketing in the database, so a million rows never reach Python;
``downsample_rows`` is the reference it is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import QuerySet

# Points one series may send to the browser: Plotly stays responsive, and a chart ~1,000 pixels
# wide cannot show more anyway.
MAX_POINTS_PER_SERIES = 2_000

Row = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class SeriesShape:
    """Which columns of a row are the key, the partition (or None) and the plotted values."""

    key: str
    values: tuple[str, ...]
    partition: str | None = None


def bucket_width_for(span: int, value_count: int, *, max_points: int = MAX_POINTS_PER_SERIES) -> int:
    """Return the keys per bucket that keeps a series of ``span`` keys within ``max_points``.

    1 means full detail: a span that fits is never downsampled. Each bucket keeps at most two rows
    per value, and each partition two more for its ends.
    """
    if value_count < 1 or max_points < 2 * value_count + 2:
        raise ValueError(
            f"max_points={max_points} cannot hold two points for each of {value_count} values plus the ends"
        )
    if span <= max_points:
        return 1
    buckets = (max_points - 2) // (2 * value_count)
    return math.ceil(span / buckets)


def downsample_rows(rows: Sequence[Row], shape: SeriesShape, *, width: int) -> list[Row]:
    """Return the rows to draw, ordered by partition then key (the pure reference of ``select_downsampled``)."""
    by_partition: dict[object, list[Row]] = {}
    for row in rows:
        by_partition.setdefault(_partition_of(row, shape), []).append(row)
    kept: list[Row] = []
    for partition in sorted(by_partition, key=_sortable):
        series = sorted(by_partition[partition], key=lambda row: row[shape.key])
        kept.extend(_downsample_partition(series, shape, width))
    return kept


def _downsample_partition(series: list[Row], shape: SeriesShape, width: int) -> list[Row]:
    chosen = {series[0][shape.key], series[-1][shape.key]}
    buckets: dict[int, list[Row]] = {}
    for row in series:
        buckets.setdefault(row[shape.key] // width, []).append(row)
    for bucket in buckets.values():
        for value in shape.values:
            present = [row for row in bucket if row[value] is not None]
            if present:
                chosen.add(_first_with(present, value, min)[shape.key])
                chosen.add(_first_with(present, value, max)[shape.key])
    return [row for row in series if row[shape.key] in chosen]


def _first_with(rows: list[Row], value: str, pick: Callable) -> Row:
    """The lowest-keyed row (rows are in key order) whose ``value`` is the bucket's min or max."""
    target = pick(row[value] for row in rows)
    return next(row for row in rows if row[value] == target)


def _partition_of(row: Row, shape: SeriesShape) -> object:
    return None if shape.partition is None else row[shape.partition]


def _sortable(partition: object) -> tuple[bool, object]:
    return (partition is not None, partition if partition is not None else 0)


def select_downsampled(queryset: QuerySet, shape: SeriesShape, *, width: int) -> list[dict]:
    """Run ``downsample_rows`` in the database over the rows of a ``.values(...)`` queryset.

    One statement: a pass for each bucket's min/max, a pass for the lowest key holding each, and
    one for the chosen rows. With ``width`` 1 every row is its own bucket, so every row comes back.
    The rows are dicts of the queryset's columns, ordered by partition then key.
    """
    with connection.cursor() as cursor:
        cursor.execute(*downsample_statement(queryset, shape, width=width))
        columns = [column[0] for column in cursor.description]
        rows = sorted(
            (dict(zip(columns, row, strict=True)) for row in cursor.fetchall()),
            key=lambda row: (row["ds_part"], row[shape.key]),
        )
    for row in rows:
        del row["ds_part"], row["ds_bucket"]
    return rows


def downsample_statement(queryset: QuerySet, shape: SeriesShape, *, width: int) -> tuple[str, tuple]:
    """The SQL and parameters ``select_downsampled`` runs (also for EXPLAIN)."""
    base_sql, params = queryset.order_by().query.sql_with_params()
    return _downsample_sql(base_sql, shape, width), params


def _downsample_sql(base_sql: str, shape: SeriesShape, width: int) -> str:
    """Wrap ``base_sql``: base (rows + partition + bucket), buckets (extremes), picks (lowest key
    holding each extreme), ends (first and last key of each partition), then the chosen rows."""
    q = connection.ops.quote_name
    sides = [(i, side) for i in range(len(shape.values)) for side in ("lo", "hi")]
    chosen = " UNION ".join(
        [f"SELECT ds_part, k_{side}_{i} AS k FROM picks" for i, side in sides]
        + ["SELECT ds_part, k_first FROM ends", "SELECT ds_part, k_last FROM ends"]
    )
    return (
        _bucket_ctes(base_sql, shape, width)
        + ", ends AS (SELECT ds_part, MIN(k_first) AS k_first, MAX(k_last) AS k_last FROM buckets GROUP BY ds_part), "
        f"chosen AS ({chosen}) "
        # No ORDER BY (the caller sorts the few rows): with one, PostgreSQL, overestimating the
        # chosen keys, sorts every row of base for a merge join instead of hashing the chosen keys.
        f"SELECT base.* FROM base JOIN chosen ON base.ds_part = chosen.ds_part AND base.{q(shape.key)} = chosen.k"
    )


def _bucket_ctes(base_sql: str, shape: SeriesShape, width: int, *, from_key: int | None = None) -> str:
    """base (rows + partition + bucket, from ``from_key`` on), buckets (extremes), picks (lowest key holding each)."""
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"bucket width must be a positive int, not {width!r}")
    q = connection.ops.quote_name
    key = q(shape.key)
    # A series without partitions is one partition; a column (not a GROUP BY literal, which
    # PostgreSQL would read as a column position) keeps the statement the same for both.
    part = "0" if shape.partition is None else f"src.{q(shape.partition)}"
    extremes = ", ".join(
        [f"MIN({key}) AS k_first", f"MAX({key}) AS k_last"]
        + [f"MIN({q(v)}) AS lo_{i}, MAX({q(v)}) AS hi_{i}" for i, v in enumerate(shape.values)]
    )
    sides = [(i, side) for i in range(len(shape.values)) for side in ("lo", "hi")]
    holders = ", ".join(
        f"MIN(CASE WHEN base.{q(shape.values[i])} = b.{side}_{i} THEN base.{key} END) AS k_{side}_{i}"
        for i, side in sides
    )
    # Outside the base query, so that a window in it (an interval) still sees the row before.
    since = "" if from_key is None else f" WHERE src.{key} >= {int(from_key)}"
    return (
        f"WITH base AS (SELECT src.*, {part} AS ds_part, src.{key} / {width} AS ds_bucket "
        f"FROM ({base_sql}) src{since}), "
        f"buckets AS (SELECT ds_part, ds_bucket, {extremes} FROM base GROUP BY ds_part, ds_bucket), "
        f"picks AS (SELECT base.ds_part, base.ds_bucket, {holders} FROM base JOIN buckets b "
        f"ON base.ds_part = b.ds_part AND base.ds_bucket = b.ds_bucket GROUP BY base.ds_part, base.ds_bucket)"
    )


def select_bucket_summaries(
    queryset: QuerySet, shape: SeriesShape, *, width: int, from_key: int | None = None
) -> list[dict]:
    """Per partition and bucket of ``width`` keys of a ``.values(...)`` queryset's rows (those from
    ``from_key`` on): ds_part, ds_bucket, k_first, k_last, and per value i its extremes lo_i, hi_i
    and the lowest keys holding them, k_lo_i, k_hi_i (None when no row has the value)."""
    base_sql, params = queryset.order_by().query.sql_with_params()
    sql = (
        _bucket_ctes(base_sql, shape, width, from_key=from_key)
        + " SELECT buckets.*, "
        + ", ".join(f"picks.k_{side}_{i}" for i in range(len(shape.values)) for side in ("lo", "hi"))
        + " FROM buckets JOIN picks ON buckets.ds_part = picks.ds_part AND buckets.ds_bucket = picks.ds_bucket"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
