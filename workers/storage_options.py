"""The fsspec options a worker passes to CheckpointStorage, taken from settings, never from rows.

A Checkpoint row holds only its URL. What a backend needs besides (the endpoint of an
S3-compatible store) comes from ``CKPTWEB_S3_*`` settings, and credentials from the backend's own
chain (for s3fs: boto's AWS_* variables, ~/.aws files, instance roles), so no secret is ever
stored in the database or shown in the admin.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings

from workers.checkpoint import CheckpointStorage
from workers.checkpoint.storage import REMOTE_READS_IN_FLIGHT


def storage_options_for(url: str) -> dict[str, Any]:
    """Return the fsspec storage options for a checkpoint URL (empty for local paths)."""
    if not url.lower().startswith(("s3://", "s3a://")):
        return {}
    # Bounded waits: an unreachable or stalled store fails a sync in seconds (a SyncIssue naming
    # the file), not after botocore's default minute-long timeouts and retries.
    timeout = settings.STORAGE_TIMEOUT_SECONDS
    options: dict[str, Any] = {
        "config_kwargs": {
            "connect_timeout": timeout, "read_timeout": timeout,
            "retries": {"max_attempts": settings.STORAGE_MAX_ATTEMPTS, "mode": "standard"},
            # A connection for each read a first sync keeps in flight (CheckpointStorage.read_many).
            "max_pool_connections": REMOTE_READS_IN_FLIGHT,
        },
    }
    if settings.S3_ENDPOINT_URL:
        options["endpoint_url"] = settings.S3_ENDPOINT_URL
    return options


def open_storage(url: str) -> CheckpointStorage:
    """Open a checkpoint URL under the allowed roots, with the options its backend needs."""
    return CheckpointStorage(url, allowed_roots=settings.CHECKPOINT_ROOTS, storage_options=storage_options_for(url))
