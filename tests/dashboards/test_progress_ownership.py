"""Whose progress is it: two registered checkpoints of one query id (a copy, a restored backup).

Progress rows name a query id and a batch id; CheckpointQuerySet.with_progress_owner says which
of them are a checkpoint's, and every reader (the list, the query page, the read API, /metrics,
maintenance) takes them through it.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboards.health.query_status import State, assess
from dashboards.metrics.checkpoints import read_checkpoints
from dashboards.models import BatchProgress, Checkpoint, StreamingQuery
from factories import make_checkpoint

pytestmark = pytest.mark.django_db

PROGRESS_BATCHES = 13  # progress of batches 0 to 12 was received for the query


@pytest.fixture
def query():
    query = StreamingQuery.objects.create(query_id=uuid.uuid5(uuid.NAMESPACE_DNS, "ownership"))
    start = timezone.now() - timedelta(minutes=10)
    BatchProgress.objects.bulk_create(
        BatchProgress(query=query, batch_id=batch_id, timestamp=start + timedelta(seconds=batch_id), origin="listener")
        for batch_id in range(PROGRESS_BATCHES)
    )
    return query


def register(name: str, query: StreamingQuery, latest_batch_id: int) -> Checkpoint:
    checkpoint = make_checkpoint(name=name, url=f"/nowhere/{name}", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        latest_batch_id=latest_batch_id, latest_committed_batch_id=latest_batch_id
    )
    return checkpoint


def owned_batch_ids(checkpoint: Checkpoint) -> list[int]:
    owner = Checkpoint.objects.with_progress_owner().get(pk=checkpoint.pk)
    return list(BatchProgress.objects.owned_by(owner).order_by("batch_id").values_list("batch_id", flat=True))


def owner_of(checkpoint: Checkpoint) -> tuple:
    row = Checkpoint.objects.with_progress_owner().values("copy_of_name", "copy_of_batch_id", "progress_ceiling")
    return tuple(row.get(pk=checkpoint.pk).values())


def test_a_copy_behind_owns_the_progress_of_its_own_batches_and_not_of_the_next(query):
    original = register("original", query, latest_batch_id=10)
    copy = register("copy", query, latest_batch_id=5)

    assert owned_batch_ids(copy) == [0, 1, 2, 3, 4, 5]
    assert owned_batch_ids(original) == list(range(PROGRESS_BATCHES))
    assert owner_of(copy) == ("original", 10, 5)
    assert owner_of(original) == (None, None, None)


def test_a_copy_ahead_of_the_first_registered_owns_all_and_the_first_only_its_own(query):
    first = register("first", query, latest_batch_id=5)
    ahead = register("ahead", query, latest_batch_id=10)

    assert owned_batch_ids(ahead) == list(range(PROGRESS_BATCHES))
    assert owned_batch_ids(first) == [0, 1, 2, 3, 4, 5]
    assert owner_of(first) == ("ahead", 10, 5)


def test_of_two_level_checkpoints_the_first_registered_owns_the_progress_past_them(query):
    # A copy registered seconds after it was taken is level with its original until the original's next sync.
    original = register("original", query, latest_batch_id=7)
    copy = register("copy", query, latest_batch_id=7)

    assert owned_batch_ids(original) == list(range(PROGRESS_BATCHES))
    assert owned_batch_ids(copy) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert owner_of(copy) == ("original", 7, 7)


def test_an_archived_checkpoint_ahead_leaves_all_progress_to_the_active_one(query):
    archived = register("archived", query, latest_batch_id=10)
    Checkpoint.objects.filter(pk=archived.pk).update(archived_at=timezone.now())
    active = register("active", query, latest_batch_id=5)

    assert owned_batch_ids(active) == list(range(PROGRESS_BATCHES))


def test_metrics_the_read_api_and_the_list_take_a_copys_progress_only_up_to_its_newest_batch(query, viewer_client):
    register("original", query, latest_batch_id=7)
    copy = register("copy", query, latest_batch_id=7)
    # The copy's newest batch was planned before it was registered; progress of batch 8 arrives now.
    Checkpoint.objects.filter(pk=copy.pk).update(latest_batch_at=timezone.now() - timedelta(seconds=20))
    BatchProgress.objects.filter(query=query, batch_id=8).update(timestamp=timezone.now())

    newest_in_metrics = {row["name"]: row["progress_pk"] for row in read_checkpoints()}
    served = viewer_client.get(reverse("api-progress-list", args=[copy.pk])).json()["results"]
    row = Checkpoint.objects.status_list_rows().get(pk=copy.pk)

    assert BatchProgress.objects.get(pk=newest_in_metrics["copy"]).batch_id == 7
    assert BatchProgress.objects.get(pk=newest_in_metrics["original"]).batch_id == PROGRESS_BATCHES - 1
    assert [progress["batch_id"] for progress in served] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert row["last_heard_at"] == BatchProgress.objects.get(query=query, batch_id=7).timestamp
    status = assess(Checkpoint.objects.with_status_facts().get(pk=copy.pk).status_facts(), now=timezone.now())
    assert status.state is State.STOPPED
    assert status.reason.startswith("a copy of original (same query id, at batch 7): its own batches end at batch 7")


def test_a_copy_that_plans_batches_after_it_was_registered_is_judged_by_them(query):
    register("original", query, latest_batch_id=10)
    copy = register("copy", query, latest_batch_id=5)
    registered = Checkpoint.objects.get(pk=copy.pk).created_at
    Checkpoint.objects.filter(pk=copy.pk).update(
        latest_batch_at=registered + timedelta(seconds=1), last_synced_at=registered + timedelta(seconds=2)
    )

    facts = Checkpoint.objects.with_status_facts().get(pk=copy.pk).status_facts()
    status = assess(facts, now=registered + timedelta(seconds=3))

    assert status.state is State.RUNNING
    assert facts.copy_of == "original" and facts.registered_at == registered


def test_a_checkpoint_without_copies_hears_its_query_up_to_the_batch_it_plans_next(query):
    alone = register("alone", query, latest_batch_id=7)

    row = Checkpoint.objects.status_list_rows().get(pk=alone.pk)

    assert row["last_heard_at"] == BatchProgress.objects.get(query=query, batch_id=8).timestamp
