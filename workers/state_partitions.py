"""StatePartition rows: written by the full pass (workers.inspection) and by the state-scan chunks
(workers.state_fanout), in a few queries whatever the number of partitions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from django.db.models import Sum

from dashboards.models import Checkpoint, StatePartition
from workers.checkpoint.statesummary import StatePartitionSummary

# The figures a listing gives (VERSION_FIGURES: what a store's files give at its newest version;
# FILE_FIGURES adds where the store is, which following it from version to version does not
# change), and those counting the rows gives.
VERSION_FIGURES = (
    "latest_version",
    "earliest_version",
    "snapshot_version",
    "delta_chain",
    "load_files",
    "load_bytes",
    "bytes_on_disk",
    "uncommitted_versions",
)
FILE_FIGURES = ("provider", "path", *VERSION_FIGURES)
ROW_FIGURES = ("rows", "rows_version", "note", "variables")
KEY = ("checkpoint", "operator", "partition", "store")


def store_state_partitions(
    checkpoint: Checkpoint, partitions: Iterable[StatePartitionSummary], now: datetime, *, with_rows: bool = True
) -> list[tuple[int, int, str]]:
    """Upsert one row per state store directory; return their (operator, partition, store) keys.

    Without ``with_rows`` the row figures of existing rows are left as they are (their counting
    was handed to workers; a new row starts with none).
    """
    figures = FILE_FIGURES + ROW_FIGURES if with_rows else FILE_FIGURES
    rows = [_partition_row(checkpoint, summary, now, figures) for summary in partitions]
    fields = [*figures, "updated_at", "maintenance_probed_version"]
    StatePartition.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=KEY, update_fields=fields, batch_size=500
    )
    return [(row.operator, row.partition, row.store) for row in rows]


def _partition_row(
    checkpoint: Checkpoint, summary: StatePartitionSummary, now: datetime, figures: tuple[str, ...]
) -> StatePartition:
    return StatePartition(
        checkpoint=checkpoint,
        operator=summary.operator,
        partition=summary.partition,
        store=summary.store,
        updated_at=now,
        # The listing saw every snapshot up to here: probes for maintenance start from it.
        maintenance_probed_version=summary.latest_version,
        **{name: partition_figure(summary, name) for name in figures},
    )


def partition_figure(summary: StatePartitionSummary, name: str) -> Any:
    """The summary's figure as the model stores it: variables as a list of JSON objects."""
    if name == "variables":
        return [asdict(figures) for figures in summary.variables]
    return getattr(summary, name)


def delete_state_partitions_except(checkpoint: Checkpoint, kept: Iterable[tuple[int, int, str]]) -> None:
    """Drop the rows of store directories that are gone."""
    kept = set(kept)
    existing = checkpoint.state_partitions.values_list("pk", "operator", "partition", "store")
    gone = [pk for pk, *key in existing if tuple(key) not in kept]
    if gone:
        StatePartition.objects.filter(pk__in=gone).delete()


def refresh_state_totals(checkpoint: Checkpoint) -> None:
    """Sum the partitions' rows and bytes onto the checkpoint (the list sorts and filters by them)."""
    totals = checkpoint.state_partitions.aggregate(rows=Sum("rows"), bytes=Sum("bytes_on_disk"))
    providers = sorted(set(checkpoint.state_partitions.values_list("provider", flat=True)))
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        state_rows=totals["rows"], state_bytes=totals["bytes"], state_providers=",".join(providers)
    )


def stored_state_commits(checkpoint: Checkpoint, batch_ids: range | None = None) -> dict[int, SimpleNamespace]:
    """Batch id -> the commit's stateUniqueIds (RocksDB checkpoint format 2), as the library reads them;
    of the batches in ``batch_ids`` only, when given."""
    batches = checkpoint.batches.filter(commit_metadata__has_key="stateUniqueIds")
    if batch_ids is not None:
        batches = batches.filter(batch_id__gte=batch_ids.start, batch_id__lt=batch_ids.stop)
    rows = batches.values_list("batch_id", "commit_metadata")
    return {
        batch_id: SimpleNamespace(state_unique_ids={int(op): ids for op, ids in metadata["stateUniqueIds"].items()})
        for batch_id, metadata in rows
    }
