"""Keyset pages of the batch table, newest first: ``?before=``, ``?after=`` and ``?at=`` a batch id.

A page is cut by dashboards.keyset through the (checkpoint, batch_id) unique index, from a batch id,
so a page deep in a million batches costs what the first page costs: no COUNT(*), no OFFSET.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import QuerySet

from dashboards.keyset import read_past

BATCHES_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class BatchPageRequest:
    """Which page was asked for: older than ``before``, or newer than ``after``; neither is the newest."""

    before: int | None = None
    after: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> BatchPageRequest:
        """Read ``before``, ``after`` or ``at`` (jump: the page starting at that batch id).

        A value that is not a batch id is ignored, so a mistyped jump shows the newest page.
        """
        at = batch_id_or_none(query.get("at"))
        if at is not None:
            return cls(before=at + 1)
        after = batch_id_or_none(query.get("after"))
        if after is not None:
            return cls(after=after)
        return cls(before=batch_id_or_none(query.get("before")))


@dataclass(frozen=True, slots=True)
class BatchPage:
    batches: list
    older_before: int | None  # the "older" link's ?before=, None on the oldest page
    newer_after: int | None  # the "newer" link's ?after=, None on the newest page

    @property
    def is_newest(self) -> bool:
        return self.newer_after is None


def read_batch_page(
    batches: QuerySet, request: BatchPageRequest, *, latest_batch_id: int | None, size: int = BATCHES_PER_PAGE
) -> BatchPage:
    """Return one page of ``batches`` (a checkpoint's), newest first, in one query.

    One row more than the page is read to learn whether the next page in the reading direction
    exists; the other direction is known from ``latest_batch_id`` (Checkpoint.latest_batch_id)
    or from the request itself.
    """
    if request.after is not None:
        return _page_after(batches, request.after, size)
    older = read_past(batches, key="batch_id", limit=size, before=request.before, newest_first=True)
    page = older.rows
    return BatchPage(
        page, page[-1].batch_id if older.more else None, _newer_after(page, request.before, latest_batch_id)
    )


def _newer_after(page: list, before: int | None, latest_batch_id: int | None) -> int | None:
    """The "newer" link's ?after=: the newest batch shown (or that would be), None on the newest page."""
    if before is None:
        return None
    newest_shown = page[0].batch_id if page else before - 1
    if latest_batch_id is not None and newest_shown >= latest_batch_id:
        return None
    return newest_shown


def _page_after(batches: QuerySet, after: int, size: int) -> BatchPage:
    newer = read_past(batches, key="batch_id", limit=size, after=after)
    page = newer.rows[::-1]
    return BatchPage(page, page[-1].batch_id if page else after + 1, page[0].batch_id if newer.more else None)


def batch_id_or_none(raw: str | None) -> int | None:
    """A batch id from a query parameter, or None when it is absent or not a non-negative integer."""
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)
