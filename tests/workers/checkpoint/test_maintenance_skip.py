"""Skip (a): an uncommitted batch marked done, its state version N + 1 equal to version N.

Real checkpoints written by PySpark (tests/fixtures): ``killed_mid_batch`` is a run killed before
batch 6's commit (HDFS provider, with the failed run's 7.delta on disk); the RocksDB fixtures lose
their last commit to become the same shape. Expected rows come from the fixtures' own files read by
statefiles.parse_state_file / rocksdbchangelog.parse_changelog, not from the skip's writer.
"""

from __future__ import annotations

import json
import shutil
import signal
import zlib
from pathlib import Path

import pytest

from fixture_paths import KILLED_MID_BATCH, OUR_FIXTURES, SPARK_TEST_RESOURCES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.maintenance.plan import plan_from_json, restrict_to_confirmed
from workers.checkpoint.maintenance.skip import apply_skip, plan_skip
from workers.checkpoint.rocksdbchangelog import parse_changelog
from workers.checkpoint.statefiles import parse_state_file
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

# Long after every fixture's last batch: the query-stopped precondition holds.
LATER = 4_000_000_000.0


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "checkpoint"
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    return target


def _uncommitted(name: str, tmp_path: Path, batch: int) -> Path:
    """A copy of fixture ``name`` whose batch ``batch`` (its latest) has lost its commit."""
    root = _copy(OUR_FIXTURES / name / "checkpoint", tmp_path)
    (root / "commits" / str(batch)).unlink()
    (root / "commits" / f".{batch}.crc").unlink(missing_ok=True)
    return root


def _rows(root: Path, store: str, version: int) -> dict[bytes, bytes]:
    """The rows of an HDFS store's ``version``: the newest snapshot at or below it, then the deltas."""
    directory = root / store
    snapshots = [v for v in range(version, 0, -1) if (directory / f"{v}.snapshot").exists()]
    base = snapshots[0] if snapshots else 0
    names = ([f"{base}.snapshot"] if base else []) + [f"{v}.delta" for v in range(base + 1, version + 1)]
    rows: dict[bytes, bytes] = {}
    for name in names:
        for record in parse_state_file((directory / name).read_bytes(), source=name):
            if record.is_removal:
                rows.pop(record.key, None)
            else:
                rows[record.key] = record.value
    return rows


def _hadoop_crc(data: bytes) -> bytes:
    sums = b"".join(zlib.crc32(data[i : i + 512]).to_bytes(4, "big") for i in range(0, len(data), 512))
    return b"crc\0" + (512).to_bytes(4, "big") + sums


def test_a_skipped_batch_is_committed_with_the_watermark_before_it_and_version_7_equal_to_6(tmp_path):
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_action("skip", storage, {"batch": 6}, now=LATER, quiet_seconds=300)
    assert plan.is_allowed(), plan.failed_preconditions()
    assert [w.path for w in plan.writes] == ["state/0/0/7.delta", "state/0/1/7.delta", "commits/6"]
    version_6 = {store: _rows(root, store, 6) for store in ("state/0/0", "state/0/1")}
    assert all(version_6.values())
    assert any(_rows(root, store, 7) != rows for store, rows in version_6.items())  # the failed run's delta
    assert [finding.code for finding in check_checkpoint(storage)] == ["batch-uncommitted"]

    apply_action(storage, plan_from_json(plan.as_json()), {})

    watermark = json.loads((root / "commits/5").read_text().split("\n")[1])["nextBatchWatermarkMs"]
    commit = (root / "commits/6").read_bytes()
    assert commit == b'v1\n{"nextBatchWatermarkMs":%d}' % watermark
    assert (root / "commits/.6.crc").read_bytes() == _hadoop_crc(commit)
    for store, rows in version_6.items():
        delta = (root / store / "7.delta").read_bytes()
        assert list(parse_state_file(delta, source="7.delta")) == []
        assert (root / store / ".7.delta.crc").read_bytes() == _hadoop_crc(delta)
        assert _rows(root, store, 7) == rows
    assert list(check_checkpoint(storage)) == []  # the "batch 6 has no commit" finding is gone


def test_the_plan_names_what_the_batch_would_have_read(tmp_path):
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path)
    plan = plan_skip(CheckpointStorage(str(root)), batch=6, now=LATER)
    line = (root / "offsets/6").read_text().split("\n")[2]
    before = (root / "offsets/5").read_text().split("\n")[2]
    assert f"source 0: skipped offsets after {before} up to {line}" in plan.notes
    assert any("cannot be taken back" in note for note in plan.notes)


def test_a_stale_snapshot_of_the_skipped_version_is_rewritten_with_the_rows_before_it(tmp_path):
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path)
    # As if Spark's maintenance had snapshotted the failed run's version 7 (here: other rows).
    shutil.copyfile(root / "state/0/0/3.snapshot", root / "state/0/0/7.snapshot")
    version_6 = _rows(root, "state/0/0", 6)
    assert _rows(root, "state/0/0", 7) != version_6
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, batch=6, now=LATER)
    assert "state/0/0/7.snapshot" in [w.path for w in plan.writes]
    apply_skip(storage, plan)
    assert _rows(root, "state/0/0", 7) == version_6


def test_only_the_latest_batch_can_be_skipped(tmp_path):
    root = _copy(OUR_FIXTURES / "killed_mid_batch" / "checkpoint", tmp_path)
    plan = plan_skip(CheckpointStorage(str(root)), batch=5, now=LATER)
    failed = plan.failed_preconditions()
    assert plan.is_empty and [p.name for p in failed] == ["batch-uncommitted"]
    assert "not the latest batch" in failed[0].detail


def test_a_committed_latest_batch_is_nothing_to_do_not_a_refusal(tmp_path):
    # A resumed skip whose first attempt wrote the commit plans this: the run ends as succeeded.
    root = _copy(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", tmp_path)
    plan = plan_skip(CheckpointStorage(str(root)), batch=11, now=LATER)
    assert plan.is_empty and plan.is_allowed(), plan.failed_preconditions()
    assert plan.summary == "nothing to do: batch 11 is committed (commits/11 exists)"


def test_spark_2_1_checkpoint_without_commit_log_is_refused_naming_the_missing_commit():
    # Read in place: planning writes nothing.
    plan = plan_skip(CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-2.1.0")), batch=1, now=LATER)
    assert [p.detail for p in plan.failed_preconditions()] == [
        "commits/0 is missing: the batch before 1 never finished (repair the commit log first)"
    ]


def test_rocksdb_with_changelogs_gets_an_empty_changelog(tmp_path):
    root = _uncommitted("rocksdb_changelog_agg", tmp_path, 11)
    for stale in root.glob("state/0/*/12.zip"):  # the failed run's maintenance uploaded none
        stale.unlink()
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, batch=11, now=LATER)
    assert plan.is_allowed(), plan.failed_preconditions()
    changelogs = [w.path for w in plan.writes if w.path.endswith(".changelog")]
    assert changelogs and all(p.endswith("/12.changelog") for p in changelogs)
    apply_skip(storage, plan)
    for path in changelogs:
        changelog = parse_changelog((root / path).read_bytes(), source=path, codec="lz4")
        assert changelog.version == 1 and list(changelog.records) == []


def test_rocksdb_changelog_store_whose_next_zip_has_no_version_to_copy_is_refused(tmp_path):
    root = _uncommitted("rocksdb_changelog_agg", tmp_path, 11)
    plan = plan_skip(CheckpointStorage(str(root)), batch=11, now=LATER)
    detail = next(p.detail for p in plan.failed_preconditions() if p.name == "state-carried")
    assert "version 12 must be a copy of 11.zip" in detail and "does not exist" in detail


def test_rocksdb_without_changelogs_gets_a_copy_of_the_zip_before(tmp_path):
    root = _uncommitted("rocksdb_no_changelog_agg", tmp_path, 11)
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, batch=11, now=LATER)
    assert plan.is_allowed(), plan.failed_preconditions()
    zips = [w.path for w in plan.writes if w.path.endswith(".zip")]
    assert zips and all(p.endswith("/12.zip") for p in zips)
    assert any((root / p).read_bytes() != (root / p).with_name("11.zip").read_bytes() for p in zips)
    apply_skip(storage, plan)
    for path in zips:
        assert (root / path).read_bytes() == (root / path).with_name("11.zip").read_bytes()


def test_checkpoint_format_2_is_refused_with_the_reason(tmp_path):
    root = _uncommitted("rocksdb_checkpoint_v2_dedup", tmp_path, 11)
    plan = plan_skip(CheckpointStorage(str(root)), batch=11, now=LATER)
    failed = {p.name: p.detail for p in plan.failed_preconditions()}
    assert "checkpoint format 2" in failed["state-carried"]
    assert "commits/10 is v2" in failed["commit-format"]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kill_at", range(9))
def test_a_skip_killed_at_any_step_is_either_undone_or_finished_by_the_resumed_run(tmp_path, kill_at):
    done = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path / "done")
    plan = plan_skip(CheckpointStorage(str(done)), batch=6, now=LATER)
    apply_skip(CheckpointStorage(str(done)), plan)
    expected = _files(done)
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path / "killed")
    assert count_steps(apply_skip, str(_copy(KILLED_MID_BATCH / "checkpoint", tmp_path / "count")), plan) == 9
    assert apply_killed_at(apply_skip, str(root), plan, kill_at) == -signal.SIGKILL
    storage = CheckpointStorage(str(root))
    # Steps: per partition the stale CRC of 7.delta deleted, 7.delta, its CRC; then commits/6, its
    # CRC, the end. The commit is the last write: before it the batch is still to run; after it
    # (kill_at 7: no CRC yet; 8: before the end) the resumed run only adds what is missing.
    assert (root / "commits/6").exists() == (kill_at >= 7)
    fresh = plan_skip(storage, batch=6, now=LATER)
    assert fresh.is_allowed(), fresh.failed_preconditions()
    resumed, _ = restrict_to_confirmed(plan, fresh)
    apply_skip(storage, resumed)
    assert _files(root) == expected


def _sink_fixture(tmp_path: Path, batch: int) -> tuple[Path, Path]:
    """file_source_dedup cut back to an uncommitted ``batch`` whose sink entry was never written."""
    fixture = OUR_FIXTURES / "file_source_dedup"
    root = _copy(fixture / "checkpoint", tmp_path)
    sink = tmp_path / "sink"
    shutil.copytree(fixture / "output/_spark_metadata", sink, copy_function=shutil.copyfile)
    for later in range(batch + 1, 16):
        for log in ("offsets", "commits"):
            (root / log / str(later)).unlink()
    (root / "commits" / str(batch)).unlink()
    for name in (str(batch), f"{batch}.compact", str(batch + 1)):
        (sink / name).unlink(missing_ok=True)
    for stale in root.glob(f"state/0/*/{batch + 2}.*"):
        stale.unlink()
    return root, sink


def test_the_file_sink_gets_an_empty_entry_for_the_skipped_batch(tmp_path):
    root, sink = _sink_fixture(tmp_path, 15)
    storage, sink_storage = CheckpointStorage(str(root)), CheckpointStorage(str(sink))
    plan = plan_action("skip", storage, {"batch": 15}, now=LATER, quiet_seconds=300, sink_storage=sink_storage)
    assert plan.is_allowed(), plan.failed_preconditions()
    assert [w.path for w in plan.writes][-2:] == ["@sink/15", "commits/15"]
    apply_action(storage, plan, {"batch": 15}, sink_storage=sink_storage)
    assert (sink / "15").read_bytes() == b"v1"


def test_undo_of_a_skip_removes_the_sink_entry_and_the_commit_it_wrote_byte_for_byte(tmp_path):
    # One backup manifest for the whole run: the sink's entry and the commit are in it too.
    root, sink = _sink_fixture(tmp_path, 15)
    before = (_files(root), _files(sink))
    storage, sink_storage = CheckpointStorage(str(root)), CheckpointStorage(str(sink))
    request = {"batch": 15, "backup_dir": "_ckptweb_backup/run-3"}
    plan = plan_action("skip", storage, request, now=LATER, quiet_seconds=300, sink_storage=sink_storage)
    apply_action(storage, plan, request, sink_storage=sink_storage)
    assert (sink / "15").exists() and (root / "commits/15").exists()

    undo_request = {"backup_dir": "_ckptweb_backup/run-3"}
    undo = plan_action("undo", storage, undo_request, now=LATER, quiet_seconds=300, sink_storage=sink_storage)
    assert undo.is_allowed(), undo.failed_preconditions()
    apply_action(storage, undo, undo_request, sink_storage=sink_storage)
    restored = ({k: v for k, v in _files(root).items() if not k.startswith("_ckptweb_backup")}, _files(sink))
    assert restored == before


def test_a_skipped_compaction_batch_of_the_sink_repeats_the_entries_before_it(tmp_path):
    spark_compaction = (OUR_FIXTURES / "file_source_dedup/output/_spark_metadata/14.compact").read_text()
    root, sink = _sink_fixture(tmp_path, 14)
    before = {line for name in ("11.compact", "12", "13") for line in (sink / name).read_text().split("\n")[1:]}
    storage, sink_storage = CheckpointStorage(str(root)), CheckpointStorage(str(sink))
    # The fixture's query ran with fileSink.log.compactInterval 3 (Spark derives 12 from 11.compact alone with 10).
    plan = plan_skip(storage, batch=14, now=LATER, sink_storage=sink_storage, compact_interval=3)
    assert plan.is_allowed(), plan.failed_preconditions()
    apply_skip(storage, plan, sink_storage=sink_storage)
    # Spark's own 14.compact, without the entries of batch 14's output.
    expected = [line for line in spark_compaction.split("\n")[1:] if line in before]
    assert len(expected) < len(spark_compaction.split("\n")) - 1
    assert (sink / "14.compact").read_text() == "\n".join(["v1", *expected])


def test_without_the_sink_location_the_plan_says_a_file_sink_needs_its_entry(tmp_path):
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path)
    plan = plan_skip(CheckpointStorage(str(root)), batch=6, now=LATER)
    assert any("No file sink location was given" in note for note in plan.notes)


def test_a_batch_sent_as_text_by_a_form_is_the_same_request(tmp_path):
    root = _copy(KILLED_MID_BATCH / "checkpoint", tmp_path)
    plan = plan_action("skip", CheckpointStorage(str(root)), {"batch": "6"}, now=LATER, quiet_seconds=300)
    assert plan.is_allowed() and plan.parameters["batch"] == 6


def test_a_checkpoint_without_batches_has_nothing_to_skip(tmp_path):
    plan = plan_skip(CheckpointStorage(str(tmp_path)), batch=0, now=LATER)
    assert [p.detail for p in plan.failed_preconditions()] == ["the offset log is empty: no batch has started"]
