"""The per-process cache of the embedded default: Django's LocMemCache, bounded in bytes too.

LocMemCache bounds the number of entries (300), not their size, and keeps an expired entry until
it is asked for again or culled. The pages cache texts and series under versions that move with
every sync (dashboards/query_page/fragments.py, chart_series.py), up to hundreds of KB each, so a web worker
of the demo came to hold 300 of them, most for versions nobody would ask for again (issue 28).
Here each store first drops the expired entries, then the least recently used ones until the
pickled values fit in MAX_BYTES.
"""

from __future__ import annotations

import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache


class BoundedLocMemCache(LocMemCache):
    """LocMemCache whose pickled values take at most OPTIONS["MAX_BYTES"] bytes in all."""

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        self.max_bytes = int(params.get("OPTIONS", {})["MAX_BYTES"])

    def stored_bytes(self) -> int:
        """The size of the pickled values held now."""
        with self._lock:
            return sum(len(value) for value in self._cache.values())

    def _set(self, key, value, timeout=DEFAULT_TIMEOUT) -> None:
        # Called with the lock held, by set, add and get_or_set; incr replaces a number in place.
        if len(value) > self.max_bytes:
            self._delete(key)  # larger than the whole budget: not kept (an older value neither)
            return
        super()._set(key, value, timeout)
        self._drop_expired()
        held = sum(len(stored) for stored in self._cache.values())
        while held > self.max_bytes:
            oldest, dropped = self._cache.popitem()  # the end LocMemCache treats as least recently used
            del self._expire_info[oldest]
            held -= len(dropped)

    def _drop_expired(self) -> None:
        now = time.time()
        for key in [key for key, expiry in self._expire_info.items() if expiry is not None and expiry <= now]:
            self._delete(key)
