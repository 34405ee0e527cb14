"""The roll-ups (dashboards/query_page/rollups.py) a series' raw rows call for, computed here
without the code under test, and the stored ones in the same form."""

from __future__ import annotations

from django.db import connection

from dashboards.query_page.rollups import LOWEST_TIER

ROWS_READ_SQL = (
    "SELECT COALESCE(SUM(seq_tup_read), 0) + COALESCE(SUM(idx_tup_fetch), 0) FROM pg_stat_xact_user_tables "
    "WHERE relname LIKE 'dashboards_%%'"
)
# Rows one chart request of a 1M-batch history may read: per series a few hundred roll-ups and
# the rows they name (PostgreSQL's count of tuples read by sequential and index scans).
MOST_ROWS_READ = 6_000


def rows_read_in_this_transaction() -> int:
    with connection.cursor() as cursor:
        cursor.execute(ROWS_READ_SQL)
        return int(cursor.fetchone()[0])


def expected_rollups(rows: list[dict], shape) -> dict:
    """{(tier, bucket, part): (first, last, extremes)} of ``rows`` (dicts with the shape's columns)."""
    last = max(row[shape.key] for row in rows)
    expected: dict = {}
    for tier in range(LOWEST_TIER, max(LOWEST_TIER, last.bit_length()) + 1):
        groups: dict = {}
        for row in rows:
            part = 0 if shape.partition is None else row[shape.partition]
            groups.setdefault((tier, row[shape.key] >> tier, part), []).append(row)
        for node, members in groups.items():
            members.sort(key=lambda row: row[shape.key])
            expected[node] = (
                members[0][shape.key],
                members[-1][shape.key],
                [_extreme(members, shape, v) for v in shape.values],
            )
    return expected


def _extreme(members: list[dict], shape, value: str) -> list | None:
    present = [row for row in members if row[value] is not None]
    if not present:
        return None
    low = min(row[value] for row in present)
    high = max(row[value] for row in present)
    holder = {bound: next(row[shape.key] for row in present if row[value] == bound) for bound in (low, high)}
    return [low, holder[low], high, holder[high]]


def stored_rollups(rollups) -> dict:
    """The rows of a roll-up queryset (ChartRollup, TimelineRollup) as expected_rollups gives them."""
    return {(row.tier, row.bucket, row.part): (row.first_key, row.last_key, row.extremes) for row in rollups}
