"""The checkpoint list: every registered query with its health status, searched, filtered and sorted.

The status of every checkpoint is assessed on each request (the health model depends on the
time), once per row, from one query of stored figures (CheckpointQuerySet.status_list_rows): the
counts per status, the filters and the sorts all need every row. The rows are plain dicts, not
model instances: at 1,000 checkpoints building instances cost more than the query
(bench/list_at_scale.py, docs/benchmarks.md). The request's search, filters and sort live in the
URL (ListRequest), so a filtered list can be shared and survives the htmx refresh.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import urlsplit

from dashboards.health.query_status import PRECEDENCE, QueryStatus, State, Thresholds, assess
from dashboards.models.status_facts import status_facts_of

PROVIDERS = ("hdfs", "rocksdb")
# Sort keys by URL name; a leading "-" in ?sort= sorts descending. None sorts last either way.
SORT_KEYS: dict[str, Callable] = {
    "status": lambda row: (PRECEDENCE[row.status.state], row.checkpoint["name"].lower()),
    "name": lambda row: row.checkpoint["name"].lower(),
    "latest_batch": lambda row: row.checkpoint["latest_batch_at"],
    "duration": lambda row: row.checkpoint["recent_batch_duration_ms"],
    "input_rate": lambda row: row.checkpoint["recent_input_rate"],
    "behind_head": lambda row: row.checkpoint["recent_offsets_behind"],
    "state_size": lambda row: row.checkpoint["state_bytes"],
    "findings": lambda row: (
        (row.checkpoint["finding_error_count"], row.checkpoint["finding_warning_count"]) if row.has_findings else None
    ),
}
DEFAULT_SORT = "status"


@dataclass(frozen=True, slots=True)
class ListRequest:
    """What the URL asks of the list: ?q=&status=&provider=&scheme=&findings=1&sort=-latest_batch."""

    search: str = ""
    status: str = ""
    provider: str = ""
    scheme: str = ""
    has_findings: bool = False
    sort: str = DEFAULT_SORT
    descending: bool = False

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> ListRequest:
        """Read the parameters; an unknown status, provider or sort is ignored rather than an error."""
        sort = query.get("sort", "")
        descending = sort.startswith("-")
        sort = sort.removeprefix("-")
        status = query.get("status", "")
        provider = query.get("provider", "")
        return cls(
            search=query.get("q", "").strip()[:200],
            status=status if State.from_slug(status) else "",
            provider=provider if provider in PROVIDERS else "",
            scheme=query.get("scheme", "").strip().lower()[:20],
            has_findings=query.get("findings") == "1",
            sort=sort if sort in SORT_KEYS else DEFAULT_SORT,
            descending=descending and sort in SORT_KEYS,
        )

    def as_query(self, **changes) -> dict[str, str]:
        """The URL parameters of this request with ``changes``, defaults left out."""
        request = replace(self, **changes)
        params = {
            "q": request.search,
            "status": request.status,
            "provider": request.provider,
            "scheme": request.scheme,
            "findings": "1" if request.has_findings else "",
            "sort": ("-" if request.descending else "") + request.sort
            if request.sort != DEFAULT_SORT or request.descending
            else "",
        }
        return {name: value for name, value in params.items() if value}

    def sorted_by(self, key: str) -> dict[str, str]:
        """The parameters that sort by ``key``: ascending first, descending when already ascending."""
        return self.as_query(sort=key, descending=self.sort == key and not self.descending)

    @property
    def is_filtered(self) -> bool:
        return bool(self.search or self.status or self.provider or self.scheme or self.has_findings)


@dataclass(slots=True)
class ListRow:
    checkpoint: dict  # a row of CheckpointQuerySet.status_list_rows
    status: QueryStatus
    scheme: str
    copies: list[dict] = field(default_factory=list)

    @property
    def has_findings(self) -> bool:
        return bool(self.checkpoint["finding_error_count"] or self.checkpoint["finding_warning_count"])

    @property
    def providers(self) -> list[str]:
        return [name for name in self.checkpoint["state_providers"].split(",") if name]


@dataclass(frozen=True, slots=True)
class ListResult:
    rows: list[ListRow]
    status_counts: list[tuple[State, int]]
    matching: int  # rows that pass every filter but the status one
    total: int
    schemes: list[str]


def build_list(
    checkpoints: Iterable[dict], request: ListRequest, *, now: datetime, thresholds: Thresholds
) -> ListResult:
    """Assess every checkpoint (rows of CheckpointQuerySet.status_list_rows), flag copies, filter
    and sort as ``request`` asks.

    The counts per status are of the rows that pass every filter but the status one, so each
    count is what following it shows.
    """
    rows = [_assessed_row(checkpoint, now=now, thresholds=thresholds) for checkpoint in checkpoints]
    _flag_copies(rows)
    matching = [row for row in rows if _matches(row, request)]
    counts = Counter(row.status.state for row in matching)
    shown = [row for row in matching if not request.status or row.status.slug == request.status]
    return ListResult(
        rows=_sorted(shown, request),
        status_counts=[(state, counts[state]) for state in State if counts[state]],
        matching=len(matching),
        total=len(rows),
        schemes=sorted({row.scheme for row in rows}),
    )


def _assessed_row(checkpoint: dict, *, now: datetime, thresholds: Thresholds) -> ListRow:
    return ListRow(
        checkpoint,
        assess(status_facts_of(checkpoint), now=now, thresholds=thresholds),
        scheme_of(checkpoint["url"]),
    )


def scheme_of(url: str) -> str:
    """The storage scheme of a registered URL: "file" for a local path."""
    scheme = urlsplit(url).scheme
    return scheme.lower() if len(scheme) > 1 else "file"


def _flag_copies(rows: list[ListRow]) -> None:
    """Link the rows whose checkpoints carry the same query id (a copy, a restored backup)."""
    by_query = defaultdict(list)
    for row in rows:
        if row.checkpoint["query_id"] is not None:
            by_query[row.checkpoint["query_id"]].append(row)
    for same in by_query.values():
        for row in same if len(same) > 1 else ():
            row.copies = [other.checkpoint for other in same if other is not row]


def _matches(row: ListRow, request: ListRequest) -> bool:
    checkpoint = row.checkpoint
    if request.provider and request.provider not in row.providers:
        return False
    if request.scheme and row.scheme != request.scheme:
        return False
    if request.has_findings and not row.has_findings:
        return False
    if request.search:
        haystack = [checkpoint["name"], checkpoint["url"]]
        if checkpoint["query_uuid"] is not None:
            haystack += [str(checkpoint["query_uuid"]), checkpoint["query_name"]]
        return any(request.search.lower() in text.lower() for text in haystack)
    return True


def _sorted(rows: list[ListRow], request: ListRequest) -> list[ListRow]:
    """Sort by the request's key; rows without a value go last whichever the direction, by name."""
    key = SORT_KEYS[request.sort]
    keyed = [(key(row), row) for row in rows]
    present = [(value, row) for value, row in keyed if value is not None]
    absent = sorted((row for value, row in keyed if value is None), key=SORT_KEYS["name"])
    by_key_then_name = sorted(
        present, key=lambda pair: (pair[0], pair[1].checkpoint["name"].lower()), reverse=request.descending
    )
    return [row for _, row in by_key_then_name] + absent
