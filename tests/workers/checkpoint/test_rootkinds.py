"""What a path given as a checkpoint or a file sink's output holds (workers.checkpoint.rootkinds)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import NotACheckpointError, PathNotAllowedError
from workers.checkpoint.metadatalog import read_metadata_log, sink_log_location
from workers.checkpoint.rootkinds import RootKind, SinkOutputKind, classify_checkpoint_root, classify_sink_output
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

SINK_FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink"
# What PySpark 4.3 leaves when a query starts and stops before its first batch
# (tests/spark/test_rootkinds_vs_spark.py checks this against a real query).
NOT_STARTED_FILES = {"metadata": b'{"id":"7f2f8253-89e7-4971-8c29-64755cc9983d"}\n', ".metadata.crc": b"crc"}
NOT_STARTED_DIRS = ("offsets", "commits", "sources/0")


def _not_started(root: Path) -> Path:
    for name, data in NOT_STARTED_FILES.items():
        root.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for name in NOT_STARTED_DIRS:
        (root / name).mkdir(parents=True)
    return root


def _classify(path: Path | str):
    return classify_checkpoint_root(CheckpointStorage(str(path)))


def test_a_spark_written_checkpoint_is_a_checkpoint_with_what_it_holds():
    root = _classify(SINK_FIXTURE / "checkpoint")
    assert root.kind is RootKind.CHECKPOINT
    assert root.found == ("commits", "metadata", "offsets", "state")
    assert root.refusal is None and root.warning is None


def test_a_missing_path_is_refused_naming_it(tmp_path):
    root = _classify(tmp_path / "typo")
    assert root.kind is RootKind.MISSING
    assert str(root.refusal) == f"{(tmp_path / 'typo').as_uri()}: no such file or folder"


def test_a_file_is_refused_naming_it(tmp_path):
    (tmp_path / "offsets").write_bytes(b"v1\n")
    root = _classify(tmp_path / "offsets")
    assert root.kind is RootKind.FILE
    assert str(root.refusal) == (
        f"{(tmp_path / 'offsets').as_uri()}: this is a file, not a checkpoint folder: "
        "give the folder holding metadata, offsets/ and commits/"
    )


def test_a_folder_without_checkpoint_entries_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_bytes(b"x")
    (tmp_path / "metadata").mkdir()  # a folder named like the file is not the file
    root = _classify(tmp_path)
    assert root.kind is RootKind.NOT_A_CHECKPOINT
    assert isinstance(root.refusal, NotACheckpointError)
    assert str(root.refusal) == (
        f"{tmp_path.as_uri()}: no metadata file and no offsets/, commits/ or state/ folder: not a Spark checkpoint"
    )


def test_an_empty_folder_is_a_query_that_has_not_started_accepted_with_a_warning(tmp_path):
    root = _classify(tmp_path)
    assert (root.kind, root.refusal) == (RootKind.NOT_STARTED, None)
    assert root.warning == (
        f"{tmp_path.as_uri()}: the folder is empty: a query given this checkpoint location has not started "
        "(Spark writes metadata, offsets/ and commits/ when it starts); its batches appear once it runs"
    )


def test_a_sink_output_given_as_the_checkpoint_is_refused_with_what_it_is():
    root = _classify(SINK_FIXTURE / "output")
    assert root.kind is RootKind.NOT_A_CHECKPOINT
    assert "this is a file sink's output (it holds _spark_metadata), not its checkpoint" in str(root.refusal)


def test_a_query_that_ran_no_batch_is_accepted_with_a_warning(tmp_path):
    root = _classify(_not_started(tmp_path / "ckpt"))
    assert root.kind is RootKind.NOT_STARTED
    assert root.refusal is None
    assert root.warning == (
        f"{(tmp_path / 'ckpt').as_uri()}: the query has not run a batch yet (no offsets/<N> file); "
        "its batches appear once Spark writes them"
    )


def test_only_a_batch_file_in_offsets_makes_a_started_query(tmp_path):
    root = _not_started(tmp_path / "ckpt")
    (root / "offsets" / ".0.crc").write_bytes(b"crc")
    (root / "offsets" / ".0.0d1c6a3e-0d37-4b8f-a0b6-2a3b7c1d9e8f.tmp").write_bytes(b"")
    assert _classify(root).kind is RootKind.NOT_STARTED
    (root / "offsets" / "0").write_bytes(b"v1\n{}\n")
    assert _classify(root).kind is RootKind.CHECKPOINT


def test_a_checkpoint_on_the_memory_filesystem_is_classified_like_a_local_one(memory_fs):
    memory_fs.pipe({"/ckpt/metadata": b"{}", "/ckpt/offsets/0": b"v1\n", "/other/notes": b"x"})
    assert classify_checkpoint_root(CheckpointStorage("memory://ckpt")).kind is RootKind.CHECKPOINT
    assert classify_checkpoint_root(CheckpointStorage("memory://ckpt/metadata")).kind is RootKind.FILE
    assert classify_checkpoint_root(CheckpointStorage("memory://nothing")).kind is RootKind.MISSING
    assert classify_checkpoint_root(CheckpointStorage("memory://other")).kind is RootKind.NOT_A_CHECKPOINT


def test_a_sink_log_that_links_out_of_the_allowed_roots_is_refused(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "out").mkdir(parents=True)
    (outside / "_spark_metadata").mkdir(parents=True)
    (allowed / "out" / "_spark_metadata").symlink_to(outside / "_spark_metadata")
    storage = CheckpointStorage(str(allowed / "out"), allowed_roots=[str(allowed)])
    with pytest.raises(PathNotAllowedError, match="^_spark_metadata: the path is a symbolic link to a place outside"):
        classify_sink_output(storage)


# --- a file sink's output --------------------------------------------------------------------


@pytest.mark.parametrize("given", ["output", "output/_spark_metadata"], ids=["output folder", "log folder"])
def test_a_sink_output_is_found_from_its_folder_or_its_log_folder(given):
    sink = classify_sink_output(CheckpointStorage(str(SINK_FIXTURE / given)))
    assert sink.kind is SinkOutputKind.SINK_LOG
    assert sink.log_url == (SINK_FIXTURE / "output" / "_spark_metadata").as_uri()
    assert sink.refusal is None


def test_a_missing_sink_output_is_refused_naming_it(tmp_path):
    sink = classify_sink_output(CheckpointStorage(str(tmp_path / "out")))
    assert sink.kind is SinkOutputKind.MISSING
    assert str(sink.refusal) == (
        f"{(tmp_path / 'out').as_uri()}: no such folder (a file sink creates its _spark_metadata when the query starts)"
    )


def test_a_file_given_as_the_sink_output_is_refused(tmp_path):
    (tmp_path / "part-0.json").write_bytes(b"{}")
    sink = classify_sink_output(CheckpointStorage(str(tmp_path / "part-0.json")))
    assert sink.kind is SinkOutputKind.FILE
    assert str(sink.refusal).endswith("this is a file: give the sink's output folder or its _spark_metadata folder")


def test_a_folder_without_a_sink_log_is_refused(tmp_path):
    (tmp_path / "_spark_metadata").write_bytes(b"not a folder")
    sink = classify_sink_output(CheckpointStorage(str(tmp_path)))
    assert sink.kind is SinkOutputKind.NO_SINK_LOG
    assert str(sink.refusal) == (
        f"{tmp_path.as_uri()}: no _spark_metadata folder here: "
        "not a file sink's output (give the folder the query writes to)"
    )


def test_an_empty_sink_log_of_a_query_that_ran_no_batch_is_a_sink_log(tmp_path):
    (tmp_path / "out" / "_spark_metadata").mkdir(parents=True)
    assert classify_sink_output(CheckpointStorage(str(tmp_path / "out"))).kind is SinkOutputKind.SINK_LOG


def test_a_copy_of_a_sink_log_under_another_name_is_told_by_its_files(tmp_path):
    backup = tmp_path / "sink-log-backup-2026-11"
    shutil.copytree(SINK_FIXTURE / "output" / "_spark_metadata", backup)
    sink = classify_sink_output(CheckpointStorage(str(backup)))
    assert (sink.kind, sink.refusal, sink.log_url) == (SinkOutputKind.SINK_LOG, None, backup.as_uri())
    spark_named = read_metadata_log(CheckpointStorage(str(SINK_FIXTURE / "output")), "_spark_metadata", kind="sink")
    storage = CheckpointStorage(str(backup))
    log_dir, _ = sink_log_location(storage)
    copied = read_metadata_log(storage, log_dir, kind="sink")
    assert (copied.latest_batch, copied.live_entries) == (spark_named.latest_batch, spark_named.live_entries)


def test_numbered_files_that_are_no_sink_log_are_refused_with_what_was_read(tmp_path):
    # A checkpoint's offsets/ has numbered "v1" files too: its lines are no SinkFileStatus.
    offsets = tmp_path / "offsets-copy"
    shutil.copytree(SINK_FIXTURE / "checkpoint" / "offsets", offsets)
    sink = classify_sink_output(CheckpointStorage(str(offsets)))
    assert sink.kind is SinkOutputKind.NOT_A_SINK_LOG
    newest = max(int(path.name) for path in offsets.iterdir() if path.name.isdigit())
    assert str(sink.refusal).startswith(f"{offsets.as_uri()}: its numbered files are not a file sink log: {newest}: ")
