"""iter_next_entries on real files: Spark's offsets entries copied under consecutive ids."""

from __future__ import annotations

from bench.checkpoint_history import read_template, write_batches
from workers.checkpoint.errors import CorruptFileError, StorageError
from workers.checkpoint.logdir import read_offset_seq
from workers.checkpoint.probe import iter_next_entries
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def test_probing_stops_at_the_first_missing_name_and_reads_nothing_after_it(tmp_path):
    write_batches(tmp_path, range(0, 5), read_template())
    write_batches(tmp_path, range(6, 8), read_template())  # behind a gap: only a listing sees them
    storage = CheckpointStorage(str(tmp_path))

    found = [batch_id for batch_id, _ in iter_next_entries(storage, read_offset_seq, 2)]

    assert found == [2, 3, 4]
    assert (storage.calls.read, storage.calls.list) == (4, 0)


def test_a_corrupt_entry_is_yielded_as_its_error_and_probing_goes_on(tmp_path):
    write_batches(tmp_path, range(0, 3), read_template())
    (tmp_path / "offsets" / "1").write_bytes(b"v1\n{not json")

    entries = list(iter_next_entries(CheckpointStorage(str(tmp_path)), read_offset_seq, 0))

    assert [batch_id for batch_id, _ in entries] == [0, 1, 2]
    assert isinstance(entries[1][1], CorruptFileError) and "offsets/1" in str(entries[1][1])


def test_probing_reads_no_more_than_the_limit(tmp_path):
    write_batches(tmp_path, range(0, 10), read_template())
    storage = CheckpointStorage(str(tmp_path))

    assert len(list(iter_next_entries(storage, read_offset_seq, 0, limit=4))) == 4
    assert storage.calls.read == 4


def test_an_entry_storage_cannot_read_ends_the_probe(tmp_path):
    write_batches(tmp_path, range(0, 5), read_template())
    (tmp_path / "offsets" / "2").unlink()
    (tmp_path / "offsets" / "2").mkdir()  # reading a directory fails in storage, not in parsing
    storage = CheckpointStorage(str(tmp_path))

    entries = list(iter_next_entries(storage, read_offset_seq, 0))

    assert [batch_id for batch_id, _ in entries] == [0, 1, 2]
    assert isinstance(entries[2][1], StorageError) and "offsets/2" in str(entries[2][1])
    assert storage.calls.read == 3
