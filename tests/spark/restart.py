"""Twin runs of a real streaming query, a restart of both, and the comparison of their outputs.

The maintenance tests prove an action safe the way an operator would: run the same deterministic
query into two directories, maintain one of them, restart both and compare what they write next.

    from spark.restart import restart_twins, run_twins   # tests/ is on the path (pytest.ini)

    def builder(spark, base):            # any pipelines.queries writer with a JSON file sink
        return windowed_agg_file_sink_query(spark, base, RateSpec(10, FIXTURE_START_MS, 2000))

    twin = run_twins(spark, builder, tmp_path, triggers=8, conf={...})
    ...apply the action to twin.maintained_checkpoint...
    result = restart_twins(spark, builder, twin, triggers=3)
    assert result.maintained.new_rows == result.control.new_rows     # restart_twins checks it too

API
* ``QueryBuilder``: ``(spark, base) -> DataStreamWriter`` with ``<base>/checkpoint`` as its
  checkpoint and (optionally) a JSON file sink in ``<base>/output`` (pipelines/queries.py layout).
  The source must be deterministic (``rate-micro-batch``): the same batch ids get the same rows.
* ``run_to_end(query, base)``: wait for a started ``Trigger.AvailableNow`` run to end, raise
  AssertionError if it failed or timed out, return its ``recentProgress`` as JSON objects.
* ``run_triggers(spark, builder, base, triggers, conf=)``: start the query ``triggers`` times with
  ``Trigger.AvailableNow``, waiting for each run to end. rate-micro-batch gives one data batch per
  run (RatePerMicroBatchStream fixes the end offset at rowsPerBatch), plus the no-data batch Spark
  adds when the watermark moved. Every run ends between two batches, so the checkpoint is always
  left with its last batch committed. ``conf`` holds SQL confs set in the session only while each
  run starts (a query runs on a clone of the session taken at start). Returns a ``RunResult``.
  Not enough for the file source's ``fileSource.log.*`` confs: the source reads them from the
  session on the query's thread after ``start()`` returned; wrap the whole run in
  ``session_conf`` for those (tests/spark/test_maintenance_logs_vs_spark.py does).
* ``run_twins(spark, builder, tmp_path, triggers, conf=)``: the same runs into
  ``tmp_path/control`` and ``tmp_path/maintained`` (two runs, not a copy: a file sink log records
  absolute paths). Raises AssertionError if the two checkpoints do not end at the same batch.
* ``restart_twins(spark, builder, twin, triggers, conf=)``: restart both for ``triggers`` more runs,
  then assert that both restarts succeeded, ended at the same batch, wrote new rows, and wrote the
  same ones (as multisets, read back through Spark). Returns ``TwinRestart``.
* ``read_output_rows(spark, base)``: the rows of ``<base>/output`` read by Spark through the file
  sink log, each as compact JSON, sorted (a multiset as a list). [] when there is no output.
* ``last_committed_batch(base)``: the highest ``commits/N`` of ``<base>/checkpoint``, or None.
* ``DEFAULT_TEST_CONF``: small confs for tests (2 shuffle partitions, Spark's own state
  maintenance effectively off, so that the maintained copy differs only by what the action did).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipelines.generate_fixtures import session_conf

QueryBuilder = Callable[[object, Path], object]

# Spark's own snapshot/cleanup would run on a background thread at an unpredictable moment and
# make the twins differ; a one-hour interval keeps it out of a test's few minutes.
DEFAULT_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "3600s",
}
RUN_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class RunResult:
    """How a series of runs ended: the last committed batch and the batch ids the runs reported."""

    last_batch: int | None
    batch_ids: tuple[int, ...]


@dataclass(frozen=True)
class Twin:
    """Two query directories written by identical runs; only ``maintained`` gets maintenance."""

    control: Path
    maintained: Path

    @property
    def control_checkpoint(self) -> Path:
        return self.control / "checkpoint"

    @property
    def maintained_checkpoint(self) -> Path:
        return self.maintained / "checkpoint"


@dataclass(frozen=True)
class Restart:
    """One side of a twin restart: what the restarted runs did and the rows they added."""

    run: RunResult
    new_rows: list[str]


@dataclass(frozen=True)
class TwinRestart:
    control: Restart
    maintained: Restart


def run_triggers(
    spark, builder: QueryBuilder, base: Path, triggers: int, *, conf: Mapping[str, str] | None = None
) -> RunResult:
    """Start the query ``triggers`` times with Trigger.AvailableNow, each run to its end."""
    batch_ids: list[int] = []
    for _ in range(triggers):
        with session_conf(spark, {**DEFAULT_TEST_CONF, **(conf or {})}):
            query = builder(spark, base).trigger(availableNow=True).start()
        batch_ids.extend(progress["batchId"] for progress in run_to_end(query, base))
    return RunResult(last_committed_batch(base), tuple(batch_ids))


def run_to_end(query, base: Path) -> list[dict]:
    """Wait for a started Trigger.AvailableNow run to end; return its progress (StreamingQueryProgress JSON).

    Raises AssertionError if the query failed or did not end within RUN_TIMEOUT_SECONDS.
    """
    try:
        finished = query.awaitTermination(RUN_TIMEOUT_SECONDS)
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise AssertionError(f"query in {base} failed: {query.exception()}")
    if not finished:
        raise AssertionError(f"query in {base} did not finish within {RUN_TIMEOUT_SECONDS} s")
    return [json.loads(progress.json) for progress in query.recentProgress]


def run_twins(
    spark, builder: QueryBuilder, tmp_path: Path, triggers: int, *, conf: Mapping[str, str] | None = None
) -> Twin:
    """Run the query identically into ``tmp_path/control`` and ``tmp_path/maintained``."""
    twin = Twin(tmp_path / "control", tmp_path / "maintained")
    control = run_triggers(spark, builder, twin.control, triggers, conf=conf)
    maintained = run_triggers(spark, builder, twin.maintained, triggers, conf=conf)
    assert control.last_batch is not None, f"no batch committed in {twin.control}"
    assert control.last_batch == maintained.last_batch, (control, maintained)
    return twin


def restart_twins(
    spark, builder: QueryBuilder, twin: Twin, triggers: int, *, conf: Mapping[str, str] | None = None
) -> TwinRestart:
    """Restart both twins for ``triggers`` runs and assert they went on identically."""
    sides = [_restart(spark, builder, base, triggers, conf) for base in (twin.control, twin.maintained)]
    control, maintained = sides
    assert maintained.run.last_batch == control.run.last_batch, (control.run, maintained.run)
    assert maintained.run.batch_ids == control.run.batch_ids, (control.run, maintained.run)
    assert control.new_rows, f"the restarted control query in {twin.control} wrote no new rows"
    assert Counter(maintained.new_rows) == Counter(control.new_rows)
    return TwinRestart(control, maintained)


def _restart(spark, builder: QueryBuilder, base: Path, triggers: int, conf: Mapping[str, str] | None) -> Restart:
    before = Counter(read_output_rows(spark, base))
    started_at = last_committed_batch(base)
    run = run_triggers(spark, builder, base, triggers, conf=conf)
    assert run.last_batch is not None and started_at is not None and run.last_batch > started_at, (base, run)
    after = Counter(read_output_rows(spark, base))
    assert not before - after, f"rows of {base}/output disappeared on restart"
    return Restart(run, sorted((after - before).elements()))


def read_output_rows(spark, base: Path) -> list[str]:
    """Return the rows of ``<base>/output`` as Spark reads them (through the sink log), sorted."""
    output = base / "output"
    if not (output / "_spark_metadata").exists():
        return []
    frame = spark.read.json(str(output))
    if not frame.columns:
        return []
    return sorted(row[0] for row in frame.selectExpr("to_json(struct(*))").collect())


def last_committed_batch(base: Path) -> int | None:
    """The highest batch id in ``<base>/checkpoint/commits``, or None."""
    commits = base / "checkpoint" / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
    return max(ids, default=None)
