"""Fixtures of the dashboards tests."""

from __future__ import annotations

import pytest

from fixture_paths import KILLED_MID_BATCH, SPARK_TEST_RESOURCES

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


@pytest.fixture
def killed_synced(copy_checkpoint):
    """The PySpark fixture killed before batch 6's commit, synced; no catch-up asked for yet."""
    from django.core.cache import cache

    from dashboards.api.read.catchup import catch_up_key
    from factories import make_checkpoint
    from workers.sync import sync_checkpoint

    checkpoint = make_checkpoint(
        name="killed", url=str(copy_checkpoint(KILLED_MID_BATCH / "checkpoint", name="killed"))
    )
    sync_checkpoint(checkpoint.pk)
    cache.delete(catch_up_key(checkpoint.pk))
    checkpoint.refresh_from_db()
    return checkpoint
