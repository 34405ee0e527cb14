"""The read API's paging: ``?after=<key>&limit=N`` and ``?from=&to=`` ranges, ascending, cut by
dashboards.keyset (the unique index of the key, ``(checkpoint, batch_id)`` for batches, answers
each page without counting what came before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from dashboards.keyset import filter_given, read_past

DEFAULT_PAGE_ROWS = 100
MAX_PAGE_ROWS = 1000


class QueryParams(serializers.Serializer):
    """Query parameters, each refused when given with no value.

    DRF reads form data, and so the query string, as HTML forms send it: "?after=" counts as no
    "after" at all. For an API that is a typo passed over in silence, so it is a 400 here.
    """

    def to_internal_value(self, data):
        empty = {name: ["expected a value, found none"] for name in self.fields if data.get(name) == ""}
        if empty:
            raise serializers.ValidationError(empty)
        return super().to_internal_value(data)


class FreshnessParams(QueryParams):
    """The query parameter of every answer about one checkpoint."""

    known_latest_batch = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="The newest batch id the client knows of; when the server has an older one it queues a catch-up sync "
        "and answers with current=false.",
    )


class KeysetParams(QueryParams):
    """The query parameters of every keyset-paged list."""

    after = serializers.IntegerField(
        required=False, help_text="Return rows whose key is greater than this (the `next` link sets it)."
    )
    limit = serializers.IntegerField(required=False, default=DEFAULT_PAGE_ROWS, min_value=1, max_value=MAX_PAGE_ROWS)


class PageParams(KeysetParams, FreshnessParams):
    """The query parameters of every list about one checkpoint."""

    def get_fields(self) -> dict[str, serializers.Field]:
        # "from" is a Python keyword, so the range bounds are added here under their URL names
        # and validated like every other parameter (an empty or non-integer value is refused).
        fields = super().get_fields()
        fields["from"] = serializers.IntegerField(
            required=False, source="start", help_text="Lowest key to return (inclusive)."
        )
        fields["to"] = serializers.IntegerField(
            required=False, source="end", help_text="Highest key to return (inclusive)."
        )
        return fields


@dataclass(frozen=True, slots=True)
class KeysetPage:
    rows: list[Any]
    next_after: int | None


def read_keyset_page(queryset: QuerySet, *, key: str, params: dict) -> KeysetPage:
    """Return the rows of ``queryset`` in ascending ``key`` order after ``params["after"]``, within
    ``from``..``to`` (both inclusive), at most ``params["limit"]`` of them."""
    in_range = filter_given(queryset, **{f"{key}__gte": params.get("start"), f"{key}__lte": params.get("end")})
    page = read_past(in_range, key=key, limit=params["limit"], after=params.get("after"))
    return KeysetPage(page.rows, getattr(page.rows[-1], key) if page.more else None)
