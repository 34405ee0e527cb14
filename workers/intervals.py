"""When a periodic part of a sync is due again: one rule for the probe, walk, reconcile and state follow."""

from __future__ import annotations

from datetime import datetime, timedelta


def interval_passed(last: datetime | None, now: datetime, seconds: float) -> bool:
    """True when it never ran (``last`` is None) or ran at least ``seconds`` before ``now``."""
    return last is None or now - last >= timedelta(seconds=seconds)
