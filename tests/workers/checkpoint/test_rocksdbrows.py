"""rocksdbrows on the Spark-written RocksDB fixtures: counts, and damaged SSTs, changelogs and zips.

Counts are compared with what Spark reported (``numRowsTotal`` of each batch, spark-report.json);
tests/spark/test_rocksdb_rows_vs_spark.py compares them and every decoded row with Spark's own
``statestore`` reader. A damaged file either still reads to the same count (RocksDB checksums
every block it reads; a flip in a block it never reads changes nothing) or raises a
CheckpointError whose message starts with the damaged file's path.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from state_corpus import ROCKSDB_STATE_CHECKPOINTS
from workers.checkpoint.errors import CheckpointError, CorruptFileError, MissingFileError
from workers.checkpoint.rocksdbrows import read_rocksdb_rows
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

ROCKSDB_FIXTURES = ROCKSDB_STATE_CHECKPOINTS
# Version 12 of this store loads as 10_<id>.zip (two SSTs) + 11_<id>.changelog + 12_<id>.changelog.
DEDUP = OUR_FIXTURES / "rocksdb_checkpoint_v2_dedup" / "checkpoint"
DEDUP_STORE = "state/0/0"


def _rows_total_by_version(fixture: str) -> dict[int, int]:
    report = json.loads((OUR_FIXTURES / fixture / "spark-report.json").read_text())
    return {p["batchId"] + 1: p["stateOperators"][0]["numRowsTotal"] for p in report["progress"]}


def _counted_rows(storage: CheckpointStorage, version: int) -> int | None:
    """Rows of the stores numRowsTotal counts (a join's: keyWithIndexToValue), None if not loadable."""
    stores = [d for d in list_state_store_dirs(storage) if not d.store.endswith("keyToNumValues")]
    try:
        return sum(read_rocksdb_rows(storage, store, version, codec="lz4").rows for store in stores)
    except MissingFileError:
        return None


@pytest.mark.parametrize("fixture", ROCKSDB_FIXTURES)
def test_rows_at_every_loadable_version_equal_the_num_rows_total_spark_reported(fixture):
    storage = CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint"))
    expected = _rows_total_by_version(fixture)

    found = {version: _counted_rows(storage, version) for version in expected}
    found = {version: rows for version, rows in found.items() if rows is not None}

    assert len(found) >= 2
    assert found == {version: expected[version] for version in found}


def test_a_version_on_a_zip_says_how_it_was_counted():
    storage = CheckpointStorage(str(DEDUP))
    count = read_rocksdb_rows(storage, list_state_store_dirs(storage)[0], 12, codec="lz4")

    assert count.how == "numKeys of 10_f058c341-7941-45f8-ad77-48ab3ee81434.zip (17) + 2 changelogs"


def test_a_version_needing_more_bytes_than_allowed_is_not_counted():
    storage = CheckpointStorage(str(DEDUP))

    with pytest.raises(
        CheckpointError, match=r"^state/0/0: not counted: version 12 needs \d+ bytes of files \(limit 1000\)"
    ):
        read_rocksdb_rows(storage, list_state_store_dirs(storage)[0], 12, codec="lz4", max_read_bytes=1000)


# --- damaged files ---------------------------------------------------------------------------------


@pytest.fixture
def dedup_copy(tmp_path) -> Path:
    shutil.copytree(DEDUP, tmp_path / "c")
    return tmp_path / "c"


def _outcome(root: Path, damaged: str) -> str:
    """ "ok" when version 12 counts the 20 rows Spark reported, "changed" for another count, else
    the class of the typed error, which must name ``damaged``."""
    storage = CheckpointStorage(str(root))
    store = next(d for d in list_state_store_dirs(storage) if d.path == DEDUP_STORE)
    try:
        count = read_rocksdb_rows(storage, store, 12, codec="lz4")
    except CheckpointError as exc:
        # RocksDB names no file for a damaged SST properties block: the zip's error lists its SSTs.
        zip_naming_it = str(exc).startswith(f"{DEDUP_STORE}/10_") and damaged.rsplit("/", 1)[-1] in str(exc)
        assert str(exc).startswith(f"{damaged}: ") or zip_naming_it, str(exc)
        return type(exc).__name__
    return "ok" if count.rows == 20 else "changed"


def _zip_ssts(root: Path) -> list[str]:
    with zipfile.ZipFile(root / DEDUP_STORE / "10_f058c341-7941-45f8-ad77-48ab3ee81434.zip") as archive:
        listed = json.loads(archive.read("metadata").split(b"\n", 1)[1])["sstFiles"]
    return sorted(f"{DEDUP_STORE}/SSTs/{entry['dfsSstFileName']}" for entry in listed)


def test_every_byte_flip_of_an_sst_reads_the_same_rows_or_raises_an_error_naming_it(dedup_copy):
    outcomes = []
    for relpath in _zip_ssts(dedup_copy)[:1]:
        path = dedup_copy / relpath
        original = path.read_bytes()
        for position in range(len(original)):
            path.write_bytes(original[:position] + bytes([original[position] ^ 0xFF]) + original[position + 1 :])
            outcomes.append(_outcome(dedup_copy, relpath))
        path.write_bytes(original)
    # RocksDB checksums every block it reads: no flip changes the rows silently.
    assert "changed" not in outcomes
    assert outcomes.count("CorruptFileError") > len(outcomes) // 2


def test_a_truncated_or_padded_sst_is_an_error_naming_it(dedup_copy):
    relpath = _zip_ssts(dedup_copy)[0]
    path = dedup_copy / relpath
    original = path.read_bytes()
    for data in (original[:-1], original[: len(original) // 2], b"", original + b"\0"):
        path.write_bytes(data)
        assert _outcome(dedup_copy, relpath) == "CorruptFileError", len(data)


def test_an_sst_the_zip_lists_that_is_gone_is_a_missing_file_naming_it(dedup_copy):
    relpath = _zip_ssts(dedup_copy)[0]
    (dedup_copy / relpath).unlink()

    assert _outcome(dedup_copy, relpath) == "MissingFileError"


@pytest.mark.parametrize("name", ["11_", "12_"])
def test_every_byte_flip_of_a_changelog_reads_or_raises_an_error_naming_it(dedup_copy, name):
    path = next((dedup_copy / DEDUP_STORE).glob(f"{name}*.changelog"))
    relpath, original = f"{DEDUP_STORE}/{path.name}", path.read_bytes()
    for position in range(len(original)):
        path.write_bytes(original[:position] + bytes([original[position] ^ 0xFF]) + original[position + 1 :])
        # A flip inside a key's bytes keeps the framing: another key, maybe another count.
        _outcome(dedup_copy, relpath)


def _rewrite_zip(root: Path, change) -> str:
    """Rewrite the version 10 zip with ``change(name, data) -> (name, data)`` applied to each entry."""
    path = root / DEDUP_STORE / "10_f058c341-7941-45f8-ad77-48ab3ee81434.zip"
    with zipfile.ZipFile(path) as archive:
        entries = [change(info.filename, archive.read(info)) for info in archive.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries:
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return f"{DEDUP_STORE}/{path.name}"


def _flip_manifest(at: int):
    def change(name: str, data: bytes) -> tuple[str, bytes]:
        if name.startswith("MANIFEST-") and at < len(data):
            data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        return name, data

    return change


@pytest.mark.parametrize("at", [0, 7, 8, 20, 60, 200, 400])
def test_a_damaged_manifest_inside_a_valid_zip_reads_or_is_an_error_naming_the_zip(dedup_copy, at):
    relpath = _rewrite_zip(dedup_copy, _flip_manifest(at))
    assert _outcome(dedup_copy, relpath) in ("ok", "CorruptFileError")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda n, d: (n, b"MANIFEST-999999\n" if n == "CURRENT" else d), "RocksDB cannot read this version"),
        (lambda n, d: ("../escape" if n == "CURRENT" else n, d), "zip entry '../escape' is not a RocksDB file name"),
        (
            lambda n, d: (
                n,
                d.replace(b'"maxColumnFamilyId":0', b'"maxColumnFamilyId":1').replace(
                    b'"columnFamilyMapping":{}', b'"columnFamilyMapping":{"timers":1}'
                )
                if n == "metadata"
                else d,
            ),
            "the store has column families",
        ),
    ],
    ids=["current-names-a-missing-manifest", "entry-outside-the-directory", "column-families"],
)
def test_a_zip_rocksdb_cannot_use_is_an_error_naming_it(dedup_copy, change, reason):
    relpath = _rewrite_zip(dedup_copy, change)
    storage = CheckpointStorage(str(dedup_copy))
    store = next(d for d in list_state_store_dirs(storage) if d.path == DEDUP_STORE)

    with pytest.raises(CheckpointError, match=rf"^{relpath}: {reason}"):
        read_rocksdb_rows(storage, store, 12, codec="lz4")


def test_a_corrupt_sst_error_carries_rocksdb_s_offset(dedup_copy):
    relpath = _zip_ssts(dedup_copy)[0]
    path = dedup_copy / relpath
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # inside the first data block
    path.write_bytes(bytes(data))
    storage = CheckpointStorage(str(dedup_copy))
    store = next(d for d in list_state_store_dirs(storage) if d.path == DEDUP_STORE)

    with pytest.raises(CorruptFileError, match=rf"^{relpath}: RocksDB cannot read it: Corruption") as caught:
        read_rocksdb_rows(storage, store, 12, codec="lz4")
    assert caught.value.offset == 0
