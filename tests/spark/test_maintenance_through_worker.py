"""Maintenance through the real Celery worker on a real query's checkpoint, and the worker killed mid-action.

Twin runs of the windowed aggregation (rate-micro-batch -> JSON file sink) with Spark's own
state snapshots and sink-log deletion kept away, so the maintained twin has a long history:
a delta chain per store, every offset and commit, every sink log file. The actions run in the
order an operator shrinks such a history: snapshot, cleanup, purge, compact.

* Through the worker: each action is planned and applied by a real worker (Redis broker, the
  test PostgreSQL), then Spark restarts the maintained query and writes what the control writes.
* Killed: a worker is SIGKILLed (the failpoint of workers.maintenance_runs) before a chosen
  storage step of each action, at 50+ points in all. Every time, a copy of what the dead worker
  left restarts in Spark with the control's output, and resuming the run finishes the plan: the
  files are then exactly those of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from django.utils import timezone

from dashboards.models import MaintenanceRun
from factories import make_checkpoint
from pipelines.queries import FIXTURE_START_MS, RateSpec, windowed_agg_file_sink_query
from spark.restart import last_committed_batch, run_triggers, run_twins
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import maintenance_runs, tasks
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = [pytest.mark.spark, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RATE = RateSpec(rows_per_batch=10, start_ms=FIXTURE_START_MS, advance_ms=2000)
TRIGGERS = 8
RESTART_TRIGGERS = 2
COMPACT_INTERVAL = 3
CONF = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000",
    "spark.sql.streaming.fileSink.log.deletion": "false",
    "spark.sql.streaming.fileSink.log.compactInterval": str(COMPACT_INTERVAL),
}
ACTIONS = ("snapshot", "cleanup", "purge", "compact")


def _requests(last_batch: int) -> dict[str, dict]:
    """Each action's request, in the order an operator shrinks a long history.

    The snapshot is of the version before the newest (batch ``last_batch`` wrote version
    ``last_batch + 1``), so that cleanup keeping one version deletes every delta it replaces
    and a restart can only load that state through our snapshot.
    """
    return {
        "snapshot": {"min_chain": 2, "version": last_batch},
        "cleanup": {"min_versions_to_retain": 1, "keep_offsets_range": False},
        "purge": {"keep_batches": 2},
        "compact": {"log": "sink", "min_batches_to_retain": 2, "cleanup_delay_seconds": 0},
    }


# Kill points per action; snapshot has fewer steps than this and is killed at every one.
KILL_POINTS_PER_ACTION = 16
QUIET_SECONDS = 1
LEASE_SECONDS = 1


def _windowed_counts(spark, base):
    return windowed_agg_file_sink_query(spark, base, RATE)


def _restart(spark, base: Path) -> tuple[tuple[int, ...], list[str]]:
    """Restart the query in ``base``; return its batch ids and the rows of the part files it wrote.

    The rows come from the new part files themselves, not through the sink log: the directories
    here are copies, and a copied sink log still names the original's files.
    """
    before = set((base / "output").glob("part-*"))
    run = run_triggers(spark, _windowed_counts, base, RESTART_TRIGGERS, conf=CONF)
    written = set((base / "output").glob("part-*")) - before
    rows = [
        json.dumps(json.loads(line), sort_keys=True)
        for path in written
        for line in path.read_text().splitlines()
        if line
    ]
    return run.batch_ids, sorted(rows)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)  # keeps mtimes: the query stays "stopped"
    return target


def _files(base: Path) -> dict[str, int]:
    """Every file of a query directory (checkpoint and sink output) with its size."""
    return {str(p.relative_to(base)): p.stat().st_size for p in sorted(base.rglob("*")) if p.is_file()}


def _library_apply(base: Path, action: str, request: dict) -> int:
    """Apply ``action`` in-process; return how many steps (on_step calls) it took."""
    storage = CheckpointStorage(str(base / "checkpoint"))
    sink = CheckpointStorage(str(base / "output"))
    plan = plan_action(
        action, storage, request, now=time.time(), quiet_seconds=0, sink_storage=sink, compact_interval=COMPACT_INTERVAL
    )
    assert plan.is_allowed() and not plan.is_empty, (action, plan.summary, plan.failed_preconditions())
    steps = []
    apply_action(storage, plan, request, sink_storage=sink, on_step=lambda *step: steps.append(step))
    return len(steps)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """The twins, the control's restart, and each action's input and uninterrupted result."""
    root = tmp_path_factory.mktemp("maintenance-history")
    twin = run_twins(spark, _windowed_counts, root, TRIGGERS, conf=CONF)
    control = _restart(spark, _copy(twin.control, root / "control-restarted"))
    assert control[1], "the restarted control wrote no rows: the comparison would prove nothing"
    requests = _requests(last_committed_batch(twin.maintained))
    inputs, results, steps = {}, {}, {}
    previous = twin.maintained
    for action in ACTIONS:
        inputs[action] = previous
        previous = _copy(previous, root / f"after-{action}")
        steps[action] = _library_apply(previous, action, requests[action])
        results[action] = _files(previous)
    time.sleep(QUIET_SECONDS)
    return {"control": control, "inputs": inputs, "results": results, "steps": steps, "requests": requests}


@pytest.fixture
def worker_settings(settings):
    settings.MAINTENANCE_QUIET_SECONDS = QUIET_SECONDS
    return {
        "CKPTWEB_MAINTENANCE_QUIET_SECONDS": str(QUIET_SECONDS),
        "CKPTWEB_MAINTENANCE_LEASE_SECONDS": str(LEASE_SECONDS),
    }


@pytest.fixture
def oncall_user(django_user_model):
    return django_user_model.objects.create_user("olga")


def _register(base: Path, name: str):
    return make_checkpoint(
        name=name,
        url=str(base / "checkpoint"),
        sink_log_url=str(base / "output"),
        file_log_compact_interval=COMPACT_INTERVAL,
    )


def _planned_and_confirmed(checkpoint, action: str, request: dict, user) -> MaintenanceRun:
    run = MaintenanceRun.objects.create(checkpoint=checkpoint, action=action, parameters=request, requested_by=user)
    run = maintenance_runs.make_plan(run.pk)
    assert run.status == MaintenanceRun.Status.PLANNED, (run.status, run.plan_error, run.plan and run.plan["summary"])
    run.confirm(user, reason=f"test {action}", override_query_running=False, now=timezone.now())
    return run


def _finished(run_id: int) -> MaintenanceRun:
    def final():
        run = MaintenanceRun.objects.get(pk=run_id)
        return run if run.is_final else None

    return wait_for(final, f"maintenance run #{run_id} to finish")


def _assert_restarts_like_the_control(spark, base: Path, control: tuple[tuple[int, ...], list[str]]) -> None:
    assert _restart(spark, base) == control, base


def test_every_action_through_the_worker_leaves_a_checkpoint_spark_restarts_with_the_control_output(
    spark, history, checkpoint_roots, worker_settings, oncall_user
):
    base = _copy(history["inputs"]["snapshot"], checkpoint_roots / "chain")
    checkpoint = _register(base, "chain")
    with celery_worker(redis_url_or_skip(), checkpoint_roots, env=worker_settings) as (queue, _):
        for action in ACTIONS:
            request = history["requests"][action]
            run = MaintenanceRun.objects.create(
                checkpoint=checkpoint, action=action, parameters=request, requested_by=oncall_user
            )
            tasks.plan_maintenance.apply_async(args=[run.pk], queue=queue)
            run = wait_for(
                lambda pk=run.pk: MaintenanceRun.objects.exclude(status="planning").filter(pk=pk).first(),
                f"the {action} plan",
            )
            assert run.status == MaintenanceRun.Status.PLANNED, (
                action,
                run.plan_error,
                run.plan and run.plan["summary"],
            )
            run.confirm(
                oncall_user, reason=f"shrink the history: {action}", override_query_running=False, now=timezone.now()
            )
            tasks.run_maintenance.apply_async(args=[run.pk], queue=queue)
            run = _finished(run.pk)
            assert run.status == MaintenanceRun.Status.SUCCEEDED, (action, run.error)
            assert _files(base) == history["results"][action], action

    _assert_restarts_like_the_control(spark, base, history["control"])


def _kill_points(steps: int) -> list[int]:
    if steps <= KILL_POINTS_PER_ACTION:
        return list(range(steps))
    return sorted({round(i * (steps - 1) / (KILL_POINTS_PER_ACTION - 1)) for i in range(KILL_POINTS_PER_ACTION)})


def test_there_are_at_least_fifty_kill_points_across_the_actions(history):
    assert sum(len(_kill_points(history["steps"][action])) for action in ACTIONS) >= 50, history["steps"]


@pytest.mark.parametrize("action", ACTIONS)
def test_a_worker_killed_at_any_step_leaves_a_checkpoint_that_restarts_and_a_resumed_run_finishes_the_plan(
    spark, history, checkpoint_roots, worker_settings, oncall_user, action, tmp_path
):
    failpoint = tmp_path / "failpoint"
    env = {**worker_settings, maintenance_runs.FAILPOINT_ENV: str(failpoint)}
    # A prefork worker: the SIGKILLed child is replaced by the parent, as in production.
    with celery_worker(redis_url_or_skip(), checkpoint_roots, pool="prefork", env=env) as (queue, _):
        for point in _kill_points(history["steps"][action]):
            name = f"{action}-killed-at-{point}"
            base = _copy(history["inputs"][action], checkpoint_roots / name)
            run = _planned_and_confirmed(_register(base, name), action, history["requests"][action], oncall_user)

            failpoint.write_text(str(point))
            tasks.run_maintenance.apply_async(args=[run.pk], queue=queue)
            wait_for(lambda: not failpoint.exists(), f"the worker to reach step {point} of {name}")
            worker = wait_for(lambda pk=run.pk: MaintenanceRun.objects.get(pk=pk).worker, "the run's worker")
            pid = int(worker.rsplit(":", 1)[1])
            wait_for(lambda pid=pid: not _alive(pid), f"the worker process {pid} to die")
            assert MaintenanceRun.objects.get(pk=run.pk).status == MaintenanceRun.Status.RUNNING

            _assert_restarts_like_the_control(
                spark, _copy(base, checkpoint_roots / f"{name}-restarted"), history["control"]
            )

            time.sleep(LEASE_SECONDS)  # the dead worker's lease runs out
            assert run.pk in maintenance_runs.interrupted_run_ids()
            tasks.run_maintenance.apply_async(args=[run.pk], queue=queue)
            resumed = _finished(run.pk)
            assert resumed.status == MaintenanceRun.Status.SUCCEEDED, (name, resumed.error)
            assert resumed.attempts == 2
            assert _files(base) == history["results"][action], name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
