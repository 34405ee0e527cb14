"""Keyset reads, the one way pages are cut here (the batch table, the read API): never OFFSET.

A page is the rows past the last key seen, found through the key's index, so page 1,000 of a long
history costs what page 1 costs. One row more than the page is read only to learn whether another
page follows in the reading direction; nothing is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet


@dataclass(frozen=True, slots=True)
class KeysetSlice:
    rows: list
    more: bool  # a row exists past the last one returned, in the reading direction


def filter_given(queryset: QuerySet, **bounds) -> QuerySet:
    """``queryset`` filtered by the lookups in ``bounds`` whose value is given (not None)."""
    return queryset.filter(**{lookup: value for lookup, value in bounds.items() if value is not None})


def read_past(
    queryset: QuerySet,
    *,
    key: str,
    limit: int,
    after: int | None = None,
    before: int | None = None,
    newest_first: bool = False,
) -> KeysetSlice:
    """At most ``limit`` rows of ``queryset`` with ``key`` > ``after`` and < ``before`` (each when given),
    ascending by ``key``, or descending when ``newest_first``."""
    past = filter_given(queryset, **{f"{key}__gt": after, f"{key}__lt": before})
    rows = list(past.order_by(f"-{key}" if newest_first else key)[: limit + 1])
    return KeysetSlice(rows[:limit], len(rows) > limit)
