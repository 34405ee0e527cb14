"""Fixtures of the worker tests."""

from __future__ import annotations

import pytest

from worker_process import private_redis_server


@pytest.fixture
def private_redis():
    """A redis-server of the test's own (``worker_process.PrivateRedis``), to stop and start under a worker."""
    with private_redis_server() as redis:
        yield redis
