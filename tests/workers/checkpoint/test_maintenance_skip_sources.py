"""Skip (b): part of a source. The uncommitted batch is rewritten to read only what is skipped.

Kafka offsets are Spark's own: the lines of ``offsets/0`` of Spark's Kafka test checkpoint
(connector/kafka-0-10-sql/src/test/resources/structured-streaming/
checkpoint-version-2.4.3-kafka-include-headers-default, five partitions of one topic, written as
KafkaSourceOffset writes them: partition keys in hash-map order) are rebuilt here byte for byte
from their parts, and Spark's ``offset-log-version-2.1.0/0`` (a file source and a Kafka source) is
read in place from the shared fixtures. The rewritten JSON is checked against the shape
JsonUtils.partitionOffsets reads (topic -> partition number as a string -> long), compact as json4s
writes it.
"""

from __future__ import annotations

import hashlib
import signal
from pathlib import Path

import pytest

from fixture_paths import SPARK_TEST_RESOURCES
from maintenance_crash import apply_killed_at, count_steps
from spark_kafka_checkpoint import (
    BATCH_1_OFFSETS,
    SPARK_KAFKA_METADATA,
    SPARK_OFFSETS_0_SHA256,
    TOPIC,
    as_kafka_source_offset,
    spark_offsets_0,
    write_file,
    write_kafka_checkpoint,
)
from workers.checkpoint.maintenance.plan import restrict_to_confirmed
from workers.checkpoint.maintenance.skip import apply_skip, plan_skip
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

LATER = 4_000_000_000.0


def test_the_rebuilt_kafka_offsets_are_the_bytes_of_spark_s_own_fixture():
    assert hashlib.sha256(spark_offsets_0().encode()).hexdigest() == SPARK_OFFSETS_0_SHA256


def test_a_kafka_partition_skip_rewrites_the_uncommitted_offsets_to_the_skipped_range_only(tmp_path):
    root = write_kafka_checkpoint(tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, now=LATER, source=0, partition=f"{TOPIC}-2", to_offset=8)
    assert plan.is_allowed(), plan.failed_preconditions()
    assert [w.path for w in plan.writes] == ["offsets/1", "commits/1"]
    after = '{"' + TOPIC + '":{"2":8,"4":3,"1":3,"3":3,"0":3}}'
    assert f"offsets/1 source 0 before: {BATCH_1_OFFSETS}" in plan.notes
    assert f"offsets/1 source 0 after: {after}" in plan.notes
    assert "5 offsets of Kafka partition" in plan.summary

    apply_skip(storage, plan)

    lines = (root / "offsets/1").read_text().split("\n")
    assert lines[:2] == ["v1", SPARK_KAFKA_METADATA] and lines[2] == after
    assert as_kafka_source_offset(lines[2]) == {TOPIC: {0: 3, 1: 3, 2: 8, 3: 3, 4: 3}}
    assert (root / "commits/1").read_text() == 'v1\n{"nextBatchWatermarkMs":0}'


def test_the_other_source_of_spark_2_1_offsets_reads_nothing_in_the_skipped_batch(tmp_path):
    spark_offsets = (SPARK_TEST_RESOURCES / "offset-log-version-2.1.0/0").read_text()
    version, metadata, file_offset, kafka_offset = spark_offsets.split("\n")[:4]
    root = tmp_path / "checkpoint"
    write_file(root, "offsets/0", spark_offsets)
    write_file(root, "commits/0", 'v1\n{"nextBatchWatermarkMs":0}')
    write_file(root, "offsets/1", "\n".join((version, metadata, '{"logOffset":346}', '{"topic-0":{"0":9}}')))
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, now=LATER, source=1, partition="topic-0-0", to_offset=4)
    assert plan.is_allowed(), plan.failed_preconditions()
    apply_skip(storage, plan)
    lines = (root / "offsets/1").read_text().split("\n")
    assert lines == [version, metadata, file_offset, '{"topic-0":{"0":4}}']
    assert as_kafka_source_offset(lines[3]) == {"topic-0": {0: 4}}


@pytest.mark.parametrize(
    ("partition", "to_offset", "reason"),
    [
        (f"{TOPIC}-2", 3, "is not after"),
        (f"{TOPIC}-7", 9, "has no offset in the batch before"),
        ("no-partition-number", 9, "is not a Kafka topic-partition"),
    ],
)
def test_a_kafka_skip_that_would_not_move_a_known_start_forward_is_refused(tmp_path, partition, to_offset, reason):
    root = write_kafka_checkpoint(tmp_path)
    plan = plan_skip(CheckpointStorage(str(root)), now=LATER, source=0, partition=partition, to_offset=to_offset)
    failed = plan.failed_preconditions()
    assert plan.is_empty and [p.name for p in failed] == ["source-range"] and reason in failed[0].detail


def test_a_committed_latest_batch_has_nothing_to_skip_from(tmp_path):
    root = write_kafka_checkpoint(tmp_path)
    write_file(root, "commits/1", 'v1\n{"nextBatchWatermarkMs":0}')
    plan = plan_skip(CheckpointStorage(str(root)), now=LATER, source=0, partition=f"{TOPIC}-2", to_offset=8)
    assert [p.name for p in plan.failed_preconditions()] == ["batch-uncommitted"]


def _entry(name: str, batch: int) -> str:
    return '{"path":"file:///data/in/' + name + '","timestamp":1704067620000,"batchId":' + str(batch) + "}"


def _file_checkpoint(root: Path, log_batch: int, names: list[str]) -> Path:
    metadata = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    write_file(root, "offsets/0", f'v1\n{metadata}\n{{"logOffset":{log_batch - 1}}}')
    write_file(root, "commits/0", 'v1\n{"nextBatchWatermarkMs":0}')
    write_file(root, "offsets/1", f'v1\n{metadata}\n{{"logOffset":{log_batch}}}')
    write_file(root, f"sources/0/{log_batch - 1}", "v1\n" + _entry("old.json", log_batch - 1))
    write_file(root, f"sources/0/{log_batch}", "\n".join(["v1", *(_entry(n, log_batch) for n in names)]))
    return root


def test_named_files_stay_in_their_log_batch_and_the_others_move_to_the_next(tmp_path):
    root = _file_checkpoint(tmp_path, 1, ["a.json", "bad.json", "c.json"])
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, now=LATER, source=0, files=["/data/in/bad.json"])
    assert plan.is_allowed(), plan.failed_preconditions()
    assert [w.path for w in plan.writes] == ["sources/0/2", "sources/0/1", "commits/1"]
    apply_skip(storage, plan)
    assert (root / "sources/0/1").read_text() == "v1\n" + _entry("bad.json", 1)
    assert (root / "sources/0/2").read_text() == "v1\n" + _entry("a.json", 2) + "\n" + _entry("c.json", 2)
    assert (root / "offsets/1").read_text().endswith('{"logOffset":1}')
    assert (root / "commits/1").exists()


def test_naming_every_file_of_the_batch_skips_it_whole(tmp_path):
    root = _file_checkpoint(tmp_path, 1, ["bad.json"])
    plan = plan_skip(CheckpointStorage(str(root)), now=LATER, source=0, files=["file:///data/in/bad.json"])
    assert plan.is_allowed() and [w.path for w in plan.writes] == ["commits/1"]


@pytest.mark.parametrize(
    ("log_batch", "files", "reason"),
    [
        (1, ["/data/in/old.json"], "not among the 3 files the batch reads"),
        (8, ["/data/in/bad.json"], "sources/0/9 would be a compaction batch"),
    ],
)
def test_a_file_skip_spark_would_not_honour_is_refused(tmp_path, log_batch, files, reason):
    root = _file_checkpoint(tmp_path, log_batch, ["a.json", "bad.json", "c.json"])
    plan = plan_skip(CheckpointStorage(str(root)), now=LATER, source=0, files=files)
    failed = plan.failed_preconditions()
    assert [p.name for p in failed] == ["source-range"] and reason in failed[0].detail


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


SOURCE_SKIPS = {
    "kafka": (write_kafka_checkpoint, {"source": 0, "partition": f"{TOPIC}-2", "to_offset": 8}),
    "files": (
        lambda root: _file_checkpoint(root, 1, ["a.json", "bad.json", "c.json"]),
        {"source": 0, "files": ["/data/in/bad.json"]},
    ),
}


@pytest.mark.parametrize("kind", sorted(SOURCE_SKIPS))
def test_a_source_skip_killed_at_any_step_is_finished_by_the_resumed_run(tmp_path, kind):
    make, request = SOURCE_SKIPS[kind]
    done = make(tmp_path / "done")
    plan = plan_skip(CheckpointStorage(str(done)), now=LATER, **request)
    apply_skip(CheckpointStorage(str(done)), plan)
    expected = _tree(done)
    steps = count_steps(apply_skip, str(make(tmp_path / "count")), plan)
    for kill_at in range(steps - 1):  # the last step is "done", after the commit
        root = make(tmp_path / f"killed-{kill_at}")
        assert apply_killed_at(apply_skip, str(root), plan, kill_at) == -signal.SIGKILL
        assert not (root / "commits/1").exists()
        storage = CheckpointStorage(str(root))
        fresh = plan_skip(storage, now=LATER, **request)
        assert fresh.is_allowed(), (kill_at, fresh.failed_preconditions())
        resumed, _ = restrict_to_confirmed(plan, fresh)
        apply_skip(storage, resumed)
        assert _tree(root) == expected, kill_at
