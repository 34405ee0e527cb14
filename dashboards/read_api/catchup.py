"""Catch-up syncs asked for by API clients that know a newer batch than the server.

Many clients may report the same newer batch at once; one sync serves them all. So a catch-up
is queued only when no worker holds the checkpoint's sync lease (a running sync reads the new
files anyway), and at most once per sync interval: an atomic ``cache.add`` marks it as asked
for, and by the time the mark expires the periodic sync has come round regardless.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.core.cache import cache
from django.db import transaction

from workers import tasks

from ..models import Checkpoint
from ..queueing import BROKER_ERRORS

logger = logging.getLogger(__name__)


def catch_up_key(checkpoint_id: int) -> str:
    """The cache key that marks a catch-up of this checkpoint as already queued."""
    return f"read-api:catch-up:{checkpoint_id}"


def request_catch_up(checkpoint: Checkpoint, *, now: datetime) -> bool:
    """Queue a sync of ``checkpoint`` once the transaction commits; False when one is under way or asked for."""
    if checkpoint.sync_lease_until is not None and checkpoint.sync_lease_until > now:
        return False
    if not cache.add(catch_up_key(checkpoint.pk), now.isoformat(), timeout=checkpoint.sync_interval_seconds):
        return False
    transaction.on_commit(lambda: _send_sync(checkpoint.pk))
    return True


def _send_sync(checkpoint_id: int) -> None:
    # A broker outage must not fail a read: the periodic sync that beat sends catches up later.
    try:
        tasks.sync_checkpoint.apply_async(args=(checkpoint_id,))
    except BROKER_ERRORS as exc:
        logger.warning("catch-up sync of checkpoint %s not sent: the broker did not answer: %s", checkpoint_id, exc)
