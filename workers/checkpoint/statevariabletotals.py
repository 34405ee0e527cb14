"""The state variables of transformWithState stores, summed over partitions.

Each partition of a store with column families carries its variables' figures at its
``rows_version`` (statevariables.StateVariableFigures; the dashboard's StatePartition rows keep
them as JSON objects); the state panel, the list page and ``inspect_checkpoint --json`` show per
operator and store one line per variable, user variables first, then Spark's own families
(timers, TTL, counters).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from .statevariables import LIST_KINDS


@dataclass(slots=True)
class StoreVariableTotal:
    """One variable of one (operator, store) over its partitions; ``versions`` they were read at."""

    operator: int
    store: str
    name: str
    kind: str
    internal: bool
    rows: int = 0
    values: int = 0
    bytes: int = 0
    partitions: int = 0
    versions: tuple[int, ...] = ()
    # Batches whose schema file added the variable or changed its schema (the first partition's).
    schema_batches: tuple[int, ...] = ()

    @property
    def is_list(self) -> bool:
        return self.kind in LIST_KINDS

    def as_json(self) -> dict[str, Any]:
        """The figures ``inspect_checkpoint --json`` prints for the variable."""
        return {
            "name": self.name,
            "kind": self.kind,
            "internal": self.internal,
            "rows": self.rows,
            "values": self.values,
            "bytes": self.bytes,
            "partitions": self.partitions,
            "versions": list(self.versions),
        }


def sum_state_variables(partitions: Iterable[Any]) -> list[StoreVariableTotal]:
    """Add up the ``variables`` of partitions per (operator, store, variable).

    A partition is a StatePartition row or a statesummary.StatePartitionSummary.
    """
    totals: dict[tuple[int, str, str], StoreVariableTotal] = {}
    order: dict[tuple[int, str, str], int] = {}
    for partition in partitions:
        for index, figures in enumerate(_as_dicts(partition.variables)):
            key = (partition.operator, partition.store, figures["name"])
            total = totals.get(key)
            if total is None:
                total = totals[key] = StoreVariableTotal(
                    partition.operator,
                    partition.store,
                    figures["name"],
                    figures["kind"],
                    figures["internal"],
                    schema_batches=tuple(figures.get("schema_batches", ())),
                )
                order[key] = index
            total.rows += figures["rows"]
            total.values += figures["values"]
            total.bytes += figures["bytes"]
            total.partitions += 1
            if partition.rows_version is not None and partition.rows_version not in total.versions:
                total.versions = tuple(sorted((*total.versions, partition.rows_version)))
    return sorted(
        totals.values(), key=lambda t: (t.operator, t.store, t.internal, order[(t.operator, t.store, t.name)])
    )


def _as_dicts(variables: Any) -> list[dict[str, Any]]:
    return [asdict(figures) if is_dataclass(figures) else figures for figures in variables or ()]
