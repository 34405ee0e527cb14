"""Key sets of stores with column families (statefamilykeys.py), followed on the PySpark-written
transformWithState fixtures (tests/fixtures/tws: a ValueState, a ListState, a MapState, timers and
a TTL; versions 1 to 4, zips at 1 and 3).

The figures of every state variable followed from a cold read at v to v + k must equal a cold
read at v + k (the full pass's reader, itself checked against Spark's `statestore` source in
tests/spark), and following reads only the new versions' changelogs. The fixtures follow one
version between two zips (1 -> 2, 3 -> 4); a copy without the zip of version 3, as before Spark's
maintenance uploads it, gives three (1 -> 4).
"""

from __future__ import annotations

import shutil

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import CorruptFileError, MissingFileError, TruncatedFileError
from workers.checkpoint.logdir import list_batch_ids, read_commit
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.statefamilykeys import FamilyKeys, parse_key_set
from workers.checkpoint.statefollow import family_follow, follow_store, read_state_keys
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesummary import StateConf, summarize_state_stores
from workers.checkpoint.statevariables import describe_store_variables
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

CONF = StateConf("lz4", False)
# (variant, first and last versions followed, a copy whose version 3 has no zip). Under checkpoint
# format 2 (avro_format2) the changelog of version 4 names the zip of 3 as its base (lineage).
STEPS = [
    ("unsaferow", 1, 2, False),
    ("unsaferow", 3, 4, False),
    ("unsaferow", 1, 4, True),
    ("avro_format2", 1, 2, False),
    ("avro_format2", 3, 4, False),
]


class _RecordingStorage(CheckpointStorage):
    """A CheckpointStorage that records the paths it reads, looks up and lists."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads: list[str] = []
        self.lookups: list[str] = []
        self.listings: list[str] = []

    def read_bytes(self, relpath, *, max_bytes=None):
        self.reads.append(relpath)
        return super().read_bytes(relpath, max_bytes=max_bytes)

    def find_bytes(self, relpath, *, max_bytes=None):
        self.reads.append(relpath)
        return super().find_bytes(relpath, max_bytes=max_bytes)

    def find_info(self, relpath=""):
        self.lookups.append(relpath)
        return super().find_info(relpath)

    def list_dir(self, relpath=""):
        self.listings.append(relpath)
        return super().list_dir(relpath)


def _copy(tmp_path, variant: str, *, without_zip_3: bool):
    root = shutil.copytree(OUR_FIXTURES / "tws" / variant / "checkpoint", tmp_path / variant)
    if without_zip_3:
        for path in root.glob("state/0/*/3*.zip"):
            path.unlink()
    return root


def _stores(storage: CheckpointStorage):
    commits = {batch: read_commit(storage, batch) for batch in list_batch_ids(storage, "commits")}
    for store in list_state_store_dirs(storage):
        yield store, commits, state_unique_ids_by_version(commits, operator=0, partition=store.partition)


def _cold(storage, store, version, unique_ids):
    """What the follow's cold read gives: the key set and the figures of each state variable."""
    keys = read_state_keys(storage, store, version, conf=CONF, unique_id=unique_ids.get(version), column_families=True)
    return family_follow(keys, describe_store_variables(storage, 0, store.store), (), source=store.path)


@pytest.mark.parametrize(
    ("variant", "first", "last", "without_zip_3"),
    STEPS,
    ids=[f"{v}-{a}-{b}{' without zip 3' if w else ''}" for v, a, b, w in STEPS],
)
def test_the_figures_followed_from_v_to_v_plus_k_equal_a_cold_read_at_v_plus_k(
    tmp_path, variant, first, last, without_zip_3
):
    storage = CheckpointStorage(str(_copy(tmp_path, variant, without_zip_3=without_zip_3)))
    for store, commits, unique_ids in _stores(storage):
        start = _cold(storage, store, first, unique_ids)

        followed = follow_store(
            storage,
            store.path,
            "rocksdb",
            start.keys,
            last,
            conf=CONF,
            unique_ids=unique_ids,
            variables=start.variables,
        )

        (full_pass,) = summarize_state_stores(storage, [store], version=last, conf=CONF, commits=commits)
        assert full_pass.rows_version == last and full_pass.note == ""
        assert (followed.version, followed.rows, followed.variables) == (last, full_pass.rows, full_pass.variables)
        assert followed.keys.same_keys(_cold(storage, store, last, unique_ids).keys)
        # The steps change the figures: the list grows (merges), the rows of some variables move.
        assert start.variables != followed.variables


def test_the_lists_grow_by_the_elements_their_changelog_appends():
    storage = CheckpointStorage(str(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint"))
    values = []
    for store, _, unique_ids in _stores(storage):
        start = _cold(storage, store, 3, unique_ids)
        followed = follow_store(
            storage, store.path, "rocksdb", start.keys, 4, conf=CONF, unique_ids=unique_ids, variables=start.variables
        )
        values.append([next(f.values for f in found.variables if f.name == "recent") for found in (start, followed)])

    # Batch 3 (version 4) appends 7 rows to the lists of the two partitions (test_state_follow_variables).
    assert sum(after - before for before, after in values) == 7


def test_following_a_version_reads_only_its_changelog_and_looks_its_zip_up():
    storage = _RecordingStorage(str(OUR_FIXTURES / "tws" / "avro_format2" / "checkpoint"))
    for store, _, unique_ids in _stores(storage):
        cold = _cold(storage, store, 3, unique_ids)
        kept = parse_key_set(cold.keys.to_bytes(), source="kept.keys")
        for seen in (storage.reads, storage.lookups, storage.listings):
            seen.clear()

        follow_store(
            storage, store.path, "rocksdb", kept, 4, conf=CONF, unique_ids=unique_ids, variables=cold.variables
        )

        stem = f"{store.path}/4_{unique_ids[4]}"
        assert (storage.reads, storage.lookups, storage.listings) == ([f"{stem}.changelog"], [f"{stem}.zip"], [])


def test_a_version_with_a_zip_is_read_cold_instead_of_followed():
    storage = CheckpointStorage(str(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint"))
    store, _, unique_ids = next(_stores(storage))
    start = _cold(storage, store, 2, unique_ids)

    with pytest.raises(MissingFileError, match="version 3 has a zip") as raised:
        follow_store(storage, store.path, "rocksdb", start.keys, 3, conf=CONF, unique_ids=unique_ids)

    assert f"{store.path}/3.zip" in str(raised.value)


def test_a_family_key_set_reads_back_from_its_bytes():
    storage = CheckpointStorage(str(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint"))
    store, _, unique_ids = next(_stores(storage))
    keys = _cold(storage, store, 4, unique_ids).keys

    read = parse_key_set(keys.to_bytes(), source="statekeys/1/0/default/0.keys")

    assert isinstance(read, FamilyKeys) and read.same_keys(keys) and read.rows == keys.rows > 0
    assert (read.version, read.names, read.internal_names) == (4, keys.names, keys.internal_names)


@pytest.mark.parametrize(
    ("damage", "error", "reason"),
    [
        (lambda data: data[:-3], TruncatedFileError, "keys announced"),
        (lambda data: data[:32] + b"[" + data[33:], CorruptFileError, "family names"),
        (lambda data: data[:30], TruncatedFileError, "size of its family names"),
    ],
    ids=["short columns", "names", "short names size"],
)
def test_a_damaged_family_key_set_raises_an_error_naming_it(damage, error, reason):
    storage = CheckpointStorage(str(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint"))
    store, _, unique_ids = next(_stores(storage))
    data = _cold(storage, store, 4, unique_ids).keys.to_bytes()

    with pytest.raises(error, match=reason) as raised:
        parse_key_set(damage(data), source="statekeys/9/0/default/1.keys")

    assert "statekeys/9/0/default/1.keys" in str(raised.value)
