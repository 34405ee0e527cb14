"""The state variables the list page shows under a transformWithState query's state size.

Per checkpoint on the page: its processors' own variables (ValueState, ListState, MapState)
summed over partitions at the version the last full pass counted them at (the committed
version), and how many of Spark's own families (timers, TTL indexes, counters, a join's key
counts) the stores hold. A join with column families (state format 3, 4) shows its input rows.
One query for the whole page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from dashboards.models import StatePartition
from workers.checkpoint.statevariabletotals import StoreVariableTotal, sum_state_variables


@dataclass(slots=True)
class CheckpointVariables:
    user: list[StoreVariableTotal] = field(default_factory=list)
    spark_families: int = 0


def page_state_variables(checkpoint_ids: Iterable[int]) -> dict[int, CheckpointVariables]:
    """checkpoint id -> its state variables; checkpoints without column-family stores are absent."""
    found = {}
    for checkpoint_id, parts in _partitions_with_variables(checkpoint_ids).items():
        totals = sum_state_variables(parts)
        found[checkpoint_id] = CheckpointVariables(
            user=[t for t in totals if not t.internal], spark_families=sum(1 for t in totals if t.internal)
        )
    return found


def _partitions_with_variables(checkpoint_ids: Iterable[int]) -> dict[int, list[StatePartition]]:
    """checkpoint id -> its state partitions that have state variables."""
    partitions: dict[int, list[StatePartition]] = {}
    rows = (
        StatePartition.objects.filter(checkpoint_id__in=list(checkpoint_ids))
        .exclude(variables=[])
        .only("checkpoint_id", "operator", "store", "partition", "rows_version", "variables")
    )
    for partition in rows:
        partitions.setdefault(partition.checkpoint_id, []).append(partition)
    return partitions
