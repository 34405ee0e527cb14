"""A source's offset, as the offset log holds it (a JSON string), in words for the batch table.

Spark writes each source's offset as that source's own JSON: Kafka ``{"topic": {"0": 123}}``,
a file source ``{"logOffset": 5}``, the rate sources ``{"offset": 5, "timestamp": ...}`` (or a
bare number), Delta ``{"sourceVersion": 1, "reservoirVersion": 7, "index": -1, ...}``. The table
shows what tells batches apart, and the exact text stays on hover; anything else is shown as
written.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

# Epoch milliseconds in this range are shown as a time (2001 to 2286).
_EPOCH_MS = range(10**12, 10**13)
MAX_PARTS = 4


def describe_offset(raw: str | None) -> str:
    """The offset in words; "-" for a source with no offset in that batch (Spark's "-")."""
    if raw is None:
        return "-"
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(value, dict):
        return str(value)
    parts = [_describe_field(key, item) for key, item in value.items()]
    more = f" (+{len(parts) - MAX_PARTS} more)" if len(parts) > MAX_PARTS else ""
    return ", ".join(parts[:MAX_PARTS]) + more


def _describe_field(key: str, item: Any) -> str:
    if isinstance(item, dict) and item and all(isinstance(v, int) for v in item.values()):
        # A Kafka topic: partition -> next offset to read.
        offsets = list(item.values())
        count = len(offsets)
        span = f"{min(offsets):,}" if min(offsets) == max(offsets) else f"{min(offsets):,}–{max(offsets):,}"
        return f"{key}: {count} partition{'s' if count != 1 else ''} at {span}"
    if isinstance(item, int) and not isinstance(item, bool) and item in _EPOCH_MS and "time" in key.lower():
        return f"{key} {datetime.fromtimestamp(item / 1000, UTC):%Y-%m-%d %H:%M:%S}"
    if isinstance(item, (dict, list)):
        return f"{key} {json.dumps(item, separators=(',', ':'))}"
    return f"{key} {item:,}" if isinstance(item, int) and not isinstance(item, bool) else f"{key} {item}"
