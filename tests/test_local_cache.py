"""The embedded default's per-process cache (ckptweb/local_cache.py) stays within its byte budget."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from ckptweb.local_cache import BoundedLocMemCache
from fixture_paths import REPO_DIR
from worker_process import wait_for

BUDGET_BYTES = 100_000
TEXT = "x" * 9_000  # about 9 KB pickled: the budget holds 11 of them, LocMemCache's count bound 300


@pytest.fixture
def cache(request):
    """A cache of its own (LocMemCache shares its store by name), empty at start."""
    cache = BoundedLocMemCache(request.node.name, {"OPTIONS": {"MAX_BYTES": BUDGET_BYTES}})
    cache.clear()
    return cache


def test_the_cache_keeps_its_pickled_values_within_the_budget(cache):
    for number in range(100):
        cache.set(f"fragment:{number}", TEXT)

    assert cache.stored_bytes() <= BUDGET_BYTES
    assert cache.stored_bytes() > BUDGET_BYTES - 2 * len(pickle.dumps(TEXT, pickle.HIGHEST_PROTOCOL))


def test_the_least_recently_used_entries_go_first(cache):
    for number in range(11):
        cache.set(f"fragment:{number}", TEXT)
    assert cache.get("fragment:0") == TEXT  # used again: now the most recent

    cache.set("fragment:new", TEXT)

    assert cache.get("fragment:0") == TEXT
    assert cache.get("fragment:new") == TEXT
    assert cache.get("fragment:1") is None


def test_an_expired_entry_is_dropped_at_a_later_store_without_being_asked_for(cache):
    counter_bytes = len(pickle.dumps(1, pickle.HIGHEST_PROTOCOL))
    cache.set("version:old", TEXT, timeout=0.01)

    def store_and_measure() -> bool:
        cache.set("counter", 1)
        return cache.stored_bytes() == counter_bytes

    wait_for(store_and_measure, "the expired entry to be dropped by a store", timeout=30)


def test_a_value_larger_than_the_budget_is_not_kept_nor_its_older_value(cache):
    cache.set("chart", "small")

    cache.set("chart", "x" * (BUDGET_BYTES + 1))

    assert cache.get("chart") is None
    assert cache.stored_bytes() == 0


def test_get_or_set_builds_once_and_serves_the_stored_value(cache):
    built = []

    def build() -> str:
        built.append(1)
        return "text"

    assert [cache.get_or_set("fragment", build), cache.get_or_set("fragment", build)] == ["text", "text"]
    assert built == [1]


def _embedded_default_caches(**env: str) -> subprocess.CompletedProcess:
    """The CACHES that ckptweb.settings gives a process without Redis, with ``env`` added."""
    environment = {k: v for k, v in os.environ.items() if k not in ("CKPTWEB_REDIS_URL", "CKPTWEB_DATABASE_URL")}
    command = [sys.executable, "-c", "from ckptweb import settings; print(settings.CACHES['default'])"]
    return subprocess.run(command, cwd=REPO_DIR, env={**environment, **env}, capture_output=True, text=True)


def test_the_embedded_default_uses_the_bounded_cache_with_ckptweb_local_cache_mb():
    answer = _embedded_default_caches(CKPTWEB_LOCAL_CACHE_MB="3")

    assert answer.stdout.strip() == str(
        {"BACKEND": "ckptweb.local_cache.BoundedLocMemCache", "OPTIONS": {"MAX_BYTES": 3 * 1024 * 1024}}
    )


def test_a_local_cache_size_that_is_not_a_whole_number_of_mb_is_refused_naming_the_variable():
    answer = _embedded_default_caches(CKPTWEB_LOCAL_CACHE_MB="0.5")

    assert answer.returncode != 0
    assert "CKPTWEB_LOCAL_CACHE_MB='0.5': use a whole number >= 1" in answer.stderr
