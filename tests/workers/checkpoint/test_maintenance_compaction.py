"""Compacting and expiring compactible metadata logs (maintenance/compaction.py).

The rebuilt compaction files are compared byte for byte with the ones PySpark wrote in
tests/fixtures (generated with compactInterval 3): the test removes Spark's ``c.compact``, keeps
batch c's own entries as a plain file ``c`` (the lines of Spark's file after those of its inputs),
rebuilds, and compares. Expiry runs on logs written here in Spark's format with old mtimes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.maintenance.compaction import apply_compaction, plan_compaction
from workers.checkpoint.maintenance.compactionexpiry import expiry_plan_from_listings
from workers.checkpoint.maintenance.plan import plan_from_json, restrict_to_confirmed
from workers.checkpoint.maintenance.sidecars import hadoop_crc_bytes
from workers.checkpoint.metadatalog import read_metadata_log
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

# The fixture generator's spark.sql.streaming.file{Sink,Source}.log.compactInterval.
FIXTURE_INTERVAL = 3
HOUR_AGO = time.time() - 3600


def later() -> float:
    """An hour after now, so after the copies a test just made: the query is stopped. Read when the
    test runs, not at import: a long run reaches a test more than an hour after collecting it."""
    return time.time() + 3600


REBUILDS = [
    pytest.param("windowed_agg_file_sink", "output", None, 11, id="windowed-agg-sink-11"),
    pytest.param("stream_stream_join", "output", None, 11, id="join-sink-11"),
    pytest.param("file_source_dedup", "output", None, 14, id="dedup-sink-14"),
    pytest.param("file_source_dedup", "checkpoint", "sources/0", 5, id="dedup-source-5"),
]


def copy_query(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    for part in ("checkpoint", "output"):
        if (OUR_FIXTURES / name / part).exists():
            shutil.copytree(OUR_FIXTURES / name / part, target / part, copy_function=shutil.copyfile)
    return target


def log_path(query: Path, root: str, log_dir: str | None) -> Path:
    return query / root / (log_dir or "_spark_metadata")


def entry_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[1:]


def keep_own_entries_as_plain_file(log: Path, batch_id: int) -> tuple[bytes, bytes]:
    """Replace Spark's ``c.compact`` by a plain ``c`` with batch c's own entries; return Spark's bytes and CRC.

    Batch c's own entries are the lines of Spark's compaction file that follow the lines of the
    files it was built from (the previous compaction and the batches in between).
    """
    compact = log / f"{batch_id}.compact"
    spark_bytes, spark_crc = compact.read_bytes(), (log / f".{batch_id}.compact.crc").read_bytes()
    previous = batch_id - FIXTURE_INTERVAL
    inputs = [f"{previous}.compact", *(str(b) for b in range(previous + 1, batch_id))]
    prior = [line for name in inputs for line in entry_lines((log / name).read_bytes())]
    lines = entry_lines(spark_bytes)
    assert lines[: len(prior)] == prior, "Spark's compaction file starts with its inputs' entries"
    compact.unlink()
    (log / f".{batch_id}.compact.crc").unlink()
    (log / str(batch_id)).write_bytes(b"\n".join([b"v1", *lines[len(prior) :]]))
    return spark_bytes, spark_crc


def plan_on(query: Path, root: str, log_dir: str | None, **options):
    log_storage = CheckpointStorage(str(query / root))
    checkpoint = CheckpointStorage(str(query / "checkpoint"))
    options.setdefault("compact_interval", FIXTURE_INTERVAL)
    options.setdefault("now", later())
    return log_storage, plan_compaction(log_storage, log_dir, checkpoint_storage=checkpoint, **options)


# --- compaction against what Spark wrote ---


@pytest.mark.parametrize(("name", "root", "log_dir", "batch_id"), REBUILDS)
def test_a_rebuilt_compaction_file_equals_the_one_spark_wrote_byte_for_byte(tmp_path, name, root, log_dir, batch_id):
    query = copy_query(name, tmp_path)
    log = log_path(query, root, log_dir)
    spark_bytes, spark_crc = keep_own_entries_as_plain_file(log, batch_id)

    storage, plan = plan_on(query, root, log_dir, expire=False)
    assert plan.is_allowed(), plan.preconditions
    assert [w.path.rpartition("/")[2] for w in plan.writes] == [f"{batch_id}.compact"]
    apply_compaction(storage, plan)

    assert (log / f"{batch_id}.compact").read_bytes() == spark_bytes
    assert (log / f".{batch_id}.compact.crc").read_bytes() == spark_crc


def test_the_plan_estimates_the_exact_size_of_the_compaction_file(tmp_path):
    query = copy_query("windowed_agg_file_sink", tmp_path)
    spark_bytes, _ = keep_own_entries_as_plain_file(query / "output/_spark_metadata", 11)
    _, plan = plan_on(query, "output", None, expire=False)
    assert plan.writes[0].estimated_bytes == len(spark_bytes)


def test_an_unreadable_compaction_file_is_replaced_and_the_plan_says_so(tmp_path):
    query = copy_query("windowed_agg_file_sink", tmp_path)
    log = query / "output/_spark_metadata"
    spark_bytes, spark_crc = keep_own_entries_as_plain_file(log, 11)
    (log / "11.compact").write_bytes(spark_bytes[: len(spark_bytes) // 2 + 7])  # cut inside a JSON line

    storage, plan = plan_on(query, "output", None, expire=False)
    assert [w.overwrite for w in plan.writes] == [True]
    assert "replaces-unreadable-file" in {p.name for p in plan.preconditions}
    assert plan.is_allowed()
    apply_compaction(storage, plan)
    assert (log / "11.compact").read_bytes() == spark_bytes
    assert (log / ".11.compact.crc").read_bytes() == spark_crc


def test_a_readable_compaction_file_is_left_alone(tmp_path):
    query = copy_query("file_source_dedup", tmp_path)
    _, plan = plan_on(query, "checkpoint", "sources/0", expire=False)
    assert plan.is_empty
    assert "present and readable" in plan.summary


def test_without_the_batch_s_own_entries_the_compaction_is_refused(tmp_path):
    query = copy_query("stream_stream_join", tmp_path)
    log = query / "output/_spark_metadata"
    (log / "11.compact").unlink()
    (log / "9").unlink()
    shutil.copyfile(log / "10", log / "12")  # a later batch: compaction 11 is due

    _, plan = plan_on(query, "output", None, expire=False)
    failed = {p.name: p.detail for p in plan.failed_preconditions()}
    assert set(failed) == {"inputs-readable"}
    assert "_spark_metadata/9 is missing" in failed["inputs-readable"]
    assert "_spark_metadata/11 is missing" in failed["inputs-readable"]


def test_a_corrupt_input_refuses_the_compaction_and_names_the_file(tmp_path):
    query = copy_query("windowed_agg_file_sink", tmp_path)
    log = query / "output/_spark_metadata"
    keep_own_entries_as_plain_file(log, 11)
    (log / "9").write_bytes(b"v1\n{not json")
    _, plan = plan_on(query, "output", None, expire=False)
    assert [p.name for p in plan.failed_preconditions()] == ["inputs-readable"]
    assert "_spark_metadata/9" in plan.failed_preconditions()[0].detail


def test_the_sink_retention_drops_entries_older_than_it_as_spark_s_should_retain_does(tmp_path):
    query = copy_query("windowed_agg_file_sink", tmp_path)
    log = query / "output/_spark_metadata"
    spark_bytes, _ = keep_own_entries_as_plain_file(log, 11)
    lines = entry_lines(spark_bytes)
    times = sorted(json.loads(line)["modificationTime"] for line in lines)
    now = later()  # one instant for the expectation and the plan
    now_ms = int(now * 1000)
    retention_ms = now_ms - times[len(times) // 2]  # keeps the newer half (ties included)
    expected = [line for line in lines if now_ms - json.loads(line)["modificationTime"] <= retention_ms]
    assert 0 < len(expected) < len(lines)

    storage, plan = plan_on(query, "output", None, expire=False, retention_ms=retention_ms, now=now)
    apply_compaction(storage, plan)
    assert (log / "11.compact").read_bytes() == b"\n".join([b"v1", *expected])


def test_the_sink_log_is_found_below_the_output_directory_or_at_its_root(tmp_path):
    query = copy_query("windowed_agg_file_sink", tmp_path)
    checkpoint = CheckpointStorage(str(query / "checkpoint"))
    for root, expected_dir in ((query / "output", "_spark_metadata"), (query / "output/_spark_metadata", "")):
        plan = plan_compaction(
            CheckpointStorage(str(root)), "", checkpoint_storage=checkpoint, compact_interval=3, now=later()
        )
        assert (plan.parameters["log_dir"], plan.parameters["kind"]) == (expected_dir, "sink")


# --- expiry on logs written in Spark's format ---


def sink_entry(batch_id: int) -> bytes:
    return (
        b'{"path":"file:///out/part-%d-c000.json","size":%d,"isDir":false,"modificationTime":%d,'
        b'"blockReplication":1,"blockSize":33554432,"action":"add"}'
        % (batch_id, 100 + batch_id, 1_700_000_000_000 + batch_id)
    )


def write_sink_log(
    log: Path, last: int, *, interval: int = 3, without: tuple[str, ...] = (), mtime: float = HOUR_AGO
) -> dict[str, bytes]:
    """Batches 0..last as Spark writes them with ``interval``, each with its Hadoop CRC; returns name -> bytes."""
    log.mkdir(parents=True, exist_ok=True)
    files = {}
    for batch_id in range(last + 1):
        compaction = (batch_id + 1) % interval == 0
        name = f"{batch_id}.compact" if compaction else str(batch_id)
        entries = range(batch_id + 1) if compaction else [batch_id]
        files[name] = b"v1" + b"".join(b"\n" + sink_entry(i) for i in entries)
    for name, data in files.items():
        if name in without:
            continue
        for path, content in ((log / name, data), (log / f".{name}.crc", hadoop_crc_bytes(data))):
            path.write_bytes(content)
            os.utime(path, (mtime, mtime))
    return files


def expire_on(log: Path, checkpoint: Path, **options):
    options.setdefault("compact_interval", 3)
    options.setdefault("cleanup_delay_seconds", 600)
    options.setdefault("now", time.time())
    options.setdefault("compact", False)
    storage = CheckpointStorage(str(log.parent))
    return storage, plan_compaction(
        storage, log.name, checkpoint_storage=CheckpointStorage(str(checkpoint)), kind="sink", **options
    )


def test_expiry_deletes_what_delete_expired_log_deletes_oldest_first_with_crcs_first(tmp_path):
    log = tmp_path / "out/_spark_metadata"
    write_sink_log(log, 20)
    # Latest 20, keep 4: minBatchId 17, so everything before compaction 14 goes (Spark's arithmetic).
    storage, plan = expire_on(log, tmp_path / "checkpoint", min_batches_to_retain=4)
    expected = []
    for batch_id in range(14):
        name = f"{batch_id}.compact" if batch_id % 3 == 2 else str(batch_id)
        expected += [f"_spark_metadata/.{name}.crc", f"_spark_metadata/{name}"]
    assert [d.path for d in plan.deletes] == expected
    assert plan.is_allowed(), plan.preconditions
    before = read_metadata_log(storage, "_spark_metadata", kind="sink", default_interval=3)

    apply_compaction(storage, plan)
    after = read_metadata_log(storage, "_spark_metadata", kind="sink", default_interval=3)
    assert after.live_entries == before.live_entries == 21
    assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == sorted(
        ["14.compact", "15", "16", "17.compact", "18", "19", "20.compact"]
    )


def test_expiry_keeps_files_younger_than_the_cleanup_delay(tmp_path):
    log = tmp_path / "out/_spark_metadata"
    write_sink_log(log, 20)
    os.utime(log / "13", (time.time(), time.time()))
    _, plan = expire_on(log, tmp_path / "checkpoint", min_batches_to_retain=4)
    deleted = {d.path for d in plan.deletes}
    assert "_spark_metadata/13" not in deleted and "_spark_metadata/12" in deleted


def test_expiry_deletes_nothing_while_fewer_than_min_batches_to_retain_exist(tmp_path):
    log = tmp_path / "out/_spark_metadata"
    write_sink_log(log, 20)
    _, plan = expire_on(log, tmp_path / "checkpoint")  # Spark's default 100
    assert plan.is_empty and "nothing to expire" in plan.summary


def test_expiry_of_a_source_log_keeps_the_batches_the_next_run_reads(tmp_path):
    query = copy_query("file_source_dedup", tmp_path)
    offsets = query / "checkpoint/offsets/15"
    offsets.write_bytes(offsets.read_bytes().replace(b'{"logOffset":7}', b'{"logOffset":3}'))
    for path in (query / "checkpoint/sources/0").iterdir():
        os.utime(path, (HOUR_AGO, HOUR_AGO))
    storage = CheckpointStorage(str(query / "checkpoint"))
    plan = plan_compaction(
        storage, "sources/0", checkpoint_storage=storage, compact_interval=3, min_batches_to_retain=1, now=later()
    )
    # Latest 7, keep 1: everything before compaction 5 would go, but the next run reads 4 (after logOffset 3).
    failed = {p.name: p.detail for p in plan.failed_preconditions()}
    assert set(failed) == {"retention"}
    assert "from 4 on" in failed["retention"]


def test_expiry_planned_from_listings_alone_never_touches_storage():
    listing = [FileInfo(name, 10, 0.0, False) for name in ("0", "1", "2.compact", "3", "4", "5.compact", "6")]
    plan = expiry_plan_from_listings(
        listing, [], [], log_dir="", kind="sink", compact_interval=3, min_batches_to_retain=2, now=1000.0
    )
    assert [d.path for d in plan.deletes] == ["0", "1"]
    assert plan.bytes_freed == 20


# --- compaction and expiry in one plan, killed at every step ---


# 11.compact (rebuilt from 8.compact, 9, 10 and a plain 11) and its CRC, then the expired files
# 0..4 with their CRCs (latest 11, keep 4: before compaction 5), then "done".
COMBINED_STEPS = 2 + 10 + 1


def combined_scenario(tmp_path: Path) -> tuple[Path, CheckpointStorage, dict[str, bytes]]:
    log = tmp_path / "out/_spark_metadata"
    files = write_sink_log(log, 11, without=("11.compact",))
    plain = b"v1\n" + sink_entry(11)
    (log / "11").write_bytes(plain)
    os.utime(log / "11", (HOUR_AGO, HOUR_AGO))
    return log, CheckpointStorage(str(log.parent)), files


def test_the_combined_plan_writes_the_compaction_file_before_deleting_anything(tmp_path):
    log, storage, files = combined_scenario(tmp_path)
    _, plan = expire_on(log, tmp_path / "checkpoint", compact=True, min_batches_to_retain=4)
    assert [w.path for w in plan.writes] == ["_spark_metadata/11.compact"]
    assert [d.path for d in plan.deletes][-2:] == ["_spark_metadata/.4.crc", "_spark_metadata/4"]
    assert plan.is_allowed(), plan.preconditions
    assert count_steps(apply_compaction, storage.url, plan) == COMBINED_STEPS
    assert (log / "11.compact").read_bytes() == files["11.compact"]


@pytest.mark.parametrize("kill_at", range(COMBINED_STEPS))
def test_a_run_killed_at_any_step_leaves_a_readable_log_and_a_rerun_completes_it(tmp_path, kill_at):
    log, storage, files = combined_scenario(tmp_path)
    _, confirmed = expire_on(log, tmp_path / "checkpoint", compact=True, min_batches_to_retain=4)

    assert apply_killed_at(apply_compaction, storage.url, confirmed, kill_at) == -signal.SIGKILL
    names = {p.name for p in log.iterdir()}
    if "11.compact" in names:
        # Never half a file: once there, it is complete and the log reads as before expiry.
        assert (log / "11.compact").read_bytes() == files["11.compact"]
        assert read_metadata_log(storage, "_spark_metadata", kind="sink", default_interval=3).live_entries == 12
    else:
        assert {"0", "1", "2.compact", "3", "4"} <= names  # nothing deleted before the write
        with pytest.raises(CheckpointError):
            read_metadata_log(storage, "_spark_metadata", kind="sink", default_interval=3)
    remaining = sorted({int(n.split(".")[0]) for n in names if n[0].isdigit()})
    assert remaining == list(range(remaining[0], 12)), "what remains is a contiguous suffix"

    _, fresh = expire_on(log, tmp_path / "checkpoint", compact=True, min_batches_to_retain=4)
    rest, _ = restrict_to_confirmed(confirmed, fresh)
    apply_compaction(storage, rest)
    assert sorted(p.name for p in log.iterdir()) == sorted(
        [
            ".5.compact.crc",
            "5.compact",
            ".6.crc",
            "6",
            ".7.crc",
            "7",
            ".8.compact.crc",
            "8.compact",
            ".9.crc",
            "9",
            ".10.crc",
            "10",
            "11",
            "11.compact",
            ".11.compact.crc",
        ]
    )
    assert (log / "11.compact").read_bytes() == files["11.compact"]
    assert read_metadata_log(storage, "_spark_metadata", kind="sink", default_interval=3).live_entries == 12


def test_an_empty_log_has_nothing_to_compact_or_expire(tmp_path):
    (tmp_path / "out/_spark_metadata").mkdir(parents=True)
    storage = CheckpointStorage(str(tmp_path / "out"))
    plan = plan_compaction(
        storage, None, checkpoint_storage=CheckpointStorage(str(tmp_path / "checkpoint")), now=time.time()
    )
    assert plan.is_empty and plan.is_allowed()
    assert plan.summary == (
        "nothing to compact: _spark_metadata has no compaction batch yet (the first is batch 9); "
        "nothing to expire: _spark_metadata has no batch file"
    )


def test_the_plan_survives_a_json_round_trip_and_applies_from_it(tmp_path):
    log, storage, files = combined_scenario(tmp_path)
    _, plan = expire_on(log, tmp_path / "checkpoint", compact=True, min_batches_to_retain=4)
    stored = plan_from_json(json.loads(json.dumps(plan.as_json())))
    assert stored == plan
    apply_compaction(storage, stored)
    assert (log / "11.compact").read_bytes() == files["11.compact"]
