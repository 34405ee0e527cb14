"""Roll-ups of the Runtime chart series: what a chart of any history reads instead of every row.

For each series of a query (dashboards.query_page.runtime_series) and each tier k from
LOWEST_TIER up to the one whose bucket 0 holds every batch id, a ChartRollup row per bucket of
2**k batch ids keeps the bucket's first and last batch id and, per plotted value, its minimum and
maximum with the lowest batch id holding each: what dashboards.query_page.downsample keeps of a
bucket (M4-style). A tier-(k+1) bucket is its two tier-k halves combined, so storing one batch's
progress rewrites one bucket per tier, and a chart of width 2**k reads its buckets at tier k (the
partial buckets at the ends of a range as a few finer buckets and at most 2 * 7 rows), then the
rows they name: a few thousand rows at most, whatever the history.

A RollupStore says where a series' roll-ups are kept and whose rows they summarise: the Runtime
series' in ChartRollup, per query; the batch timeline's in TimelineRollup, per checkpoint
(dashboards.query_page.timeline_rollups). ``owner_pk`` below is the query's or the checkpoint's pk.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import Max, Min, Model, Q, QuerySet

from dashboards.models import BatchProgress, ChartRollup
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.downsample import SeriesShape, select_bucket_summaries

LOWEST_TIER = 3  # buckets of 8 batches; a chart finer than that reads its rows (at most ~2,000)
Extreme = list | None  # [min, batch id holding it, max, batch id holding it]


def progress_span(query_pk: int | None) -> tuple[int | None, int | None]:
    """The lowest and highest batch id of the query's progress (from the (query, batch id) index)."""
    span = progress_of(query_pk).aggregate(first=Min("batch_id"), last=Max("batch_id"))
    return span["first"], span["last"]


def progress_of(query_pk: int | None) -> QuerySet:
    return BatchProgress.objects.filter(query_id=query_pk)


@dataclass(frozen=True, slots=True)
class RollupStore:
    """The model keeping a kind of series' roll-ups, its column naming their owner, the span
    of the owner's batch ids, and the owner's rows (each with a batch_id) the span is of."""

    model: type[Model]
    owner: str
    span: Callable[[int | None], tuple[int | None, int | None]]
    rows_of: Callable[[int | None], QuerySet]

    def of(self, owner_pk: int, series: str) -> QuerySet:
        return self.model.objects.filter(**{self.owner: owner_pk}, series=series)

    def next_key(self, owner_pk: int, after: int | None) -> int | None:
        """The owner's lowest batch id above ``after`` (None: the lowest of all), one index lookup."""
        rows = self.rows_of(owner_pk)
        if after is not None:
            rows = rows.filter(batch_id__gt=after)
        return rows.order_by("batch_id").values_list("batch_id", flat=True).first()


QUERY_ROLLUPS = RollupStore(ChartRollup, "query_id", progress_span, progress_of)


@dataclass(frozen=True, slots=True)
class RolledSeries:
    """A series kept in roll-ups: its name, its shape, its rows of an owner in a batch range, and
    where its roll-ups are kept."""

    name: str
    shape: SeriesShape
    rows: Callable[[int | None, BatchRange], QuerySet]
    store: RollupStore = QUERY_ROLLUPS


@dataclass(frozen=True, slots=True)
class Bucket:
    first_key: int
    last_key: int
    extremes: tuple[Extreme, ...]


def combine(left: Bucket | None, right: Bucket | None) -> Bucket | None:
    """The bucket holding the rows of both (None: no rows); a tie goes to the lowest batch id."""
    if left is None or right is None:
        return left or right
    return Bucket(
        min(left.first_key, right.first_key),
        max(left.last_key, right.last_key),
        tuple(_combine_extreme(a, b) for a, b in zip(left.extremes, right.extremes, strict=True)),
    )


def _combine_extreme(left: Extreme, right: Extreme) -> Extreme:
    if left is None or right is None:
        return left or right
    low = min((left[0], left[1]), (right[0], right[1]))
    high = min((-left[2], left[3]), (-right[2], right[3]))
    return [low[0], low[1], -high[0], high[1]]


def _bucket_of_summary(row: dict, value_count: int) -> Bucket:
    extremes = tuple(
        None if row[f"k_lo_{i}"] is None else [row[f"lo_{i}"], row[f"k_lo_{i}"], row[f"hi_{i}"], row[f"k_hi_{i}"]]
        for i in range(value_count)
    )
    return Bucket(row["k_first"], row["k_last"], extremes)


def _bucket_of_row(row: Model) -> Bucket:
    return Bucket(row.first_key, row.last_key, tuple(row.extremes))


def _summaries(series: RolledSeries, owner_pk: int, first: int, last: int) -> dict[tuple[int, int], Bucket]:
    """{(lowest-tier bucket, part): Bucket} of the raw rows from ``first`` to ``last``."""
    rows = series.rows(owner_pk, BatchRange(first, last))
    count = len(series.shape.values)
    return {
        (row["ds_bucket"], row["ds_part"]): _bucket_of_summary(row, count)
        for row in select_bucket_summaries(rows, series.shape, width=1 << LOWEST_TIER)
    }


# Maintenance: after progress is stored or removed.


def refresh(series: RolledSeries, owner_pk: int, batch_ids: Iterable[int]) -> None:
    """Recompute the buckets holding ``batch_ids`` at every tier from their rows and halves."""
    lowest = sorted({batch_id >> LOWEST_TIER for batch_id in batch_ids})
    if lowest:
        _recompute(series, owner_pk, lowest, rebuilding=False)


def rebuild(series: RolledSeries, owner_pk: int) -> None:
    """Forget the series' roll-ups and build them again from every row (after rows are removed)."""
    series.store.of(owner_pk, series.name).delete()
    first, last = series.store.span(owner_pk)
    if first is not None:
        lowest = list(range(first >> LOWEST_TIER, (last >> LOWEST_TIER) + 1))
        _recompute(series, owner_pk, lowest, rebuilding=True)


def within_build(batch_ids: Iterable[int], *, built: bool, through: int | None) -> list[int]:
    """Of ``batch_ids`` just stored, those whose roll-ups are to be refreshed now: all once the
    roll-ups are built; while a build in chunks is under way, those it has passed (the next
    chunks read the others); none before it starts."""
    if built:
        return list(batch_ids)
    return [] if through is None else [batch_id for batch_id in batch_ids if batch_id <= through]


def build_chunk(serieses: Iterable[RolledSeries], owner_pk: int, *, through: int | None, batches: int) -> int | None:
    """Build the roll-ups of the series (sharing a store) from their rows above ``through`` (the
    last batch id a previous chunk covered; None: start, forgetting any stored), about ``batches``
    batch ids of them from the next row on; the last batch id now covered, or None when no row is
    left above ``through``.

    Each chunk recomputes its lowest buckets and their parents up to the top tier of the owner's
    whole span (as ``refresh`` does), from the stored halves that earlier chunks left. A node
    left of the chunk's ancestors holds only rows up to ``through`` (there are none between it
    and the chunk's first), which earlier chunks summarised at every tier: as the span was then,
    and a chunk runs only while rows were left below that span's end, so a tier above it holds
    everything in bucket 0, an ancestor of every chunk. The last chunk leaves what ``rebuild`` would."""
    serieses = list(serieses)
    store = serieses[0].store
    start = store.next_key(owner_pk, through)
    if start is None:
        return None
    first = start >> LOWEST_TIER
    last = min(first + max(1, batches >> LOWEST_TIER), (store.span(owner_pk)[1] >> LOWEST_TIER) + 1) - 1
    for series in serieses:
        if through is None:
            store.of(owner_pk, series.name).delete()
        _recompute(series, owner_pk, list(range(first, last + 1)), rebuilding=through is None)
    return ((last + 1) << LOWEST_TIER) - 1


def _recompute(series: RolledSeries, owner_pk: int, lowest: list[int], *, rebuilding: bool) -> None:
    """Recompute the ``lowest`` buckets from their rows, then their parents tier by tier up to the top."""
    top = max(LOWEST_TIER, (series.store.span(owner_pk)[1] or 0).bit_length())
    changed = _changed_by_tier(lowest, top)
    fresh = _lowest_tier_summaries(series, owner_pk, lowest)
    # Rebuilding, nothing is stored; refreshing, a lowest bucket's stored parts may have no rows left.
    wanted = _halves_to_read(changed)
    if not rebuilding:
        wanted[LOWEST_TIER] = sorted(set(wanted.get(LOWEST_TIER, [])) | set(lowest))
    stored = {} if rebuilding else _stored(series, owner_pk, wanted)
    parts = {part for (_, _, part) in fresh} | {part for (_, _, part) in stored}
    for bucket in lowest:
        for part in parts:
            fresh.setdefault((LOWEST_TIER, bucket, part), None)
    _combine_upwards(fresh, stored, changed, parts, top=top)
    _write(series, owner_pk, fresh)


def _lowest_tier_summaries(
    series: RolledSeries, owner_pk: int, lowest: list[int]
) -> dict[tuple[int, int, int], Bucket | None]:
    """{(LOWEST_TIER, bucket, part): Bucket} of the ``lowest`` buckets, from their rows (a query per run of them)."""
    fresh: dict[tuple[int, int, int], Bucket | None] = {}
    for first, last in _runs(lowest):
        summaries = _summaries(series, owner_pk, first << LOWEST_TIER, ((last + 1) << LOWEST_TIER) - 1)
        fresh.update({(LOWEST_TIER, bucket, part): summary for (bucket, part), summary in summaries.items()})
    return fresh


def _combine_upwards(fresh: dict, stored: dict, changed: dict[int, list[int]], parts: set[int], *, top: int) -> None:
    """Into ``fresh``: each changed parent, tier by tier, as the combination of its two halves."""
    for tier in range(LOWEST_TIER + 1, top + 1):
        for bucket in changed[tier]:
            for part in parts:
                halves = [_known(fresh, stored, (tier - 1, 2 * bucket + half, part)) for half in (0, 1)]
                fresh[(tier, bucket, part)] = combine(*halves)


def _known(fresh: dict, stored: dict, node: tuple[int, int, int]) -> Bucket | None:
    return fresh[node] if node in fresh else stored.get(node)


def _changed_by_tier(lowest: list[int], top: int) -> dict[int, list[int]]:
    """Per tier, the buckets to recompute: the ancestors of ``lowest``, and bucket 0 above the
    lowest tier. A batch id far above the others (a sync caught up past Spark's purge) raises the
    top tier by several at once; the tiers between the old top and the new then hold the older
    history in their bucket 0 only, which no ancestor of the new batch is."""
    changed = {LOWEST_TIER: lowest}
    for tier in range(LOWEST_TIER + 1, top + 1):
        changed[tier] = sorted({bucket >> 1 for bucket in changed[tier - 1]} | {0})
    return changed


def _halves_to_read(changed: dict[int, list[int]]) -> dict[int, list[int]]:
    """Per tier, the halves of the changed parents that are not recomputed themselves."""
    wanted = {}
    for tier, buckets in changed.items():
        recomputed = set(buckets)
        parents = changed.get(tier + 1, [])
        wanted[tier] = sorted({2 * parent + half for parent in parents for half in (0, 1)} - recomputed)
    return {tier: buckets for tier, buckets in wanted.items() if buckets}


def _runs(buckets: list[int]) -> list[tuple[int, int]]:
    """Sorted bucket numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for bucket in buckets:
        if runs and runs[-1][1] == bucket - 1:
            runs[-1] = (runs[-1][0], bucket)
        else:
            runs.append((bucket, bucket))
    return runs


def _stored(series: RolledSeries, owner_pk: int, wanted: dict[int, list[int]]) -> dict[tuple[int, int, int], Bucket]:
    """{(tier, bucket, part): Bucket} of the stored roll-ups of ``wanted`` ({tier: buckets}), every part."""
    return _rollups_where(series, owner_pk, [Q(tier=tier, bucket__in=buckets) for tier, buckets in wanted.items()])


def _rollups_where(series: RolledSeries, owner_pk: int, conditions: list[Q]) -> dict[tuple[int, int, int], Bucket]:
    """The roll-ups meeting any of ``conditions``, each a tier and buckets: one UNION ALL of index
    range reads (an OR of them lets PostgreSQL, before it has statistics, scan the whole table)."""
    if not conditions:
        return {}
    mine = series.store.of(owner_pk, series.name).order_by()
    reads = [mine.filter(condition) for condition in conditions]
    rows = reads[0].union(*reads[1:], all=True) if len(reads) > 1 else reads[0]
    return {(row.tier, row.bucket, row.part): _bucket_of_row(row) for row in rows}


def _write(series: RolledSeries, owner_pk: int, nodes: dict[tuple[int, int, int], Bucket | None]) -> None:
    """Upsert the nodes that hold rows and delete those that hold none."""
    kept = [
        (owner_pk, series.name, tier, bucket, part, node.first_key, node.last_key, json.dumps(list(node.extremes)))
        for (tier, bucket, part), node in nodes.items()
        if node is not None
    ]
    _upsert(series.store, kept)
    _delete_empty(series, owner_pk, [node for node, bucket_node in nodes.items() if bucket_node is None])


def _delete_empty(series: RolledSeries, owner_pk: int, empty: list[tuple[int, int, int]]) -> None:
    """Delete the stored roll-ups of the (tier, bucket, part) nodes that hold no rows any more."""
    gone = Q()
    for tier, bucket, part in empty:
        gone |= Q(tier=tier, bucket=bucket, part=part)
    if gone:
        series.store.of(owner_pk, series.name).filter(gone).delete()


def _upsert(store: RollupStore, kept: list[tuple]) -> None:
    connection = connections[store.model.objects.db]
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql" and len(kept) > COPY_FROM_ROWS:
            _copy_then_upsert(cursor, store, kept)
        else:
            cursor.executemany(_upsert_sql(store, "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"), kept)


# A rebuild writes hundreds of thousands of nodes: COPY is about 20 times faster than executemany.
COPY_FROM_ROWS = 2_000


def _columns(store: RollupStore) -> str:
    return f"{store.owner}, series, tier, bucket, part, first_key, last_key, extremes"


def _upsert_sql(store: RollupStore, source: str) -> str:
    return (
        f"INSERT INTO {store.model._meta.db_table} ({_columns(store)}) {source} "
        f"ON CONFLICT ({store.owner}, series, tier, bucket, part) "
        "DO UPDATE SET first_key = EXCLUDED.first_key, last_key = EXCLUDED.last_key, extremes = EXCLUDED.extremes"
    )


def _copy_then_upsert(cursor, store: RollupStore, kept: list[tuple]) -> None:
    """COPY the rows into a temporary table, then upsert them from it (a rebuild may meet another)."""
    columns = _columns(store)
    cursor.execute(
        f"CREATE TEMPORARY TABLE chart_rollup_load ({store.owner} bigint, series text, tier int, bucket bigint, "
        "part int, first_key bigint, last_key bigint, extremes jsonb) ON COMMIT DROP"
    )
    with cursor.cursor.copy(f"COPY chart_rollup_load ({columns}) FROM STDIN") as copy:
        for row in kept:
            copy.write_row(row)
    # WHERE true: PostgreSQL reads ON CONFLICT after a bare SELECT ... FROM as part of a join otherwise.
    cursor.execute(_upsert_sql(store, f"SELECT {columns} FROM chart_rollup_load WHERE true"))
    # Inside an outer transaction (a test's, a sync's) ON COMMIT comes too late for the next rebuild.
    cursor.execute("DROP TABLE chart_rollup_load")


# Reading: a chart of a batch range at a width of 2**k, k >= LOWEST_TIER.


def read_rolled(series: RolledSeries, owner_pk: int, first: int, last: int, width: int) -> list[dict]:
    """What ``select_downsampled`` returns of the series' rows from ``first`` to ``last`` at
    ``width`` (a power of two, at least 2**LOWEST_TIER), read from the roll-ups: one query for
    the roll-ups, one for the rows at the partial ends finer than the lowest tier, one for the
    rows named."""
    tier = width.bit_length() - 1
    full, edges = _split(first, last, width)
    pieces = [_decompose(x, y) for x, y in edges]
    conditions = [Q(tier=tier, bucket__gte=full[0], bucket__lte=full[1])] if full is not None else []
    conditions += [Q(tier=node_tier, bucket=bucket) for nodes, _ in pieces for node_tier, bucket in nodes]
    stored = _rollups_where(series, owner_pk, conditions)
    raw = _raw_summaries(series, owner_pk, [span for _, raws in pieces for span in raws])
    buckets = _whole_buckets(stored, tier, full)
    for index, (nodes, raws) in enumerate(pieces):
        for part, bucket in _edge_buckets(stored, nodes, raws, raw).items():
            buckets[(("edge", index), part)] = bucket
    return _named_rows(series, owner_pk, buckets)


def _whole_buckets(stored: dict, tier: int, full: tuple[int, int] | None) -> dict[tuple[object, int], Bucket]:
    """{(bucket, part): Bucket} of the stored roll-ups at ``tier`` within the ``full`` buckets."""
    return {
        (bucket, part): node
        for (node_tier, bucket, part), node in stored.items()
        if node_tier == tier and full and full[0] <= bucket <= full[1]
    }


def _raw_summaries(series: RolledSeries, owner_pk: int, spans: list[tuple[int, int]]) -> dict[tuple[int, int], Bucket]:
    """{(lowest-tier bucket, part): Bucket} of the rows of ``spans`` (each within one lowest-tier bucket)."""
    if not spans:
        return {}
    keys = tuple(key for first, last in spans for key in range(first, last + 1))
    rows = series.rows(owner_pk, BatchRange(only=keys))
    count = len(series.shape.values)
    return {
        (row["ds_bucket"], row["ds_part"]): _bucket_of_summary(row, count)
        for row in select_bucket_summaries(rows, series.shape, width=1 << LOWEST_TIER)
    }


def _split(first: int, last: int, width: int) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """The whole buckets of ``width`` from ``first`` to ``last`` (first, last bucket) and the partial ends."""
    start = -(-first // width) * width
    end = (last + 1) // width * width  # exclusive
    if start > end:
        return None, [(first, last)]
    edges = [(first, start - 1)] if first < start else []
    if end <= last:
        edges.append((end, last))
    return ((start // width, end // width - 1) if start < end else None), edges


def _decompose(first: int, last: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Cover ``first``..``last`` with aligned (tier, bucket) roll-ups and at most two raw row ranges."""
    step = 1 << LOWEST_TIER
    start, end = -(-first // step) * step, (last + 1) // step * step
    if start >= end:
        return [], [(first, last)]
    raws = [(first, start - 1)] if first < start else []
    if end <= last:
        raws.append((end, last))
    nodes = []
    while start < end:
        tier = LOWEST_TIER
        while start % (1 << (tier + 1)) == 0 and start + (1 << (tier + 1)) <= end:
            tier += 1
        nodes.append((tier, start >> tier))
        start += 1 << tier
    return nodes, raws


def _edge_buckets(stored: dict, nodes: list, raws: list, raw: dict) -> dict[int, Bucket]:
    """{part: Bucket} of a partial bucket: its roll-ups and raw row ranges combined."""
    combined: dict[int, Bucket | None] = {}
    for (tier, bucket, part), node in stored.items():
        if (tier, bucket) in nodes:
            combined[part] = combine(combined.get(part), node)
    lowest = {first >> LOWEST_TIER for first, _ in raws}
    for (bucket, part), summary in raw.items():
        if bucket in lowest:
            combined[part] = combine(combined.get(part), summary)
    return {part: bucket for part, bucket in combined.items() if bucket is not None}


def _named_rows(series: RolledSeries, owner_pk: int, buckets: dict[tuple[object, int], Bucket]) -> list[dict]:
    """The rows holding the buckets' extremes and each part's first and last row, by part then batch id."""
    chosen: set[tuple[int, int]] = set()
    ends: dict[int, list[int]] = {}
    for (_, part), bucket in buckets.items():
        chosen.update((part, extreme[k]) for extreme in bucket.extremes if extreme is not None for k in (1, 3))
        low, high = ends.get(part, [bucket.first_key, bucket.last_key])
        ends[part] = [min(low, bucket.first_key), max(high, bucket.last_key)]
    chosen.update((part, key) for part, keys in ends.items() for key in keys)
    if not chosen:
        return []
    shape = series.shape
    keys = tuple(sorted({key for _, key in chosen}))
    rows = series.rows(owner_pk, BatchRange(only=keys))
    kept = [row for row in rows if (_part(row, shape), row[shape.key]) in chosen]
    return sorted(kept, key=lambda row: (_part(row, shape), row[shape.key]))


def _part(row: dict, shape: SeriesShape) -> int:
    return 0 if shape.partition is None else row[shape.partition]
