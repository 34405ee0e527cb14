from __future__ import annotations

import pytest

from workers.checkpoint.errors import CorruptFileError, MissingFileError
from workers.checkpoint.inventory import list_tree
from workers.checkpoint.logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

INCONSISTENT = "checkpoint-test-offsetId-commitId-inconsistent"


@pytest.fixture
def inconsistent(spark_resources):
    return CheckpointStorage(str(spark_resources / INCONSISTENT))


def test_batch_ids_of_the_inconsistent_fixture_have_a_hole_at_3(inconsistent):
    assert list_batch_ids(inconsistent, "offsets") == [0, 1, 2, 4]
    assert list_batch_ids(inconsistent, "commits") == [0, 1, 2]


def test_hadoop_crc_files_are_not_batches(spark_resources):
    storage = CheckpointStorage(str(spark_resources / "checkpoint-version-3.2.0-deduplication-with-repartition"))
    assert [info.name for info in storage.list_dir("offsets")] == [".0.crc", ".1.crc", "0", "1"]
    assert list_batch_ids(storage, "offsets") == [0, 1]


def test_checkpoint_from_before_the_commit_log_has_no_commits(spark_resources):
    storage = CheckpointStorage(str(spark_resources / "checkpoint-version-2.1.0"))
    assert list_batch_ids(storage, "commits") == []


def test_batch_ids_ignore_directories_temporary_files_and_other_names(tmp_path, write_files):
    write_files(
        tmp_path,
        {
            "log/0": b"",
            "log/1": b"",
            "log/12": b"",
            "log/.1.crc": b"",
            "log/.2.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.tmp": b"",
            "log/7.compact": b"",
            "log/notes.txt": b"",
            "log/5/inner": b"",
        },
    )
    storage = CheckpointStorage(str(tmp_path))
    assert list_batch_ids(storage, "log") == [0, 1, 12]
    assert list_batch_ids(storage, "log", compactible=True) == [0, 1, 7, 12]
    # A listing taken once answers the same, and a caller changing its list changes no other's.
    listing = list_tree(storage)
    first = list_batch_ids(listing, "log")
    first.append(99)
    assert list_batch_ids(listing, "log") == [0, 1, 12]
    assert list_batch_ids(listing, "log", compactible=True) == [0, 1, 7, 12]
    assert list_batch_ids(listing, "missing") == []


def test_read_offset_seq_reads_offsets_slash_batch_id(inconsistent):
    offset_seq = read_offset_seq(inconsistent, 4)
    assert (offset_seq.metadata.batch_watermark_ms, offset_seq.metadata.batch_timestamp_ms) == (5000, 1531292030005)
    assert offset_seq.offsets == ("4",)


def test_read_commit_reads_commits_slash_batch_id(inconsistent):
    assert read_commit(inconsistent, 2).next_batch_watermark_ms == 0


def test_reading_a_batch_in_the_hole_is_a_missing_file(inconsistent):
    with pytest.raises(MissingFileError, match=r"^offsets/3: no such file$"):
        read_offset_seq(inconsistent, 3)
    with pytest.raises(MissingFileError, match=r"^commits/4: no such file$"):
        read_commit(inconsistent, 4)


def test_parse_errors_name_the_relative_path(tmp_path, write_files):
    write_files(tmp_path, {"offsets/2": b"v1\n{oops\n2", "commits/2": b"w1\n{}"})
    storage = CheckpointStorage(str(tmp_path))
    with pytest.raises(CorruptFileError, match=r"^offsets/2: line 2 \(metadata\): invalid JSON"):
        read_offset_seq(storage, 2)
    with pytest.raises(CorruptFileError, match=r"^commits/2: Log file was malformed"):
        read_commit(storage, 2)


@pytest.mark.parametrize("batch_id", [-1, "3", 1.0, True])
def test_batch_id_must_be_a_non_negative_int(inconsistent, batch_id):
    with pytest.raises(ValueError, match="batch_id must be a non-negative int"):
        read_offset_seq(inconsistent, batch_id)


def test_stream_metadata_is_found_in_the_checkpoint_root(inconsistent):
    assert find_stream_metadata(inconsistent).id == "d4358946-170c-49a7-823b-d8e4e9126616"


def test_checkpoint_without_metadata_file_has_no_stream_metadata(tmp_path):
    assert find_stream_metadata(CheckpointStorage(str(tmp_path))) is None


def test_every_fixture_checkpoint_has_its_metadata_offsets_and_commits_readable(spark_resources, fixture_checkpoint):
    storage = CheckpointStorage(str(spark_resources / fixture_checkpoint))
    assert find_stream_metadata(storage) is not None
    for batch_id in list_batch_ids(storage, "offsets"):
        read_offset_seq(storage, batch_id)
    for batch_id in list_batch_ids(storage, "commits"):
        read_commit(storage, batch_id)
