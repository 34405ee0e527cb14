"""Key sets that follow a state store version by version (statekeys.py), on the Spark-written fixtures.

The key set at version v - 1 plus the delta or changelog of v must equal the key set a cold read
of v gives (the snapshot and deltas, or zip and changelogs, Spark loads; both readers are checked
against Spark's own `statestore` source in tests/spark). Damaged files raise our errors, naming them.
"""

from __future__ import annotations

import os

import pytest

from fixture_paths import OUR_FIXTURES
from state_corpus import OUR_STATE_CHECKPOINTS, ROCKSDB_STATE_CHECKPOINTS
from workers.checkpoint.errors import CheckpointError, CorruptFileError, TruncatedFileError
from workers.checkpoint.rocksdbstate import list_rocksdb_store_files
from workers.checkpoint.statefollow import read_state_keys
from workers.checkpoint.stateinventory import list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.statekeys import (
    apply_key_changes,
    follow_changelog,
    follow_delta,
    parse_state_keys,
    state_keys_of,
)
from workers.checkpoint.statesample import load_state_rows
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def _hdfs_steps() -> list[tuple]:
    """(checkpoint, store, version, conf) for every delta whose previous version loads."""
    cases = []
    for name, (codec, row_checksum) in OUR_STATE_CHECKPOINTS.items():
        storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
        for store in list_state_store_dirs(storage):
            files, _ = parse_hdfs_state_files(store.files)
            deltas = sorted(f.version for f in files if not f.is_snapshot)
            base = min((f.version for f in files if f.is_snapshot), default=0)
            cases += [(name, store, v, StateConf(codec, row_checksum)) for v in deltas if v > base]
    return cases


def _rocksdb_steps() -> list[tuple]:
    cases = []
    for name in ROCKSDB_STATE_CHECKPOINTS:
        storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
        for store in list_state_store_dirs(storage):
            files = list_rocksdb_store_files(storage, store)
            base = min((f.version for f in files.zips), default=0)
            for changelog in files.changelogs:
                if changelog.version > base and changelog.version - 1 in {c.version for c in files.changelogs}:
                    cases.append((name, store, changelog, StateConf("lz4", False)))
    return cases


HDFS_STEPS = _hdfs_steps()
ROCKSDB_STEPS = _rocksdb_steps()


@pytest.mark.parametrize(
    ("name", "store", "version", "conf"), HDFS_STEPS, ids=[f"{c[0]}/{c[1].path}/{c[2]}" for c in HDFS_STEPS]
)
def test_a_delta_applied_to_the_previous_key_set_gives_the_key_set_a_cold_read_gives(name, store, version, conf):
    storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
    previous = read_state_keys(storage, store, version - 1, conf=conf)
    source = f"{store.path}/{version}.delta"

    followed = follow_delta(
        previous,
        storage.read_bytes(source),
        version=version,
        source=source,
        codec=conf.codec,
        row_checksum=conf.row_checksum,
    )

    cold = read_state_keys(storage, store, version, conf=conf)
    assert (followed.version, followed.rows) == (version, cold.rows)
    assert followed.same_keys(cold)
    # And the map statesample rebuilds record by record (another reader of the same files).
    loaded = load_state_rows(storage, store, version, codec=conf.codec, row_checksum=conf.row_checksum)
    assert followed.same_keys(state_keys_of(loaded, version=version))


@pytest.mark.parametrize(
    ("name", "store", "changelog", "conf"),
    ROCKSDB_STEPS,
    ids=[f"{c[0]}/{c[1].path}/{c[2].name}" for c in ROCKSDB_STEPS],
)
def test_a_changelog_applied_to_the_previous_key_set_gives_the_key_set_a_cold_read_gives(name, store, changelog, conf):
    storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
    files = list_rocksdb_store_files(storage, store)
    version = changelog.version
    previous = read_state_keys(storage, store, version - 1, conf=conf, unique_id=_unique_id(files, version - 1))
    source = f"{store.path}/{changelog.name}"

    followed = follow_changelog(previous, storage.read_bytes(source), version=version, source=source, codec=conf.codec)

    cold = read_state_keys(storage, store, version, conf=conf, unique_id=changelog.unique_id)
    assert (followed.version, followed.rows) == (version, cold.rows)
    assert followed.same_keys(cold)


def _unique_id(files, version: int) -> str | None:
    ids = files.unique_ids_of(version)
    return ids[0] if ids else None


def test_the_fixtures_give_deltas_and_changelogs_of_both_checkpoint_formats_to_follow():
    assert len(HDFS_STEPS) >= 10
    assert any(store.store != "default" for _, store, _, _ in HDFS_STEPS)  # a join's four stores
    assert any(changelog.unique_id for _, _, changelog, _ in ROCKSDB_STEPS)
    assert any(changelog.unique_id is None for _, _, changelog, _ in ROCKSDB_STEPS)


def test_the_last_change_of_a_key_in_a_file_wins_and_removing_an_absent_key_changes_nothing():
    previous = state_keys_of([b"a", b"b", b"c"], version=4)

    followed = apply_key_changes(
        previous,
        [(b"a", False), (b"a", True), (b"b", True), (b"b", False), (b"d", True), (b"e", False), (b"c", True)],
        version=5,
    )

    assert followed.rows == 3
    assert followed.same_keys(state_keys_of([b"a", b"c", b"d"], version=5))
    assert previous.same_keys(state_keys_of([b"c", b"b", b"a", b"a"], version=4))  # the previous set is left as it was


def test_a_version_that_does_not_follow_the_key_set_is_refused():
    with pytest.raises(ValueError, match="version 7 does not follow the key set's version 4"):
        apply_key_changes(state_keys_of([b"a"], version=4), [], version=7)


def test_a_key_set_reads_back_from_its_bytes():
    keys = state_keys_of([os.urandom(n % 40 + 1) for n in range(5000)], version=123)

    read = parse_state_keys(keys.to_bytes(), source="statekeys/1/0/default/3.keys")

    assert (read.version, read.rows) == (123, keys.rows)
    assert read.same_keys(keys)
    assert parse_state_keys(state_keys_of([], version=0).to_bytes(), source="empty.keys").rows == 0


@pytest.mark.parametrize(
    ("damage", "error", "reason"),
    [
        (lambda data: data[:20], TruncatedFileError, "shorter than the 28-byte header"),
        (lambda data: data[:-5], TruncatedFileError, "digests announced"),
        (lambda data: b"NOTKEYS!" + data[8:], CorruptFileError, "not a key-set file"),
        (lambda data: data[:8] + b"\x00\x00\x00\x09" + data[12:], CorruptFileError, "key-set format 9"),
        (lambda data: data[:28] + data[44:60] + data[28:44] + data[60:], CorruptFileError, "not sorted"),
    ],
    ids=["short header", "short digests", "magic", "format", "unsorted"],
)
def test_a_damaged_key_set_file_raises_an_error_naming_it(damage, error, reason):
    data = state_keys_of([b"k%d" % n for n in range(10)], version=3).to_bytes()

    with pytest.raises(error, match=reason) as raised:
        parse_state_keys(damage(data), source="statekeys/9/0/default/1.keys")

    assert "statekeys/9/0/default/1.keys" in str(raised.value)


def _first(steps):
    name, store, step, conf = steps[0]
    storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
    return storage, store, step, conf


@pytest.mark.parametrize("cut", [0.5, 0.9], ids=["half", "most"])
def test_a_truncated_delta_raises_an_error_naming_it(cut):
    storage, store, version, conf = _first(HDFS_STEPS)
    source = f"{store.path}/{version}.delta"
    data = storage.read_bytes(source)
    previous = read_state_keys(storage, store, version - 1, conf=conf)

    with pytest.raises(CorruptFileError) as raised:
        follow_delta(previous, data[: int(len(data) * cut)], version=version, source=source, codec=conf.codec)

    assert source in str(raised.value)


def test_a_byte_flipped_changelog_raises_an_error_naming_it():
    storage, store, changelog, conf = _first(ROCKSDB_STEPS)
    source = f"{store.path}/{changelog.name}"
    data = bytearray(storage.read_bytes(source))
    data[len(data) // 2] ^= 0xFF
    data[8] ^= 0xFF  # the lz4 block header's length
    previous = state_keys_of([], version=changelog.version - 1)

    with pytest.raises(CheckpointError) as raised:
        follow_changelog(previous, bytes(data), version=changelog.version, source=source, codec=conf.codec)

    assert source in str(raised.value)
