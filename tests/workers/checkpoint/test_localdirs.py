"""Reads inside CheckpointStorage.reusing_directories: the same bytes and refusals as without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.checkpoint.errors import MissingFileError, PathNotAllowedError, StorageError
from workers.checkpoint.localdirs import HeldDirectories
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "q" / "offsets").mkdir(parents=True)
    (root / "q" / "commits").mkdir()
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    for batch_id in range(3):
        (root / "q" / "offsets" / str(batch_id)).write_bytes(f"v1\noffsets {batch_id}\n".encode())
        (root / "q" / "commits" / str(batch_id)).write_bytes(f"v1\ncommit {batch_id}\n".encode())
    return root, outside


def _storage(root: Path) -> CheckpointStorage:
    return CheckpointStorage(str(root / "q"), allowed_roots=[str(root)])


def test_reads_inside_the_block_equal_reads_outside_it(roots):
    root, _ = roots
    storage = _storage(root)
    names = [f"{log}/{batch_id}" for log in ("offsets", "commits") for batch_id in range(3)]
    outside_the_block = [storage.read_bytes(name) for name in names]
    with storage.reusing_directories():
        inside_the_block = [storage.read_bytes(name) for name in names]
        assert storage.read_range("offsets/1", 3) == (root / "q" / "offsets" / "1").read_bytes()[3:]
    assert inside_the_block == outside_the_block == [(root / "q" / name).read_bytes() for name in names]


def test_a_directory_is_checked_once_and_every_descriptor_is_closed_after_the_block(roots):
    root, _ = roots
    storage = _storage(root)
    checked = []
    check = storage._check_opened_file

    def counting_check(descriptor: int, path: str, relpath: str) -> None:
        checked.append(path)
        check(descriptor, path, relpath)

    storage._check_opened_file = counting_check
    before = _open_descriptors()
    with storage.reusing_directories():
        for batch_id in range(3):
            storage.read_bytes(f"offsets/{batch_id}")
            storage.read_bytes(f"commits/{batch_id}")
        assert _open_descriptors() == before + 2
    assert checked == [f"{root}/q/offsets", f"{root}/q/commits"]
    assert _open_descriptors() == before
    # Outside the block every read checks its file again.
    storage.read_bytes("offsets/0")
    assert checked[-1] == f"{root}/q/offsets/0"


def test_a_file_that_links_out_of_the_roots_is_refused(roots):
    root, outside = roots
    (root / "q" / "offsets" / "3").symlink_to(outside / "secret")
    storage = _storage(root)
    with storage.reusing_directories():
        assert storage.read_bytes("offsets/0").startswith(b"v1")  # the directory is held
        with pytest.raises(PathNotAllowedError) as raised:
            storage.read_bytes("offsets/3")
    assert str(raised.value).startswith("offsets/3: ")


def test_a_file_that_links_inside_the_roots_is_read(roots):
    root, _ = roots
    (root / "q" / "offsets" / "3").symlink_to(root / "q" / "commits" / "0")
    storage = _storage(root)
    with storage.reusing_directories():
        assert storage.read_bytes("offsets/3") == b"v1\ncommit 0\n"


def test_a_directory_that_links_out_of_the_roots_is_refused_for_each_file(roots):
    root, outside = roots
    (root / "q" / "state").symlink_to(outside, target_is_directory=True)
    storage = _storage(root)
    with storage.reusing_directories():
        for _ in range(2):  # a refused directory is not held
            with pytest.raises(PathNotAllowedError) as raised:
                storage.read_bytes("state/secret")
            assert str(raised.value).startswith("state/secret: ")


def test_a_directory_swapped_for_a_link_after_it_was_checked_does_not_redirect_reads(roots):
    root, outside = roots
    storage = _storage(root)
    with storage.reusing_directories():
        storage.read_bytes("offsets/0")
        (root / "q" / "offsets").rename(root / "q" / "offsets-moved")
        (root / "q" / "offsets").symlink_to(outside, target_is_directory=True)
        with pytest.raises(MissingFileError):
            storage.read_bytes("offsets/secret")
    # Without the held directory, the link is resolved and refused.
    with pytest.raises(PathNotAllowedError):
        storage.read_bytes("offsets/secret")


@pytest.mark.parametrize(
    ("relpath", "error"),
    [
        ("offsets/9", MissingFileError),
        ("nowhere/0", MissingFileError),
        ("offsets/0/x", StorageError),
        ("offsets/dangling", MissingFileError),
        ("offsets/loop", StorageError),
    ],
)
def test_missing_and_unreadable_files_give_the_same_errors_inside_the_block(roots, relpath, error):
    root, _ = roots
    (root / "q" / "offsets" / "dangling").symlink_to(root / "q" / "gone")
    (root / "q" / "offsets" / "loop").symlink_to(root / "q" / "offsets" / "loop")
    storage = _storage(root)
    with pytest.raises(error) as outside_the_block:
        storage.read_bytes(relpath)
    with storage.reusing_directories(), pytest.raises(error) as inside_the_block:
        storage.read_bytes(relpath)
    assert type(inside_the_block.value) is type(outside_the_block.value)
    assert str(inside_the_block.value).startswith(f"{relpath}: ")


def test_the_least_recently_used_directory_is_closed_beyond_the_limit(tmp_path):
    checked = []
    held = HeldDirectories(lambda descriptor, path, relpath: checked.append(path), limit=2)
    before = _open_descriptors()
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_bytes(name.encode())
    try:
        for name in ("a", "b", "a", "c", "a", "b"):
            descriptor = held.open_file(f"{tmp_path}/{name}/f", f"{name}/f")
            assert os.read(descriptor, 10) == name.encode()
            os.close(descriptor)
            assert len(held) <= 2
        # "a" stayed held (used again before "c" came); "b" was closed for "c" and opened again.
        assert checked == [f"{tmp_path}/{name}" for name in ("a", "b", "c", "b")]
        assert _open_descriptors() == before + 2
    finally:
        held.close()
    assert _open_descriptors() == before
