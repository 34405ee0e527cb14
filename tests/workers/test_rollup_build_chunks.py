"""Roll-up builds of older history in chunks (workers/rollup_builds.py), as workers on several
machines run them: the chunks leave exactly the roll-ups a one-shot build leaves (and those equal a
downsampling of the raw rows); a build that dies after a chunk is resumed on another machine where
that chunk ended, not restarted; two workers that claim one build at the same time build it once;
and the page says how far a build is."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone

from dashboards.models import ChartRollup, Checkpoint, StreamingQuery, TimelineRollup
from dashboards.query_page.chart_series import BatchRange
from dashboards.query_page.runtime_series import rebuild_runtime_rollups, rolled_series
from dashboards.query_page.timeline_rollups import rebuild_timeline_rollups
from factories import make_checkpoint
from progress_reports import TEMPLATE, post_progress, progress_report
from rollup_expectations import expected_rollups, stored_rollups
from workers import rollup_builds
from workers.rollup_builds import BUILD_LEASE_SECONDS, BUILT, BUSY, MORE

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="filled with generate_series; concurrent claims need PostgreSQL"
)

# Batches 0..700 but 200..450, a few untimed, some uncommitted, intervals and watermarks varying.
BATCHES_SQL = """
    INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
        sources, is_committed, synced_at)
    SELECT %(owner)s, g, 1, CASE WHEN g %% 97 = 5 THEN 0 ELSE 1700000000000 + g * 1000 + (g * 7919) %% 5 * 1000 END,
        (g * 31) %% 3 * 1000, '{}', '[]', g %% 7 <> 3, now()
    FROM generate_series(0::bigint, 700::bigint) g WHERE g NOT BETWEEN 200 AND 450"""
# The same batch ids' progress, figures varying (ties likely).
PROGRESS_SQL = """
    INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, batch_duration_ms, num_input_rows,
        input_rows_per_second, duration_ms, event_time, sources, origin, received_at)
    SELECT %(owner)s, g, to_timestamp(1700000000 + g), (g * 7919) %% 1000, g %% 13, ((g * 37) %% 50)::float,
        '{}', '{}', '[]', 'listener', now()
    FROM generate_series(0::bigint, 700::bigint) g WHERE g NOT BETWEEN 200 AND 450"""


@dataclass(frozen=True)
class Kind:
    """A kind of roll-up build: its owner's model, how it is filled, a chunk, a one-shot build, its roll-ups."""

    model: type
    fill_sql: str
    chunk: Callable[..., str]
    rebuild: Callable[[int], None]
    rollups: Callable[[int], dict]
    through: str

    def fill(self, owner_pk: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute(self.fill_sql, {"owner": owner_pk})

    def through_of(self, owner_pk: int) -> int | None:
        return self.model.objects.values_list(self.through, flat=True).get(pk=owner_pk)


def _timeline_rollups(checkpoint_pk: int) -> dict:
    return stored_rollups(TimelineRollup.objects.filter(checkpoint_id=checkpoint_pk))


def _runtime_rollups(query_pk: int) -> dict:
    return {
        series.name: stored_rollups(ChartRollup.objects.filter(query_id=query_pk, series=series.name))
        for series in rolled_series()
    }


KINDS = {
    "timeline": Kind(
        Checkpoint,
        BATCHES_SQL,
        rollup_builds.build_timeline_chunk,
        rebuild_timeline_rollups,
        _timeline_rollups,
        "timeline_rollups_through",
    ),
    "runtime": Kind(
        StreamingQuery,
        PROGRESS_SQL,
        rollup_builds.build_runtime_chunk,
        rebuild_runtime_rollups,
        _runtime_rollups,
        "rollups_through",
    ),
}


def _owner_without_rollups(kind: Kind) -> int:
    """A checkpoint (and its query) whose history was stored before roll-ups existed; the kind's owner pk."""
    query = StreamingQuery.objects.create(query_id=uuid.uuid4(), rollups_built=False)
    checkpoint = make_checkpoint(name=f"upgraded-{query.pk}", url=f"/nowhere/upgraded-{query.pk}", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(timeline_rollups_built=False)
    owner_pk = checkpoint.pk if kind.model is Checkpoint else query.pk
    kind.fill(owner_pk)
    return owner_pk


def _build_to_the_end(kind: Kind, owner_pk: int, **when) -> list[str]:
    steps = [kind.chunk(owner_pk, **when)]
    while steps[-1] == MORE:
        steps.append(kind.chunk(owner_pk, **when))
    return steps


def _one_shot(kind: Kind, owner_pk: int) -> dict:
    kind.rebuild(owner_pk)
    return kind.rollups(owner_pk)


@pytest.mark.django_db
@pytest.mark.parametrize("kind_name", KINDS)
@pytest.mark.parametrize("chunk_batches", [8, 24, 64, 100_000])
def test_a_build_in_chunks_leaves_the_rollups_a_one_shot_build_leaves(kind_name, chunk_batches, settings):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = chunk_batches
    kind = KINDS[kind_name]
    owner_pk = _owner_without_rollups(kind)

    steps = _build_to_the_end(kind, owner_pk)

    assert steps[-1] == BUILT and steps[:-1] == [MORE] * (len(steps) - 1)
    assert len(steps) == {8: 57, 24: 20, 64: 8, 100_000: 1}[chunk_batches], "gaps skipped, a chunk at a time"
    chunked = kind.rollups(owner_pk)
    assert chunked and chunked == _one_shot(kind, owner_pk)
    assert kind.through_of(owner_pk) is None and kind.chunk(owner_pk) == BUSY, "built: nothing left"


@pytest.mark.django_db
def test_runtime_rollups_built_in_chunks_equal_the_raw_rows_downsampled(client, pipeline_token, settings):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 16
    query = StreamingQuery.objects.create(query_id=TEMPLATE["id"], rollups_built=False)
    rng = random.Random(29)
    batch_ids = [*range(0, 70), *range(150, 175), 300, 301, 333]
    post_progress(client, pipeline_token, [progress_report(batch_id, rng) for batch_id in batch_ids])

    assert _build_to_the_end(KINDS["runtime"], query.pk)[-1] == BUILT

    for series in rolled_series():
        expected = expected_rollups(list(series.rows(query.pk, BatchRange())), series.shape)
        stored = stored_rollups(ChartRollup.objects.filter(query_id=query.pk, series=series.name))
        assert stored == expected, series.name


class WorkerDied(Exception):
    pass


@pytest.mark.django_db
@pytest.mark.parametrize("kind_name", KINDS)
def test_a_build_that_dies_after_a_chunk_is_resumed_on_another_machine_where_the_chunk_ended(
    kind_name, settings, monkeypatch
):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 64
    kind = KINDS[kind_name]
    owner_pk = _owner_without_rollups(kind)
    started = timezone.now()
    chunks_from: list[int | None] = []
    build_chunk = rollup_builds.build_chunk

    def recorded(serieses, pk, *, through, batches):
        chunks_from.append(through)
        return build_chunk(serieses, pk, through=through, batches=batches)

    monkeypatch.setattr(rollup_builds, "build_chunk", recorded)
    assert kind.chunk(owner_pk, now=started) == MORE
    after_one_chunk = kind.rollups(owner_pk)
    assert kind.through_of(owner_pk) == 63 and after_one_chunk

    def dies_before_committing(serieses, pk, *, through, batches):
        recorded(serieses, pk, through=through, batches=batches)
        raise WorkerDied  # its roll-ups are written, not committed

    monkeypatch.setattr(rollup_builds, "build_chunk", dies_before_committing)
    with pytest.raises(WorkerDied):
        kind.chunk(owner_pk, now=started)
    assert kind.through_of(owner_pk) == 63 and kind.rollups(owner_pk) == after_one_chunk, "nothing of it is kept"
    _hold_claim_of_dead_worker(kind, owner_pk, started)

    monkeypatch.setattr(rollup_builds, "build_chunk", recorded)
    monkeypatch.setattr(rollup_builds.socket, "gethostname", lambda: "second-machine")
    assert kind.chunk(owner_pk, now=started + timedelta(seconds=60)) == BUSY, "the dead worker's claim holds"
    steps = _build_to_the_end(kind, owner_pk, now=started + timedelta(seconds=BUILD_LEASE_SECONDS + 1))

    assert steps[-1] == BUILT
    assert chunks_from[:4] == [None, 63, 63, 127], "resumed where the first chunk ended, not restarted"
    assert None not in chunks_from[1:]
    assert kind.rollups(owner_pk) == _one_shot(kind, owner_pk)


def _hold_claim_of_dead_worker(kind: Kind, owner_pk: int, started) -> None:
    """A worker killed mid-chunk leaves its claim (its ``finally`` never ran) until the claim expires."""
    until = started + timedelta(seconds=BUILD_LEASE_SECONDS)
    if kind.model is Checkpoint:
        Checkpoint.objects.filter(pk=owner_pk).update(sync_lease_owner="roll-ups dead:1", sync_lease_until=until)
    else:
        StreamingQuery.objects.filter(pk=owner_pk).update(rollups_claimed_until=until)


def _in_thread(target: Callable[[], object], results: list) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind_name", KINDS)
def test_two_workers_claiming_one_build_at_the_same_time_build_it_once(kind_name, settings, monkeypatch):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 100_000
    kind = KINDS[kind_name]
    owner_pk = _owner_without_rollups(kind)
    start, one_returned = threading.Barrier(2), threading.Event()
    builds: list[int | None] = []
    build_chunk = rollup_builds.build_chunk

    def slow(serieses, pk, *, through, batches):
        builds.append(through)
        # 60 s: on a busy machine (CI at two workers beside other suites) 20 s once ran out.
        assert one_returned.wait(60), "the other worker waited instead of finding the build claimed"
        return build_chunk(serieses, pk, through=through, batches=batches)

    def worker() -> str:
        start.wait(60)  # both threads started (a busy machine may take seconds)
        step = kind.chunk(owner_pk)
        one_returned.set()
        return step

    monkeypatch.setattr(rollup_builds, "build_chunk", slow)
    results: list[str] = []
    threads = [_in_thread(worker, results) for _ in range(2)]
    for thread in threads:
        thread.join(60)

    assert sorted(results) == [BUILT, BUSY] and builds == [None]
    assert kind.rollups(owner_pk) == _one_shot(kind, owner_pk)


@pytest.mark.django_db(transaction=True)
def test_a_chunk_whose_claim_lapsed_meanwhile_still_runs_before_the_next_one(settings, monkeypatch):
    """The claim outlived (a chunk slower than BUILD_LEASE_SECONDS): a second worker claims the
    build, waits on the query's row until the first commits, then builds the next chunk."""
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 64
    kind = KINDS["runtime"]
    owner_pk = _owner_without_rollups(kind)
    started = timezone.now()
    builds: list[int | None] = []
    build_chunk = rollup_builds.build_chunk

    def waits_for_the_second(serieses, pk, *, through, batches):
        builds.append(through)
        if through is None:
            _wait_for_a_lock_waiter()
        return build_chunk(serieses, pk, through=through, batches=batches)

    monkeypatch.setattr(rollup_builds, "build_chunk", waits_for_the_second)
    results: list[str] = []
    first = _in_thread(lambda: kind.chunk(owner_pk, now=started), results)
    later = started + timedelta(seconds=BUILD_LEASE_SECONDS + 1)
    _wait_until(lambda: builds == [None])
    second = _in_thread(lambda: kind.chunk(owner_pk, now=later), results)
    first.join(60)
    second.join(60)

    assert results == [MORE, MORE] and builds == [None, 63]
    _build_to_the_end(kind, owner_pk, now=later)
    assert kind.rollups(owner_pk) == _one_shot(kind, owner_pk)


def _wait_until(condition: Callable[[], bool], seconds: float = 20) -> None:
    deadline = timezone.now() + timedelta(seconds=seconds)
    while not condition():
        assert timezone.now() < deadline, "timed out"
        threading.Event().wait(0.05)


def _wait_for_a_lock_waiter() -> None:
    """Until another session waits for a row lock (the second worker, on the query's row)."""

    def waiting() -> bool:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction sees its first reading
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0] > 0

    _wait_until(waiting)


@pytest.mark.django_db
def test_the_page_says_how_far_a_build_is(viewer_client, settings):
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 64
    query_pk = _owner_without_rollups(KINDS["runtime"])
    checkpoint = Checkpoint.objects.get(query_id=query_pk)
    KINDS["timeline"].fill(checkpoint.pk)
    url = reverse("dashboards:checkpoint-detail", args=[checkpoint.pk])
    page = viewer_client.get(url).content.decode()
    assert page.count("Building the chart summary of 701 batches…") == 2 and "summarised so far" not in page

    assert rollup_builds.build_timeline_chunk(checkpoint.pk) == MORE
    page = viewer_client.get(url).content.decode()
    assert page.count("Building the chart summary of 701 batches…") == 2
    assert page.count("64 of 701 batches summarised so far.") == 1
    response = viewer_client.get(reverse("dashboards:batch-timeline-chart", args=[checkpoint.pk]))
    assert response.status_code == 503 and response.json()["summarised"] == 64

    assert _build_to_the_end(KINDS["timeline"], checkpoint.pk)[-1] == BUILT
    page = viewer_client.get(url).content.decode()
    assert page.count("Building the chart summary of 701 batches…") == 1, "the Runtime charts' build is still to run"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind_name", KINDS)
def test_a_worker_that_comes_while_a_chunk_holds_the_owner_finds_it_busy_without_waiting(
    kind_name, settings, monkeypatch
):
    """One order the test above leaves to chance: the second worker asks only once the first is
    inside its chunk, its transaction holding the owner's row. The first's claim was committed
    before, so the second's conditional UPDATE finds the row not free and waits for no lock."""
    settings.ROLLUP_BUILD_CHUNK_BATCHES = 100_000
    kind = KINDS[kind_name]
    owner_pk = _owner_without_rollups(kind)
    building, second_returned = threading.Event(), threading.Event()
    build_chunk = rollup_builds.build_chunk

    def slow(serieses, pk, *, through, batches):
        building.set()
        assert second_returned.wait(30), "the second worker waited for the chunk"
        return build_chunk(serieses, pk, through=through, batches=batches)

    def second() -> str:
        assert building.wait(60)
        step = kind.chunk(owner_pk)
        second_returned.set()
        return step

    monkeypatch.setattr(rollup_builds, "build_chunk", slow)
    first_results: list[str] = []
    second_results: list[str] = []
    threads = [_in_thread(lambda: kind.chunk(owner_pk), first_results), _in_thread(second, second_results)]
    for thread in threads:
        thread.join(90)

    assert second_results == [BUSY] and first_results == [BUILT]
    assert kind.rollups(owner_pk) == _one_shot(kind, owner_pk)
