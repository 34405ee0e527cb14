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
* Killed during a fix: rewind, skip (a), repair and undo (of the rewind), backed up and approved
  by a second user, on the same full history (``fixes``); each killed before the first step of
  each kind and before the end (``maintenance_files.first_step_of_each_kind``). What the dead
  worker left mixes input and planned result only, every file changed so far has its copy in the
  backup, Spark restarts it where that means something, and the resumed run leaves every file
  byte for byte as the uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from django.utils import timezone
from pyspark.errors import PySparkException

from dashboards.models import MaintenanceRun
from factories import make_checkpoint
from pipelines.queries import FIXTURE_START_MS, RateSpec, windowed_agg_file_sink_query
from spark.maintenance_files import (
    changed_without_copy,
    contents,
    first_step_of_each_kind,
    neither_before_nor_after,
    outside_backups,
)
from spark.restart import last_committed_batch, run_triggers, run_twins
from worker_process import celery_worker, redis_url_or_skip, wait_for
from workers import maintenance_runs, tasks
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.maintenance.backup import UNDO_SUBDIR
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


def _library_apply(base: Path, action: str, request: dict) -> list[tuple[str, str]]:
    """Apply ``action`` in-process; return its steps (the (operation, path) of each on_step call)."""
    storage = CheckpointStorage(str(base / "checkpoint"))
    sink = CheckpointStorage(str(base / "output"))
    plan = plan_action(
        action, storage, request, now=time.time(), quiet_seconds=0, sink_storage=sink, compact_interval=COMPACT_INTERVAL
    )
    assert plan.is_allowed() and not plan.is_empty, (action, plan.summary, plan.failed_preconditions())
    steps = []
    apply_action(storage, plan, request, sink_storage=sink, on_step=lambda *step: steps.append(step[:2]))
    return steps


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
        steps[action] = len(_library_apply(previous, action, requests[action]))
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


@pytest.fixture
def approver(django_user_model):
    """The second person a rewind, skip, repair or undo waits for (MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL)."""
    return django_user_model.objects.create_user("petra")


def _register(base: Path, name: str):
    return make_checkpoint(
        name=name,
        url=str(base / "checkpoint"),
        sink_log_url=str(base / "output"),
        file_log_compact_interval=COMPACT_INTERVAL,
    )


def _planned_and_confirmed(checkpoint, action: str, request: dict, user, approver=None) -> MaintenanceRun:
    run = MaintenanceRun.objects.create(checkpoint=checkpoint, action=action, parameters=request, requested_by=user)
    run = maintenance_runs.make_plan(run.pk)
    assert run.status == MaintenanceRun.Status.PLANNED, (run.status, run.plan_error, run.plan and run.plan["summary"])
    run.confirm(user, reason=f"test {action}", override_query_running=False, now=timezone.now())
    if run.status == MaintenanceRun.Status.AWAITING_APPROVAL:  # rewind, skip, repair, undo: a second person's
        run.approve(approver, now=timezone.now())
    assert run.status == MaintenanceRun.Status.QUEUED, (action, run.status)
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
    with _worker_with_failpoint(checkpoint_roots, worker_settings, tmp_path) as (queue, failpoint):
        for point in _kill_points(history["steps"][action]):
            name = f"{action}-killed-at-{point}"
            base = _copy(history["inputs"][action], checkpoint_roots / name)
            run = _planned_and_confirmed(_register(base, name), action, history["requests"][action], oncall_user)

            _kill_at(queue, failpoint, run, point, name)
            _assert_restarts_like_the_control(
                spark, _copy(base, checkpoint_roots / f"{name}-restarted"), history["control"]
            )
            _resume(queue, run, name)
            assert _files(base) == history["results"][action], name


@contextlib.contextmanager
def _worker_with_failpoint(checkpoint_roots: Path, worker_settings: dict, tmp_path: Path):
    """A worker that kills itself at the step the failpoint file names: yields (its queue, that file)."""
    failpoint = tmp_path / "failpoint"
    env = {**worker_settings, maintenance_runs.FAILPOINT_ENV: str(failpoint)}
    # A prefork worker: the SIGKILLed child is replaced by the parent, as in production.
    with celery_worker(redis_url_or_skip(), checkpoint_roots, pool="prefork", env=env) as (queue, _):
        yield queue, failpoint


def _kill_at(queue: str, failpoint: Path, run: MaintenanceRun, point: int, name: str) -> None:
    """Queue ``run``; its worker SIGKILLs itself right before step ``point``. Returns once it is dead."""
    failpoint.write_text(str(point))
    tasks.run_maintenance.apply_async(args=[run.pk], queue=queue)
    ended = wait_for(
        lambda: not failpoint.exists() or MaintenanceRun.objects.get(pk=run.pk).is_final,
        f"the worker to reach step {point} of {name}",
    )
    assert failpoint.exists() is False, (name, ended, MaintenanceRun.objects.get(pk=run.pk).error)
    worker = wait_for(lambda pk=run.pk: MaintenanceRun.objects.get(pk=pk).worker, "the run's worker")
    pid = int(worker.rsplit(":", 1)[1])
    wait_for(lambda pid=pid: not _alive(pid), f"the worker process {pid} to die")
    assert MaintenanceRun.objects.get(pk=run.pk).status == MaintenanceRun.Status.RUNNING


def _resume(queue: str, run: MaintenanceRun, name: str) -> None:
    """Once the dead worker's lease ran out, queue the run again; it must finish on its second attempt."""
    time.sleep(LEASE_SECONDS)
    assert run.pk in maintenance_runs.interrupted_run_ids()
    tasks.run_maintenance.apply_async(args=[run.pk], queue=queue)
    resumed = _finished(run.pk)
    assert resumed.status == MaintenanceRun.Status.SUCCEEDED, (name, resumed.error)
    assert resumed.attempts == 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# Rewind, skip, repair and undo of the maintained twin's full history, each backing up what it changes.
FIXES = ("rewind", "skip", "repair", "undo")
REWOUND_BATCHES = 3


def _without(source: Path, target: Path, relpath: str) -> Path:
    """A copy of ``source`` without the checkpoint file ``relpath`` and its Hadoop checksum."""
    base = _copy(source, target)
    directory, name = os.path.split(relpath)
    (base / "checkpoint" / relpath).unlink()
    (base / "checkpoint" / directory / f".{name}.crc").unlink(missing_ok=True)
    return base


@pytest.fixture(scope="module")
def fixes(spark, history, tmp_path_factory):
    """Each fix's input, request, steps and uninterrupted result (every file's bytes), and the restarts to expect.

    * rewind: the full history, to ``REWOUND_BATCHES`` batches before the latest;
    * skip (a): the latest batch without its commit, as a batch that failed at every restart leaves it;
    * repair: a hole, the offsets of the batch before the latest gone (Spark: "batch N doesn't exist");
    * undo: of the rewind, from the rewind's result (its backup included).
    """
    root = tmp_path_factory.mktemp("fixes")
    full = history["inputs"]["snapshot"]
    last = last_committed_batch(full)
    inputs = {
        "rewind": full,
        "skip": _without(full, root / "uncommitted", f"commits/{last}"),
        "repair": _without(full, root / "hole", f"offsets/{last - 1}"),
    }
    requests = {
        "rewind": {"to_batch": last - REWOUND_BATCHES, "backup_dir": "_ckptweb_backup/rewind"},
        "skip": {"batch": last, "backup_dir": "_ckptweb_backup/skip"},
        "repair": {"backup_dir": "_ckptweb_backup/repair"},
        "undo": {"backup_dir": "_ckptweb_backup/rewind"},
    }
    steps, results = {}, {}
    for action in FIXES:
        after = _copy(inputs[action], root / f"after-{action}")
        steps[action] = _library_apply(after, action, requests[action])
        results[action] = contents(after)
        inputs.setdefault("undo", after)
    skip_restart = _restart(spark, _copy(inputs["skip"], root / "uncommitted-restarted"))
    time.sleep(QUIET_SECONDS)
    return {
        "inputs": inputs,
        "before": {action: contents(inputs[action]) for action in FIXES},
        "requests": requests,
        "steps": steps,
        "results": results,
        "last": last,
        "restarts": {"control": history["control"], "skip": skip_restart},
    }


def _expected_restart(action: str, fixes: dict, left: dict[str, bytes]):
    """What Spark must do with what a dead worker left: the restart to expect, "refused", or None.

    None where no restart is meaningful: a rewind or repair that deleted some files and not yet
    others, an undo that restored some. A skip killed before its commit leaves its batch
    uncommitted, and Spark runs it again (rewriting the state files the skip carried forward)
    as it does the input.
    """
    spark_reads = outside_backups(left)
    if spark_reads == outside_backups(fixes["before"][action]):
        return {"rewind": fixes["restarts"]["control"], "skip": fixes["restarts"]["skip"], "repair": "refused"}.get(
            action
        )
    commit = f"checkpoint/commits/{fixes['last']}"
    if action == "skip" and commit not in spark_reads:
        # Never a CRC without its file (the file goes first): Spark commits the batch it runs again.
        assert f"checkpoint/commits/.{fixes['last']}.crc" not in spark_reads
        return fixes["restarts"]["skip"]
    if action == "undo" and spark_reads == outside_backups(fixes["results"]["undo"]):
        return fixes["restarts"]["control"]
    return None


def _assert_spark_restarts_as_expected(spark, base: Path, expected) -> None:
    if expected == "refused":
        with pytest.raises((AssertionError, PySparkException), match="doesn't exist"):
            _restart(spark, base)
    else:
        assert _restart(spark, base) == expected, base


@pytest.mark.parametrize("action", FIXES)
def test_a_worker_killed_during_a_fix_leaves_the_input_or_what_the_resumed_run_finishes_as_planned(
    spark, fixes, checkpoint_roots, worker_settings, oncall_user, approver, action, tmp_path
):
    """Killed before the first step of each kind (``first_step_of_each_kind``) and before the end.

    Every time, what the dead worker left is a mix of the input's and the result's files (no
    third content, no temporary file), each file already deleted or rewritten has its exact copy
    in the backup, Spark restarts it where that is meaningful (``_expected_restart``), and the
    resumed run leaves every file byte for byte as the uninterrupted run.
    """
    before, after, request = fixes["before"][action], fixes["results"][action], fixes["requests"][action]
    backup_dir = request["backup_dir"] + (f"/{UNDO_SUBDIR}" if action == "undo" else "")
    with _worker_with_failpoint(checkpoint_roots, worker_settings, tmp_path) as (queue, failpoint):
        for point in first_step_of_each_kind(fixes["steps"][action]):
            name = f"{action}-killed-at-{point}"
            base = _copy(fixes["inputs"][action], checkpoint_roots / name)
            run = _planned_and_confirmed(_register(base, name), action, request, oncall_user, approver)
            _kill_at(queue, failpoint, run, point, name)

            left = contents(base)
            assert neither_before_nor_after(before, after, left) == [], (name, fixes["steps"][action][point])
            assert changed_without_copy(before, left, backup_dir) == [], (name, fixes["steps"][action][point])
            expected = _expected_restart(action, fixes, left) if left != before else None
            if expected is not None:
                _assert_spark_restarts_as_expected(spark, _copy(base, checkpoint_roots / f"{name}-restarted"), expected)

            _resume(queue, run, name)
            assert contents(base) == after, name
