"""Text a page builds from rows that only a sync changes, cached under a version of those rows.

A version is a tuple of values that come with the checkpoint's own row (no extra query) and move
whenever the rows behind the text move: a cached text is never served for another version, so
nothing has to be invalidated. The timeout bounds what a version cannot see.

Why: under 50 concurrent users on 2 cores a request's latency is about 50 x its CPU time / 2
(docs/benchmarks.md, P4), and rendering the 50-row batch table or building a 2,000-point Plotly
figure was most of that CPU; an open query page asks for both again every 10 to 30 s.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

from dashboards.models import Checkpoint

FRAGMENT_CACHE_SECONDS = 300
Value = TypeVar("Value")


def checkpoint_identity(checkpoint: Checkpoint) -> tuple:
    """The checkpoint, with created_at as well as the pk: a pk may be reused (a restored dump)."""
    return checkpoint.pk, checkpoint.created_at.timestamp()


def synced_version(checkpoint: Checkpoint) -> tuple:
    """What moves whenever a sync stores anything: every sync that writes rows sets last_synced_at
    in the same transaction (workers.sync), and only syncs write batch rows."""
    synced = checkpoint.last_synced_at.timestamp() if checkpoint.last_synced_at else None
    return (*checkpoint_identity(checkpoint), synced, checkpoint.latest_batch_id)


def cached_text(kind: str, version: tuple, build: Callable[[], str]) -> str:
    """``build()``'s text, built once per ``kind`` and ``version`` and shared by every web process."""
    return cached_value(kind, version, build)


def cached_value(kind: str, version: tuple, build: Callable[[], Value]) -> Value:
    """``build()``'s value (anything the cache can pickle, None included), built once per ``kind``
    and ``version`` and shared by every web process."""
    digest = hashlib.blake2b(repr((_release(), version)).encode(), digest_size=16).hexdigest()
    return cache.get_or_set(f"{kind}:{digest}", build, FRAGMENT_CACHE_SECONDS)


@functools.cache
def _release() -> str:
    """The code of this package, whose classes the cached values are, and the partials the cached
    texts are rendered from: what another release stored (a rolling deploy shares the cache) is
    never read back into classes or pages that changed."""
    digest = hashlib.blake2b(digest_size=8)
    partials = Path(settings.BASE_DIR) / "templates" / "dashboards" / "partials"
    for source in [*sorted(Path(__file__).parent.glob("*.py")), *sorted(partials.glob("*.html"))]:
        digest.update(source.read_bytes())
    return digest.hexdigest()
