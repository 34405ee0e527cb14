"""The fsspec options a worker passes to CheckpointStorage, taken from settings, never from rows.

A Checkpoint row holds only its URL. What a backend needs besides (the endpoint of an
S3-compatible store) comes from ``CKPTWEB_S3_*`` settings, and credentials from the backend's own
chain (for s3fs: boto's AWS_* variables, ~/.aws files, instance roles), so no secret is ever
stored in the database or shown in the admin.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from workers.checkpoint.storage.checkpointstorage import REMOTE_READS_IN_FLIGHT, CheckpointStorage

# A registration form looks the path up while the person waits: one attempt, a few seconds at most.
REGISTRATION_CHECK_TIMEOUT_SECONDS = 5


def storage_options_for(
    url: str, *, timeout_seconds: float | None = None, max_attempts: int | None = None
) -> dict[str, Any]:
    """Return the fsspec storage options for a checkpoint URL (empty for local paths).

    Timeout and attempts default to CKPTWEB_STORAGE_TIMEOUT_SECONDS and CKPTWEB_STORAGE_MAX_ATTEMPTS.
    """
    if not url.lower().startswith(("s3://", "s3a://")):
        return {}
    # Bounded waits: an unreachable or stalled store fails a sync in seconds (a SyncIssue naming
    # the file), not after botocore's default minute-long timeouts and retries.
    timeout = settings.STORAGE_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
    options: dict[str, Any] = {
        "config_kwargs": {
            "connect_timeout": timeout,
            "read_timeout": timeout,
            "retries": {"max_attempts": max_attempts or settings.STORAGE_MAX_ATTEMPTS, "mode": "standard"},
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


def open_storage_for_check(url: str) -> CheckpointStorage:
    """Open a URL under the allowed roots for a registration's look-up: one attempt, short timeouts.

    A failure is told to the person registering (who can retry), not retried behind their back.
    """
    timeout = min(settings.STORAGE_TIMEOUT_SECONDS, REGISTRATION_CHECK_TIMEOUT_SECONDS)
    options = storage_options_for(url, timeout_seconds=timeout, max_attempts=1)
    return CheckpointStorage(url, allowed_roots=settings.CHECKPOINT_ROOTS, storage_options=options)
