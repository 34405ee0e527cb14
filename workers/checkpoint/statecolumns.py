"""The columns of decoded state rows: the fields of the store's key and value schemas.

Spark's state reader (``spark.read.format("statestore")``) returns a row as a ``key`` struct and a
``value`` struct with the schema's own field names; a nested struct (an aggregation's ``window``)
is shown here as one column per leaf, named with dots (``window.start``), in schema order. A join's
or a deduplication's key fields are named by position in the schema Spark writes (``field0`` is the
first key column; SymmetricHashJoinStateManager), and its reader keeps those names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .sparktypes import StructType

POSITIONAL_NAME = re.compile(r"field\d+")


def column_names(schema: StructType, prefix: str = "") -> list[str]:
    """The leaf fields of ``schema`` in order, nested struct fields named "outer.inner"."""
    names = []
    for field in schema.fields:
        name = f"{prefix}{field.name}"
        if isinstance(field.data_type, StructType):
            names += column_names(field.data_type, f"{name}.")
        else:
            names.append(name)
    return names


def column_values(row: Mapping[str, Any] | None, names: Sequence[str]) -> list[Any]:
    """The values of a decoded row (nested dicts) under the dotted ``names``; None where a struct is null."""
    return [_leaf(row, name.split(".")) for name in names]


def has_positional_names(names: Sequence[str]) -> bool:
    """Tell whether Spark named these key columns by position (a join's field0, field1, ...)."""
    return any(POSITIONAL_NAME.fullmatch(name) for name in names)


def _leaf(row: Mapping[str, Any] | None, path: list[str]) -> Any:
    for part in path:
        if not isinstance(row, Mapping):
            return None
        row = row.get(part)
    return row
