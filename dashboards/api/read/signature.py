"""What the server has for a checkpoint, in one comparable value.

The signature hashes the figures a sync writes when it stores a new batch or commit, or when a
reconcile notices that Spark purged old entries. It leaves out ``last_synced_at``: a sync that
found nothing new must not make clients think the view changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from dashboards.models import Checkpoint

SIGNATURE_HEX_CHARS = 32


@dataclass(frozen=True, slots=True)
class Freshness:
    """How far the server's view of one checkpoint goes."""

    latest_batch_id: int | None
    latest_committed_batch_id: int | None
    signature: str
    is_current: bool

    def as_json(self) -> dict:
        return {
            "latest_batch_id": self.latest_batch_id,
            "latest_committed_batch_id": self.latest_committed_batch_id,
            "signature": self.signature,
            "current": self.is_current,
        }

    def as_headers(self) -> dict[str, str]:
        latest = "" if self.latest_batch_id is None else str(self.latest_batch_id)
        return {"X-Ckptweb-Latest-Batch": latest, "X-Ckptweb-Signature": self.signature}


def checkpoint_signature(checkpoint: Checkpoint) -> str:
    """Return a stable hash of the synced figures of ``checkpoint`` (hex, SIGNATURE_HEX_CHARS long)."""
    figures = [
        checkpoint.pk,
        checkpoint.url,
        None if checkpoint.query_id is None else str(checkpoint.query.query_id),
        checkpoint.latest_batch_id,
        checkpoint.latest_committed_batch_id,
        # A late commit of an older batch leaves the latest ids alone but lowers this count.
        checkpoint.uncommitted_batch_count,
        checkpoint.earliest_stored_batch_id,
    ]
    digest = hashlib.sha256(json.dumps(figures).encode()).hexdigest()
    return digest[:SIGNATURE_HEX_CHARS]


def is_behind(checkpoint: Checkpoint, known_latest_batch: int | None) -> bool:
    """Tell whether a client knows a newer batch than the server has stored."""
    if known_latest_batch is None:
        return False
    return checkpoint.latest_batch_id is None or known_latest_batch > checkpoint.latest_batch_id


def freshness_of(checkpoint: Checkpoint, known_latest_batch: int | None = None) -> Freshness:
    return Freshness(
        latest_batch_id=checkpoint.latest_batch_id,
        latest_committed_batch_id=checkpoint.latest_committed_batch_id,
        signature=checkpoint_signature(checkpoint),
        is_current=not is_behind(checkpoint, known_latest_batch),
    )
