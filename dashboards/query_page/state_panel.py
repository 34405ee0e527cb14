"""The query page's state panel: its tables rendered once per version of the partitions' rows.

Why: the panel lists every state store directory (a stream-stream join over 200 shuffle
partitions has 800), and rendering those rows with their store totals and state variables was
most of the page's CPU: 174 ms a request at 800 partitions, 26 ms once cached (docs/benchmarks.md).
One aggregate query tells whether the rows moved; what it cannot see, the fragment timeout bounds.

What stays per request: the "as of" line and the scan's progress (both say how long ago), read
by the view beside this.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Max, QuerySet, Sum
from django.template.loader import render_to_string

from dashboards.models import Checkpoint, StatePartition
from dashboards.models.precompiled import PrecompiledValues
from dashboards.query_page.fragments import cached_value, checkpoint_identity
from workers.checkpoint.statesummary import summarize_stores
from workers.checkpoint.statevariabletotals import sum_state_variables

# Every writer of a StatePartition row sets updated_at to its pass's time (workers.state_partitions,
# workers.state_follow, workers.probe_pass) and a removal changes the count; the sums catch a write
# stamped no later than the newest row (a worker whose clock lags another's).
ROWS_VERSION_FIGURES = {
    # Named apart from the fields: an aggregate named as a field hides it from the ones after.
    "partition_count": Count("pk"),
    "newest_write": Max("updated_at"),
    "newest_version": Max("latest_version"),
    "newest_pk": Max("pk"),
    "version_sum": Sum("latest_version"),
    "rows_version_sum": Sum("rows_version"),
    "snapshot_sum": Sum("snapshot_version"),
    "chain_sum": Sum("delta_chain"),
    "row_sum": Sum("rows"),
    "byte_sum": Sum("bytes_on_disk"),
}


@dataclass(frozen=True, slots=True)
class StateTables:
    """The panel's rendered tables (what it says of the rows, not of when they were read)."""

    stores_html: str  # per store, its state variables, the uncommitted versions a restart rewrites
    partitions_html: str  # every partition, under a <details>


@dataclass(frozen=True, slots=True)
class StatePanel:
    tables: StateTables
    read_at: datetime | None  # the newest row's write
    latest_version: int | None  # the newest state version of any partition


@dataclass(frozen=True, slots=True)
class StateRowsVersion:
    """What moves whenever a worker writes or removes a state store row of the checkpoint."""

    key: tuple
    partitions: int
    newest_write: datetime | None
    newest_version: int | None


def _rows_figures(checkpoint_id: int) -> QuerySet:
    rows = StatePartition.objects.filter(checkpoint_id=checkpoint_id).order_by().values("checkpoint_id")
    return rows.annotate(**ROWS_VERSION_FIGURES).values(*ROWS_VERSION_FIGURES)


# Compiled once: building the aggregate cost the ORM more CPU than PostgreSQL took to run it.
ROWS_FIGURES_OF_ONE = PrecompiledValues(_rows_figures)
_NO_ROWS = {name: 0 if name == "partition_count" else None for name in ROWS_VERSION_FIGURES}


def state_rows_version(checkpoint: Checkpoint) -> StateRowsVersion:
    """One aggregate query over the checkpoint's state store rows."""
    rows = ROWS_FIGURES_OF_ONE.rows(checkpoint.pk)
    # PostgreSQL sums integers as numeric: plain ints, so that the key's text is the same on SQLite.
    figures = {
        name: int(value) if isinstance(value, Decimal) else value for name, value in (rows or [_NO_ROWS])[0].items()
    }
    key = (*checkpoint_identity(checkpoint), *figures.values())
    return StateRowsVersion(key, figures["partition_count"], figures["newest_write"], figures["newest_version"])


def state_panel(checkpoint: Checkpoint, version: StateRowsVersion | None = None) -> StatePanel | None:
    """The panel of a checkpoint with state store rows, None without any (one aggregate query
    when ``version``, its rows' version, is not given)."""
    version = state_rows_version(checkpoint) if version is None else version
    if not version.partitions:
        return None
    tables = cached_value("state-tables", version.key, lambda: _render_tables(checkpoint))
    return StatePanel(tables, version.newest_write, version.newest_version)


def _render_tables(checkpoint: Checkpoint) -> StateTables:
    partitions = list(checkpoint.state_partitions.for_panel())
    stores_context = {"state_stores": summarize_stores(partitions), "state_variables": sum_state_variables(partitions)}
    partitions_context = {"checkpoint": checkpoint, "state_partitions": partitions}
    return StateTables(
        render_to_string("dashboards/partials/state_tables.html", stores_context),
        render_to_string("dashboards/partials/state_partition_table.html", partitions_context),
    )
