"""Fixtures of the dashboards tests."""
from __future__ import annotations

import pytest

from fixture_paths import SPARK_TEST_RESOURCES

INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"


@pytest.fixture
def synced(copy_checkpoint):
    """Spark's inconsistent-ids checkpoint (batches 0, 1, 2 committed, 4 not) copied under the root and synced."""
    from factories import make_checkpoint
    from workers.sync import sync_checkpoint

    checkpoint = make_checkpoint(name="inconsistent", url=str(copy_checkpoint(INCONSISTENT)))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    return checkpoint
