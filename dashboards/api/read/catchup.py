"""Catch-up syncs asked for by API clients that know a newer batch than the server.

Many clients may report the same newer batch at once; one sync serves them all. So a catch-up
is queued only when no worker holds the checkpoint's sync lease (a running sync reads the new
files anyway), and at most once per sync interval: an atomic ``cache.add`` marks it as asked
for, and by the time the mark expires the periodic sync has come round regardless.
"""

from __future__ import annotations

from datetime import datetime

from django.core.cache import cache
from django.db import transaction

from dashboards.models import Checkpoint
from dashboards.queueing import send_task
from dashboards.task_names import SYNC_CHECKPOINT


def catch_up_key(checkpoint_id: int) -> str:
    """The cache key that marks a catch-up of this checkpoint as already queued."""
    return f"read-api:catch-up:{checkpoint_id}"


def request_catch_up(checkpoint: Checkpoint, *, now: datetime) -> bool:
    """Queue a sync of ``checkpoint`` once the transaction commits; False when one is under way or asked for."""
    if checkpoint.sync_lease_until is not None and checkpoint.sync_lease_until > now:
        return False
    if not cache.add(catch_up_key(checkpoint.pk), now.isoformat(), timeout=checkpoint.sync_interval_seconds):
        return False
    # A broker outage must not fail a read: send_task logs it, and the periodic sync catches up later.
    transaction.on_commit(lambda: send_task(SYNC_CHECKPOINT, checkpoint.pk))
    return True
