"""No false alarm at any moment of a real query's life: while its first batch runs, right after
it commits (the next batch running), and right after a restart.

A real PySpark stateful query (windowed counts over 2 shuffle partitions, foreachBatch) is held
halfway through chosen batches: partition 0's task has run and committed its state store, the
task of partition 1 has not started (so ``state/0/1`` does not exist yet during batch 0), and
``commits/N`` is not written. At each moment a sync runs the full pass over the checkpoint as it
is, then the list, the query page, /metrics and the shipped alert rules (promtool) must say
"running", with no open finding at all (issue 28: every demo query was "damaged" for its first
five minutes).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dashboards.models import Checkpoint
from factories import make_checkpoint
from pipelines.generate_fixtures import session_conf
from pipelines.queries import FIXTURE_START_MS, RateSpec, stop_between_batches, windowed_agg_foreach_batch_query
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.sync import sync_checkpoint

from .health_views import states_shown

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

WAIT_SECONDS = 240
CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
}


class HalfwayGate:
    """Holds chosen batches of a foreachBatch query halfway, until the test lets each go on."""

    def __init__(self) -> None:
        self._halfway: dict[int, threading.Event] = {}
        self._go_on: dict[int, threading.Event] = {}

    def hold(self, batch_id: int) -> None:
        self._halfway[batch_id], self._go_on[batch_id] = threading.Event(), threading.Event()

    def on_batch(self, frame, batch_id: int) -> None:
        if batch_id in self._go_on:
            # Only partition 0's task: its state store commits, partition 1's is not even opened.
            # (A lambda: Spark's Python workers get it by value, not by importing this module.)
            frame.sparkSession.sparkContext.runJob(frame.rdd, lambda rows: [sum(1 for _ in rows)], partitions=[0])
            self._halfway[batch_id].set()
            self._go_on[batch_id].wait(WAIT_SECONDS)
        frame.count()  # every partition, so that Spark commits every state store

    def wait_halfway(self, query, batch_id: int) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not self._halfway[batch_id].wait(0.2):
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"batch {batch_id} did not reach halfway in {WAIT_SECONDS} s"

    def let_go(self, batch_id: int) -> None:
        self._go_on[batch_id].set()


def _wait_for_commit(checkpoint_dir: Path, batch_id: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not (checkpoint_dir / "commits" / str(batch_id)).exists():
        assert time.monotonic() < deadline, f"batch {batch_id} was not committed in {WAIT_SECONDS} s"
        time.sleep(0.1)


def _next_batch_of_a_restart(checkpoint_dir: Path) -> int:
    """Spark re-runs the newest batch when it has no commit, else plans the one after it."""
    storage = CheckpointStorage(str(checkpoint_dir))
    offsets, commits = list_batch_ids(storage, "offsets"), list_batch_ids(storage, "commits")
    return offsets[-1] + 1 if commits and commits[-1] == offsets[-1] else offsets[-1]


def _start(spark, base: Path, gate: HalfwayGate):
    rate = RateSpec(rows_per_batch=20, start_ms=FIXTURE_START_MS, advance_ms=1000)
    query = windowed_agg_foreach_batch_query(spark, base, "no_false_alarm", rate, gate.on_batch)
    return query.trigger(processingTime="1 second").start()


def _what_each_place_says(client, checkpoint: Checkpoint, promtool: str, tmp_path: Path, moment: str) -> dict:
    sync_checkpoint(checkpoint.pk)  # a full walk every sync (FULL_WALK_INTERVAL_SECONDS = 0)
    shown = states_shown(client, {checkpoint.name: checkpoint}, promtool, tmp_path / moment)[checkpoint.name]
    findings = list(checkpoint.findings.open().values_list("code", "path", "message"))
    return {**shown, "findings": findings}


@pytest.mark.timeout(1200)
def test_a_query_is_running_with_no_finding_while_its_first_batch_runs_after_it_commits_and_after_a_restart(
    spark, tmp_path, settings, admin_client, promtool
):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.FULL_WALK_INTERVAL_SECONDS = 0
    # Generous, so that a slow machine does not make a held batch overdue (a batch really that
    # late is stalled, and then its findings are reported: tests/workers/test_inspection.py).
    settings.HEALTH_STALLED_AFTER_SECONDS = 900
    base = tmp_path / "query"
    checkpoint_dir = base / "checkpoint"
    checkpoint = make_checkpoint(name="demo", url=str(checkpoint_dir))
    gate = HalfwayGate()
    running = {"list": "running", "header": "running", "metrics": "running", "alerts": [], "findings": []}
    (tmp_path / "while-batch-0").mkdir()
    (tmp_path / "after-commit").mkdir()
    (tmp_path / "after-restart").mkdir()
    with session_conf(spark, CONF):
        gate.hold(0)
        gate.hold(1)
        query = _start(spark, base, gate)
        try:
            gate.wait_halfway(query, 0)
            assert not (checkpoint_dir / "state" / "0" / "1").exists()  # the moment of the issue
            while_batch_0 = _what_each_place_says(admin_client, checkpoint, promtool, tmp_path, "while-batch-0")
            gate.let_go(0)
            _wait_for_commit(checkpoint_dir, 0)
            gate.wait_halfway(query, 1)
            after_commit = _what_each_place_says(admin_client, checkpoint, promtool, tmp_path, "after-commit")
            gate.let_go(1)
            _wait_for_commit(checkpoint_dir, 1)
        finally:
            gate.let_go(0)
            gate.let_go(1)
            stop_between_batches(query, timeout_seconds=30)

        rerun = _next_batch_of_a_restart(checkpoint_dir)
        gate.hold(rerun)
        query = _start(spark, base, gate)
        try:
            gate.wait_halfway(query, rerun)
            after_restart = _what_each_place_says(admin_client, checkpoint, promtool, tmp_path, "after-restart")
        finally:
            gate.let_go(rerun)
            stop_between_batches(query, timeout_seconds=30)

    assert while_batch_0 == running
    assert after_commit == running
    assert after_restart == running, rerun
