from __future__ import annotations

import contextlib
import os

import pytest

from workers.checkpoint.errors import CorruptFileError, MissingFileError, PathNotAllowedError, StorageError
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.storage.locations import check_allowed


@pytest.fixture
def local_checkpoint(tmp_path, write_files):
    root = tmp_path / "ckpt"
    write_files(root, {"offsets/0": b"v1\n{}\n0", "offsets/.0.crc": b"crc\x00", "metadata": b'{"id":"q"}'})
    (root / "offsets" / "sub").mkdir()
    return root


# --- URLs and allowed roots -------------------------------------------------------------


def test_plain_relative_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert CheckpointStorage("ckpt").url == f"file://{tmp_path}/ckpt"


@pytest.mark.parametrize(
    ("url", "normalised"),
    [
        ("/data/ckpt", "file:///data/ckpt"),
        ("/data/ckpt/", "file:///data/ckpt"),
        ("/data/a/../ckpt", "file:///data/ckpt"),
        ("file:///data//ckpt", "file:///data/ckpt"),
        ("FILE:///data/ckpt", "file:///data/ckpt"),
        ("local:///data/ckpt", "file:///data/ckpt"),
        ("memory://ckpt", "memory://ckpt"),
        ("memory:///ckpt/", "memory://ckpt"),
        ("s3://bucket//ckpt/q1/", "s3://bucket/ckpt/q1"),
    ],
)
def test_check_allowed_without_roots_only_normalises(url, normalised):
    assert check_allowed(url, None) == normalised


def test_url_inside_an_allowed_root_is_accepted(tmp_path):
    root = tmp_path / "root"
    assert check_allowed(str(root / "q1"), [str(root)]) == f"file://{root}/q1"
    assert check_allowed(f"file://{root}", [f"file://{root}/"]) == f"file://{root}"


def test_url_outside_the_allowed_roots_is_refused_with_the_url_and_the_reason(tmp_path):
    root, other = tmp_path / "root", tmp_path / "other"
    with pytest.raises(PathNotAllowedError) as raised:
        check_allowed(str(other), [str(root)])
    assert str(raised.value) == f"{other}: the path is outside the allowed roots (file://{root})"


def test_sibling_with_the_root_as_name_prefix_is_refused(tmp_path):
    with pytest.raises(PathNotAllowedError, match="outside the allowed roots"):
        check_allowed(str(tmp_path / "root2"), [str(tmp_path / "root")])


def test_dot_dot_escape_from_a_local_root_is_refused(tmp_path):
    root = tmp_path / "root"
    with pytest.raises(PathNotAllowedError, match="outside the allowed roots"):
        check_allowed(f"{root}/../other", [str(root)])


def test_symlink_escape_from_a_local_root_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(PathNotAllowedError, match="outside the allowed roots"):
        check_allowed(str(root / "link" / "ckpt"), [str(root)])


def test_symlink_that_stays_inside_the_root_is_accepted(tmp_path):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "link").symlink_to(root / "real")
    assert check_allowed(str(root / "link"), [str(root)]) == f"file://{root}/link"


def test_other_scheme_than_the_roots_is_refused(tmp_path):
    with pytest.raises(PathNotAllowedError) as raised:
        check_allowed("memory://ckpt", [str(tmp_path)])
    assert str(raised.value) == "memory://ckpt: the scheme 'memory' is not allowed"


def test_remote_urls_are_checked_without_opening_the_filesystem():
    # s3fs is not needed: check_allowed only compares URLs.
    assert check_allowed("s3://bucket/ckpt/q1", ["s3://bucket/ckpt"]) == "s3://bucket/ckpt/q1"
    with pytest.raises(PathNotAllowedError, match="outside the allowed roots"):
        check_allowed("s3://bucket/ckpt2/q1", ["s3://bucket/ckpt"])


@pytest.mark.parametrize("url", ["s3://bucket/ckpt/../secret", "memory://ckpt/./q", "s3://bucket/ckpt/.."])
def test_dot_segments_in_remote_urls_are_refused(url):
    with pytest.raises(PathNotAllowedError, match=r"'\.' and '\.\.' segments are not allowed"):
        check_allowed(url, ["s3://bucket/ckpt", "memory://ckpt"])


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "the checkpoint URL is empty"),
        ("simplecache::s3://bucket/ckpt", "chained fsspec URLs ('::') are not supported"),
        ("s3://", "the URL has no path after the scheme"),
        ("1x://bucket", "'1x' is not a URL scheme"),
    ],
)
def test_unusable_urls_are_refused(url, reason):
    with pytest.raises(PathNotAllowedError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        check_allowed(url, None)


def test_empty_root_list_allows_nothing(tmp_path):
    with pytest.raises(PathNotAllowedError, match="no checkpoint roots are configured"):
        check_allowed(str(tmp_path), [])


def test_a_single_string_as_roots_is_a_programming_error(tmp_path):
    with pytest.raises(TypeError, match="wrap it in"):
        check_allowed(str(tmp_path), str(tmp_path))


def test_storage_refuses_a_url_outside_its_roots(memory_fs):
    with pytest.raises(PathNotAllowedError):
        CheckpointStorage("memory://elsewhere/q", allowed_roots=["memory://ckpts"])


def test_unknown_filesystem_is_a_storage_error():
    with pytest.raises(StorageError, match=r"^nosuchfs://x: cannot open this filesystem"):
        CheckpointStorage("nosuchfs://x")


# --- local filesystem ---------------------------------------------------------------------


def test_list_dir_gives_files_and_directories_sorted_by_name(local_checkpoint):
    storage = CheckpointStorage(str(local_checkpoint))
    infos = storage.list_dir("offsets")
    assert [(info.name, info.is_dir) for info in infos] == [(".0.crc", False), ("0", False), ("sub", True)]
    assert [info.size for info in infos[:2]] == [4, 7]  # a directory's size depends on the filesystem
    assert infos[1].mtime == os.stat(local_checkpoint / "offsets" / "0").st_mtime


def test_list_dir_of_a_missing_directory_is_empty(local_checkpoint):
    assert CheckpointStorage(str(local_checkpoint)).list_dir("commits") == []


def test_list_dir_of_a_file_is_empty(local_checkpoint):
    assert CheckpointStorage(str(local_checkpoint)).list_dir("offsets/0") == []


def test_list_dir_of_the_root(local_checkpoint):
    names = [info.name for info in CheckpointStorage(str(local_checkpoint)).list_dir()]
    assert names == ["metadata", "offsets"]


def test_read_bytes_returns_the_whole_file(local_checkpoint):
    assert CheckpointStorage(str(local_checkpoint)).read_bytes("offsets/0") == b"v1\n{}\n0"


def test_reading_a_missing_file_names_its_relative_path(local_checkpoint):
    with pytest.raises(MissingFileError) as raised:
        CheckpointStorage(str(local_checkpoint)).read_bytes("offsets/9")
    assert str(raised.value) == "offsets/9: no such file"


def test_reading_a_directory_is_a_storage_error_not_a_missing_file(local_checkpoint):
    with pytest.raises(StorageError) as raised:
        CheckpointStorage(str(local_checkpoint)).read_bytes("offsets")
    assert not isinstance(raised.value, MissingFileError)
    assert str(raised.value).startswith("offsets: cannot read the file: IsADirectoryError")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_storage_error(local_checkpoint):
    (local_checkpoint / "metadata").chmod(0)
    with pytest.raises(StorageError, match=r"^metadata: cannot read the file: permission denied$"):
        CheckpointStorage(str(local_checkpoint)).read_bytes("metadata")


def test_find_bytes_returns_none_for_a_missing_file(local_checkpoint):
    storage = CheckpointStorage(str(local_checkpoint))
    assert storage.find_bytes("commits/0") is None
    assert storage.find_bytes("metadata") == b'{"id":"q"}'


def test_exists_tells_files_and_directories_from_missing_paths(local_checkpoint):
    storage = CheckpointStorage(str(local_checkpoint))
    assert (storage.exists("offsets/0"), storage.exists("offsets"), storage.exists("commits")) == (True, True, False)


def test_file_larger_than_the_read_limit_is_refused(local_checkpoint):
    storage = CheckpointStorage(str(local_checkpoint))
    with pytest.raises(CorruptFileError) as raised:
        storage.read_bytes("offsets/0", max_bytes=6)
    assert str(raised.value) == "offsets/0: file is larger than the read limit of 6 bytes"
    assert storage.read_bytes("offsets/0", max_bytes=7) == b"v1\n{}\n0"
    assert storage.read_bytes("offsets/0", max_bytes=None) == b"v1\n{}\n0"


@pytest.mark.parametrize(
    "relpath", ["../other/metadata", "/etc/passwd", "offsets//0", "./metadata", "offsets/", "a/../b"]
)
def test_relative_paths_that_could_escape_the_root_are_refused(local_checkpoint, relpath):
    storage = CheckpointStorage(str(local_checkpoint))
    with pytest.raises(PathNotAllowedError) as raised:
        storage.read_bytes(relpath)
    assert str(raised.value).startswith(f"{relpath}: ")


def test_calls_are_counted(local_checkpoint):
    storage = CheckpointStorage(str(local_checkpoint))
    storage.list_dir("offsets")
    storage.list_dir("commits")
    storage.read_bytes("offsets/0")
    storage.find_bytes("commits/0")
    storage.exists("metadata")
    assert storage.calls.as_dict() == {
        "list": 2,
        "info": 1,
        "read": 2,
        "bytes_read": 7,
        "write": 0,
        "bytes_written": 0,
        "delete": 0,
    }


# --- memory filesystem --------------------------------------------------------------------


def test_memory_filesystem_lists_and_reads(memory_fs):
    memory_fs.pipe("/ckpt/offsets/0", b"v1\n{}\n0")
    memory_fs.pipe("/ckpt/offsets/1", b"v1\n{}\n1")
    storage = CheckpointStorage("memory://ckpt", allowed_roots=["memory://ckpt"])
    infos = storage.list_dir("offsets")
    assert [(info.name, info.size, info.is_dir) for info in infos] == [("0", 7, False), ("1", 7, False)]
    assert all(isinstance(info.mtime, float) for info in infos)
    assert storage.read_bytes("offsets/1") == b"v1\n{}\n1"
    assert storage.list_dir("commits") == []
    assert storage.find_bytes("metadata") is None


def test_memory_filesystem_is_empty_at_the_start_of_each_test(memory_fs):
    assert CheckpointStorage("memory://ckpt").list_dir("offsets") == []


def test_a_second_listing_sees_files_written_after_the_first(memory_fs):
    memory_fs.pipe("/ckpt/offsets/0", b"v1\n{}\n0")
    storage = CheckpointStorage("memory://ckpt")
    assert [info.name for info in storage.list_dir("offsets")] == ["0"]
    memory_fs.pipe("/ckpt/offsets/1", b"v1\n{}\n1")
    assert [info.name for info in storage.list_dir("offsets")] == ["0", "1"]


def test_memory_subdirectory_is_listed_as_a_directory(memory_fs):
    memory_fs.pipe("/ckpt/state/0/0/1.delta", b"x")
    assert CheckpointStorage("memory://ckpt").list_dir("state/0") == [
        FileInfo(name="0", size=0, mtime=None, is_dir=True)
    ]


def test_a_range_read_returns_only_the_bytes_after_the_start(tmp_path):
    (tmp_path / "log").write_bytes(b"0123456789")
    storage = CheckpointStorage(str(tmp_path))

    assert storage.read_range("log", 4) == b"456789"
    assert storage.read_range("log", 10) == b""
    assert (storage.calls.read, storage.calls.bytes_read) == (2, 6)


def test_a_range_read_longer_than_the_limit_is_refused(tmp_path):
    (tmp_path / "log").write_bytes(b"0123456789")
    with pytest.raises(CorruptFileError, match=r"^log: file is larger than the read limit of 3 bytes"):
        CheckpointStorage(str(tmp_path)).read_range("log", 5, max_bytes=3)


def test_a_local_read_does_not_reserve_its_whole_budget(tmp_path):
    import tracemalloc

    (tmp_path / "small").write_bytes(b"x" * 100)
    storage = CheckpointStorage(str(tmp_path))
    tracemalloc.start()
    try:
        storage.read_bytes("small", max_bytes=512 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


def test_a_local_read_larger_than_one_chunk_is_whole(tmp_path, monkeypatch):
    from workers.checkpoint.storage import checkpointstorage as storage_module

    monkeypatch.setattr(storage_module, "LOCAL_FIRST_READ_BYTES", 5)
    monkeypatch.setattr(storage_module, "LOCAL_READ_CHUNK_BYTES", 7)
    data = bytes(range(256)) * 3
    (tmp_path / "big").write_bytes(data)
    storage = CheckpointStorage(str(tmp_path))
    assert storage.read_bytes("big") == data
    assert storage.read_range("big", 100, max_bytes=len(data) - 100) == data[100:]
    with pytest.raises(CorruptFileError):
        storage.read_range("big", 100, max_bytes=len(data) - 101)


def test_a_directory_inside_the_checkpoint_that_links_out_of_the_roots_is_refused_not_listed(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "q" / "state" / "0").mkdir(parents=True)
    outside.mkdir()
    (outside / "id_rsa").write_bytes(b"secret")
    (root / "q" / "state" / "0" / "0").symlink_to(outside, target_is_directory=True)
    (root / "q" / "state" / "0" / "1").symlink_to(root / "q" / "state" / "0", target_is_directory=True)
    storage = CheckpointStorage(str(root / "q"), allowed_roots=[str(root)])

    with pytest.raises(PathNotAllowedError) as raised:
        storage.list_dir("state/0/0")
    assert str(raised.value).startswith("state/0/0: ")
    # A link that stays inside the roots is listed as the directory it leads to.
    assert [info.name for info in storage.list_dir("state/0/1")] == ["0", "1"]


# --- copies to a local directory (files a library opens by name: RocksDB's SSTs) ----------------


@pytest.mark.parametrize("where", ["local", "memory"])
def test_copy_to_local_copies_a_file_in_chunks_and_counts_one_read(tmp_path, memory_fs, where, monkeypatch):
    from workers.checkpoint.storage import checkpointstorage as storage_module

    content = bytes(range(256)) * 40  # 10,240 bytes: 3 chunks of 4096 and a short one
    monkeypatch.setattr(storage_module, "LOCAL_READ_CHUNK_BYTES", 4096)
    if where == "local":
        (tmp_path / "root" / "SSTs").mkdir(parents=True)
        (tmp_path / "root" / "SSTs" / "1.sst").write_bytes(content)
        storage = CheckpointStorage(str(tmp_path / "root"))
    else:
        memory_fs.pipe("/root/SSTs/1.sst", content)
        storage = CheckpointStorage("memory://root")

    copied = storage.copy_to_local("SSTs/1.sst", str(tmp_path / "copy.sst"))

    assert copied == len(content) and (tmp_path / "copy.sst").read_bytes() == content
    assert (storage.calls.read, storage.calls.bytes_read) == (1, len(content))


def test_copy_to_local_of_an_absent_file_is_a_missing_file_error_naming_it(local_checkpoint, tmp_path):
    with pytest.raises(MissingFileError, match=r"^SSTs/9\.sst: no such file"):
        CheckpointStorage(str(local_checkpoint)).copy_to_local("SSTs/9.sst", str(tmp_path / "9.sst"))


def test_copy_to_local_stops_at_the_limit_and_never_overwrites(local_checkpoint, tmp_path):
    storage = CheckpointStorage(str(local_checkpoint))

    with pytest.raises(CorruptFileError, match=r"^metadata: file is larger than the read limit of 3 bytes"):
        storage.copy_to_local("metadata", str(tmp_path / "a"), max_bytes=3)
    with pytest.raises(StorageError, match=r"^metadata: cannot copy the file to .*/a: FileExistsError"):
        storage.copy_to_local("metadata", str(tmp_path / "a"))


def test_a_file_renamed_away_while_its_directory_is_listed_is_left_out_not_an_error(local_checkpoint, monkeypatch):
    """Spark renames its temporary files (and their CRCs) while the sync lists a state directory:
    scandir has read the name, the file is gone when it is looked at."""
    from workers.checkpoint.storage import localfiles

    directory = local_checkpoint / "state"
    directory.mkdir()
    for name in ("1.delta", "..2.delta.tmp.crc", "2.delta"):
        (directory / name).write_bytes(b"x")
    real_scandir = os.scandir

    @contextlib.contextmanager
    def scandir_then_rename(descriptor):
        """The directory is read (one getdents for a small one), then the CRC is renamed away."""
        with real_scandir(descriptor) as listing:
            entries = list(listing)
            os.replace(directory / "..2.delta.tmp.crc", directory / "gone-elsewhere")
            (directory / "gone-elsewhere").unlink()
            yield iter(entries)

    monkeypatch.setattr(localfiles.os, "scandir", scandir_then_rename)
    names = [info.name for info in CheckpointStorage(str(local_checkpoint)).list_dir("state")]
    assert names == ["1.delta", "2.delta"]
