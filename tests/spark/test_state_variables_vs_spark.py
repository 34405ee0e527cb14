"""transformWithState state variables as ckptweb reads them equal Spark's ``statestore`` reader.

For the two PySpark-written fixtures of tests/fixtures/tws (pipelines/tws_queries.py: a
ValueState, a ListState, a MapState, a ValueState with a TTL and a processing-time timer;
UnsafeRow in checkpoint format 1, Avro in format 2), at the last committed batch: per variable
and partition, ckptweb's values (list elements for the ListState, the rows Spark returns with
flattenCollectionTypes) equal Spark's rows with ``stateVarName`` (``readRegisteredTimers`` for
the timers), and every decoded row (UnsafeRow and Avro) equals Spark's. The operator and its variables
equal what Spark's ``state-metadata`` source lists. A restart with one more variable makes Spark
write a second schema file: the schema history names it, and the new variable's rows are Spark's.
New batches of the query, given back one at a time, are followed by the syncs (from the
changelogs once a key set is kept), each variable's rows equal to Spark's at each batch.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint, planned_at
from fixture_paths import OUR_FIXTURES
from pipelines.generate_fixtures import session_conf
from pipelines.queries import stop_between_batches
from pipelines.tws_queries import TWS_CONF, WithOneMoreVariable, run_tws, tws_query, wait_for_batch
from workers.checkpoint.logdir import list_batch_ids, read_commit
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statevariablerows import sample_state_variable_rows
from workers.checkpoint.statevariables import (
    count_state_variables,
    read_schema_history,
    read_state_variables,
    read_writer_schemas,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.spark

TWS_FIXTURES = OUR_FIXTURES / "tws"
VARIANTS = {
    "unsaferow": ("unsaferow", {}),
    "avro_format2": ("avro", {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}),
}
USER_VARIABLES = ("count", "recent", "by_parity", "last_seen")
TIMERS = "$procTimers_keyToTimestamp"
ALL_ROWS = 1_000_000
RESTART_CONF = {key: TWS_CONF[key] for key in TWS_CONF if key.startswith("spark.sql.")}


def _relocated_copy(variant: str, checkpoint: Path) -> Path:
    """Copy a fixture to ``checkpoint``; point its operator metadata's schema file URIs at the copy.

    Spark's reader opens the absolute URIs the metadata v2 lists (ckptweb lists the folder).
    """
    shutil.copytree(TWS_FIXTURES / variant / "checkpoint", checkpoint)
    for path in (checkpoint / "state").glob("*/_metadata/v2/*"):
        if path.name.startswith("."):
            path.unlink()  # its checksum no longer matches
            continue
        text = re.sub(r"file:[^\"]*?(/state/\d+/_stateSchema/)", lambda m: f"file:{checkpoint}{m[1]}", path.read_text())
        path.write_text(text)
    return checkpoint


def _spark_rows(spark, checkpoint: Path, variable: str, conf: dict[str, str]) -> list:
    with session_conf(spark, conf):
        reader = spark.read.format("statestore").option("operatorId", 0)
        if variable == TIMERS:
            reader = reader.option("readRegisteredTimers", True)
        else:
            reader = reader.option("stateVarName", variable)
        return reader.load(str(checkpoint)).collect()


def _unique_id(storage: CheckpointStorage, store, version: int) -> str | None:
    commits = {batch: read_commit(storage, batch) for batch in list_batch_ids(storage, "commits")}
    return state_unique_ids_by_version(commits, operator=0, partition=store.partition).get(version)


def _spark_as_ours(variable: str, row) -> tuple:
    """A row of Spark's reader as (partition, grouping key, the rest) in plain Python values."""
    key = row["key"]["key"]
    if variable == TIMERS:
        return row["partition_id"], key, row["expiration_timestamp_ms"]
    if variable == "by_parity":
        return row["partition_id"], key, row["user_map_key"]["parity"], row["user_map_value"]["rows"]
    if variable == "recent":
        return row["partition_id"], key, row["list_element"]["value"]
    value = row["value"].asDict(recursive=True)
    return row["partition_id"], key, json.dumps(value, sort_keys=True)


def _ours_as_spark(variable: str, partition: int, row) -> list[tuple]:
    if variable == TIMERS:
        return [(partition, row.key["key"]["key"], row.key["expiryTimestampMs"])]
    if variable == "by_parity":
        return [(partition, row.key["key"], row.user_key["parity"], row.value["rows"])]
    if variable == "recent":
        return [(partition, row.key["key"], element["value"]) for element in row.value]
    return [(partition, row.key["key"], json.dumps(row.value, sort_keys=True))]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_state_variable_has_sparks_rows_per_partition(spark, tmp_path, variant):
    encoding, conf = VARIANTS[variant]
    checkpoint = _relocated_copy(variant, tmp_path / variant)
    storage = CheckpointStorage(str(checkpoint))
    version = list_batch_ids(storage, "commits")[-1] + 1
    variables = {v.name: v for v in read_state_variables(storage, 0)}
    writers = read_writer_schemas(storage, 0)
    stores = list_state_store_dirs(storage)
    assert [s.partition for s in stores] == [0, 1]

    for name in (*USER_VARIABLES, TIMERS):
        theirs = [_spark_as_ours(name, row) for row in _spark_rows(spark, checkpoint, name, conf)]
        ours_values: Counter[int] = Counter()
        decoded = []
        for store in stores:
            unique_id = _unique_id(storage, store, version)
            figures = {
                f.name: f
                for f in count_state_variables(
                    storage, store, version, variables.values(), codec="lz4", unique_id=unique_id
                )
            }
            ours_values[store.partition] = figures[name].values
            rows = sample_state_variable_rows(
                storage,
                store,
                version,
                variables[name],
                limit=ALL_ROWS,
                codec="lz4",
                encoding=encoding,
                writer_schemas=writers,
                unique_id=unique_id,
            )
            decoded.extend(t for row in rows for t in _ours_as_spark(name, store.partition, row))
        assert ours_values == Counter(row[0] for row in theirs) + Counter({0: 0, 1: 0}), name
        assert sorted(decoded) == sorted(theirs), name
    assert sum(ours_values.values()) > 0


def test_the_operator_and_its_variables_are_those_of_sparks_state_metadata(spark, tmp_path):
    checkpoint = _relocated_copy("unsaferow", tmp_path / "unsaferow")
    (operator,) = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    declared = json.loads(operator["operatorProperties"])["stateVariables"]

    variables = {v.name: v for v in read_state_variables(CheckpointStorage(str(checkpoint)), operator["operatorId"])}

    for entry in declared:
        variable = variables[entry["stateName"]]
        if entry["stateVariableType"] == "TimerState":
            assert variable.is_timers and variable.internal
        else:
            assert (variable.kind, variable.ttl_enabled) == (entry["stateVariableType"], entry["ttlEnabled"])
    assert variables["$ttl_last_seen"].serves == "last_seen"
    assert variables["$rowCounter_recent"].serves == "recent"


def test_a_restart_that_adds_a_variable_is_a_new_schema_file_in_the_history(spark, tmp_path):
    """Spark writes a schema file for the batch that adds a variable; its rows are Spark's."""
    base = tmp_path / "restarted"
    storage = CheckpointStorage(str(_relocated_copy("unsaferow", base / "checkpoint")))
    restart_batch = list_batch_ids(storage, "commits")[-1] + 1

    with session_conf(spark, RESTART_CONF):
        run_tws(spark, base, restart_batch + 1, processor=WithOneMoreVariable())

    history = read_schema_history(storage, 0)
    assert [change.batch_id for change in history] == [0, restart_batch]
    assert history[1].added == ("first_value",) and history[1].removed == ()
    variables = {v.name: v for v in read_state_variables(storage, 0)}
    version = list_batch_ids(storage, "commits")[-1] + 1
    ours = Counter()
    for store in list_state_store_dirs(storage):
        figures = {f.name: f for f in count_state_variables(storage, store, version, variables.values(), codec="lz4")}
        ours[store.partition] = figures["first_value"].rows
    theirs = Counter(row["partition_id"] for row in _spark_rows(spark, base / "checkpoint", "first_value", {}))
    assert +ours == theirs and sum(theirs.values()) == 3


# Snapshots only where Spark must write one: the follow then reads changelogs between them. Every
# version stays (the copy's first sync counts the variables at the fixture's last one).
FOLLOW_CONF = {
    **RESTART_CONF,
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100",
    "spark.sql.streaming.minBatchesToRetain": "100",
}
FOLLOWED_BATCHES = 4
# Longer than a batch takes on a loaded machine, so that the query can stop between two batches.
FOLLOW_TRIGGER = "15 seconds"


def _run_more_batches(spark, base: Path, last_batch: int) -> None:
    """Restart the query until it has committed ``last_batch``, then stop it between two batches."""
    with session_conf(spark, FOLLOW_CONF):
        query = tws_query(spark, base).trigger(processingTime=FOLLOW_TRIGGER).start()
        try:
            wait_for_batch(query, last_batch)
        finally:
            stop_between_batches(query, timeout_seconds=60)


def _spark_values(spark, checkpoint: Path, batch_id: int) -> dict[str, Counter]:
    """Spark's rows per variable and partition at ``batch_id`` (list elements for the ListState)."""
    values = {}
    for name in (*USER_VARIABLES, TIMERS):
        reader = spark.read.format("statestore").option("operatorId", 0).option("batchId", batch_id)
        if name == TIMERS:
            reader = reader.option("readRegisteredTimers", True)
        else:
            reader = reader.option("stateVarName", name)
        values[name] = Counter(row["partition_id"] for row in reader.load(str(checkpoint)).collect())
    return values


@pytest.mark.django_db
def test_the_followed_variables_equal_sparks_rows_after_each_new_batch(spark, tmp_path, settings):
    """A running query's new batches given back one at a time: each sync follows the state to the
    version the batch committed (from the changelogs once a key set is kept), and every variable's
    rows per partition equal Spark's reader at that batch."""
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    base = tmp_path / "followed"
    root = _relocated_copy("unsaferow", base / "checkpoint")
    storage = CheckpointStorage(str(root))
    first_new = list_batch_ids(storage, "commits")[-1] + 1
    _run_more_batches(spark, base, first_new + FOLLOWED_BATCHES - 1)
    new_batches = [b for b in list_batch_ids(storage, "commits") if b >= first_new]
    assert list_batch_ids(storage, "offsets")[-1] == new_batches[-1], "the query stopped inside a batch"
    theirs = {batch_id: _spark_values(spark, root, batch_id) for batch_id in new_batches}
    aside = tmp_path / "held-commits"
    aside.mkdir()
    for batch_id in new_batches:
        shutil.move(root / "commits" / str(batch_id), aside / str(batch_id))
    checkpoint = make_checkpoint(name="followed", url=str(root))
    first = planned_at(root, new_batches[-1]) + timedelta(seconds=1)
    sync_checkpoint(checkpoint.pk, now=first)

    followed_from_changelogs = 0
    for step, batch_id in enumerate(new_batches, start=1):
        shutil.move(aside / str(batch_id), root / "commits" / str(batch_id))
        run = sync_checkpoint(checkpoint.pk, now=first + timedelta(seconds=step))
        rows = list(checkpoint.state_partitions.order_by("partition"))

        assert run.status == SyncRun.Status.OK and run.new_commits == 1, (batch_id, run.message)
        assert [(row.rows_version, row.note) for row in rows] == [(batch_id + 1, "")] * 2, batch_id
        for name, counts in theirs[batch_id].items():
            ours = Counter({row.partition: v["values"] for row in rows for v in row.variables if v["name"] == name})
            assert +ours == counts, (batch_id, name)
        followed_from_changelogs += run.list_calls == 0
    assert followed_from_changelogs >= 1, "every new version was read cold"
    followed = list(checkpoint.state_partitions.order_by("partition").values_list("rows", "variables"))
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=None)
    sync_checkpoint(checkpoint.pk)
    assert followed == list(checkpoint.state_partitions.order_by("partition").values_list("rows", "variables"))
