"""Atomic writes and idempotent deletes at the storage edge, on a local directory and in memory."""

from __future__ import annotations

import uuid

import pytest

from workers.checkpoint.errors import PathNotAllowedError, StorageError
from workers.checkpoint.layout import is_temporary_file
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


@pytest.fixture(params=["local", "memory"])
def storage(request, tmp_path):
    url = str(tmp_path) if request.param == "local" else f"memory://writes-{uuid.uuid4().hex}"
    return CheckpointStorage(url)


def _names(storage, directory):
    return [info.name for info in storage.list_dir(directory)]


def test_a_written_file_appears_whole_with_no_temporary_file_left(storage):
    storage.write_atomic("state/0/0/7.snapshot", b"payload")

    assert storage.read_bytes("state/0/0/7.snapshot") == b"payload"
    assert _names(storage, "state/0/0") == ["7.snapshot"]
    assert storage.calls.write == 1 and storage.calls.bytes_written == 7


def test_an_existing_file_is_never_replaced_without_overwrite(storage):
    storage.write_atomic("offsets/3", b"first")

    with pytest.raises(StorageError, match="offsets/3: .*already exists"):
        storage.write_atomic("offsets/3", b"second")

    assert storage.read_bytes("offsets/3") == b"first"
    assert _names(storage, "offsets") == ["3"]


def test_overwrite_replaces_the_content(storage):
    storage.write_atomic("sources/0/9.compact", b"old")
    storage.write_atomic("sources/0/9.compact", b"new content", overwrite=True)

    assert storage.read_bytes("sources/0/9.compact") == b"new content"


def test_a_write_that_fails_before_the_rename_leaves_neither_the_file_nor_a_temporary(storage, monkeypatch):
    def broken_rename(*args, **kwargs):
        raise OSError("disk vanished")

    monkeypatch.setattr(storage, "_rename_into_place", broken_rename)
    with pytest.raises(StorageError, match="state/0/0/7.snapshot: cannot write the file: OSError: disk vanished"):
        storage.write_atomic("state/0/0/7.snapshot", b"payload")

    assert _names(storage, "state/0/0") == []


def test_temporary_names_are_the_ones_spark_readers_ignore(storage, monkeypatch):
    seen = []
    original = storage._write_file

    def spy(path, data):
        seen.append(path.rsplit("/", 1)[1])
        original(path, data)

    monkeypatch.setattr(storage, "_write_file", spy)
    storage.write_atomic("commits/12", b"v1\n{}")

    assert len(seen) == 1 and is_temporary_file(seen[0]) and seen[0].startswith(".12.")


def test_deleting_twice_is_harmless_and_says_whether_the_file_was_there(storage):
    storage.write_atomic("offsets/1", b"x")

    assert storage.delete("offsets/1") is True
    assert storage.delete("offsets/1") is False
    assert _names(storage, "offsets") == []


@pytest.mark.parametrize("relpath", ["", "../outside", "offsets/../../etc", "/absolute"])
def test_deletes_and_writes_stay_inside_the_root(storage, relpath):
    with pytest.raises(PathNotAllowedError):
        storage.delete(relpath)
    if relpath:
        with pytest.raises(PathNotAllowedError):
            storage.write_atomic(relpath, b"x")
