"""The cleanup action: which state files go, in which order, what stays loadable, and crash safety.

What must stay loadable is checked with staterows.read_state_size on the files that remain,
against the sizes read before the cleanup.
"""

from __future__ import annotations

import io
import json
import shutil
import signal
import tempfile
import zipfile
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.integrity.leftovers import TEMPORARY_FILE_GRACE_SECONDS
from workers.checkpoint.inventory import TreeListing
from workers.checkpoint.lz4block import compress_lz4_block_stream
from workers.checkpoint.maintenance.cleanup import apply_cleanup, cleanup_plan_from_listings, plan_cleanup
from workers.checkpoint.maintenance.plan import restrict_to_confirmed
from workers.checkpoint.maintenance.statestores import StateListings
from workers.checkpoint.rocksdbstate import read_rocksdb_version
from workers.checkpoint.stateinventory import list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.staterows import read_state_size
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

LATER = 4_000_000_000.0
TEMP = ".12.delta.0f8fad5b-d9cb-469f-a165-70867728950e.tmp"


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(OUR_FIXTURES / name / "checkpoint", target, copy_function=shutil.copyfile)
    return target


def _purge_logs_before(root: Path, batch_id: int) -> None:
    """Remove offsets and commits below ``batch_id`` (and their CRCs), as Spark's purge would."""
    for log in ("offsets", "commits"):
        for path in (root / log).iterdir():
            if path.name.lstrip(".").split(".")[0].isdigit() and int(path.name.lstrip(".").split(".")[0]) < batch_id:
                path.unlink()


def _sizes(storage: CheckpointStorage, versions) -> dict:
    return {(s.path, v): read_state_size(storage, s, v) for s in list_state_store_dirs(storage) for v in versions}


def test_cleanup_deletes_what_spark_s_cleanup_would_and_the_retained_versions_load_the_same(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    storage = CheckpointStorage(str(root))
    before = _sizes(storage, range(9, 13))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    # latest 12 - 1 = 11 loads 9.snapshot + 10 + 11; offsets start at batch 8, whose version 8
    # is gone already, so 9 is the oldest version kept: 6.delta goes, its CRC just before it.
    assert [d.path for d in plan.deletes] == [
        "state/0/0/.6.delta.crc",
        "state/0/0/6.delta",
        "state/0/1/.6.delta.crc",
        "state/0/1/6.delta",
    ]
    assert plan.is_allowed() and plan.bytes_freed == sum((root / d.path).stat().st_size for d in plan.deletes)
    result = apply_cleanup(storage, plan)
    assert result.deleted == tuple(d.path for d in plan.deletes)
    assert _sizes(storage, range(9, 13)) == before


def test_the_oldest_batch_in_offsets_keeps_its_state_loadable(tmp_path):
    root = _copy("stream_stream_join", tmp_path)
    storage = CheckpointStorage(str(root))
    # Offsets and commits 8..11: version 8 loads 6.snapshot + 7 + 8, so nothing may go.
    assert plan_cleanup(storage, now=LATER, min_versions_to_retain=1).is_empty
    assert len(plan_cleanup(storage, now=LATER, min_versions_to_retain=1, keep_offsets_range=False).deletes) == 8 * 8
    _purge_logs_before(root, 11)
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    deleted_names = sorted({d.path.rsplit("/", 1)[1] for d in plan.deletes})
    assert deleted_names == sorted(
        [
            ".6.delta.crc",
            "6.delta",
            ".6.snapshot.crc",
            "6.snapshot",
            ".7.delta.crc",
            "7.delta",
            ".8.delta.crc",
            "8.delta",
        ]
    )


def test_files_go_oldest_first_with_each_sidecar_just_before_its_file(tmp_path):
    root = _copy("stream_stream_join", tmp_path)
    _purge_logs_before(root, 11)
    plan = plan_cleanup(CheckpointStorage(str(root)), now=LATER, min_versions_to_retain=1)
    in_store = [d.path.rsplit("/", 1)[1] for d in plan.deletes if d.path.startswith("state/0/1/right-keyToNumValues/")]
    assert in_store == [
        ".6.delta.crc",
        "6.delta",
        ".6.snapshot.crc",
        "6.snapshot",
        ".7.delta.crc",
        "7.delta",
        ".8.delta.crc",
        "8.delta",
    ]


def test_rocksdb_stores_in_checkpoint_format_2_are_refused_with_the_reason():
    storage = CheckpointStorage(str(OUR_FIXTURES / "rocksdb_checkpoint_v2_dedup" / "checkpoint"))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    failed = plan.failed_preconditions()
    assert [p.name for p in failed] == ["supported-provider"] and "checkpoint format 2" in failed[0].detail
    assert plan.is_empty


def test_a_rocksdb_fixture_that_spark_cleaned_keeps_everything():
    # Zips 10 and 12, changelogs 10-12: version 11 (12 - 1) loads 10.zip + 11.changelog.
    storage = CheckpointStorage(str(OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint"))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1, keep_offsets_range=False)
    assert plan.is_empty and plan.is_allowed()


def test_min_versions_to_retain_below_one_is_rejected():
    with pytest.raises(ValueError, match="min_versions_to_retain"):
        cleanup_plan_from_listings(_listings([]), now=LATER, min_versions_to_retain=0)


# --- crafted listings: retention boundaries ---------------------------------------------------------


def _listings(names: list[str], *, commits: int = 20, offsets_from: int = 0, mtime: float = 1.0) -> StateListings:
    """Batches offsets_from..commits-1 in both logs, and one store state/0/0 holding ``names``."""
    logs = tuple(FileInfo(str(b), 10, 1.0, False) for b in range(offsets_from, commits))
    directories = {
        "state": (FileInfo("0", 0, None, True),),
        "state/0": (FileInfo("0", 0, None, True),),
        "state/0/0": tuple(FileInfo(name, 100, mtime, False) for name in names),
    }
    return StateListings(logs, logs, TreeListing(directories))


def _deltas(first: int, last: int) -> list[str]:
    return [f"{v}.delta" for v in range(first, last + 1)]


def _deleted(plan) -> list[str]:
    return [d.path.rsplit("/", 1)[1] for d in plan.deletes]


def test_the_earliest_retained_version_keeps_its_snapshot_and_the_deltas_after_it():
    # Committed up to batch 19 -> version 20; retain 5 -> version 15 loads 15.snapshot.
    names = [*_deltas(1, 20), "10.snapshot", "15.snapshot"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=5)
    assert _deleted(plan) == [
        *(n for v in range(1, 10) for n in [f"{v}.delta"]),
        "10.delta",
        "10.snapshot",
        *_deltas(11, 14),
    ]
    assert "15.delta" not in _deleted(plan)
    assert plan.is_allowed()


def test_retaining_one_more_version_moves_the_cut_back_to_the_older_snapshot():
    names = [*_deltas(1, 20), "10.snapshot", "15.snapshot"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=6)
    assert _deleted(plan) == _deltas(1, 9)


def test_without_a_snapshot_nothing_can_go():
    plan = cleanup_plan_from_listings(_listings(_deltas(1, 20), offsets_from=18), now=LATER, min_versions_to_retain=1)
    assert plan.is_empty and plan.is_allowed()


def test_a_version_written_by_an_uncommitted_batch_does_not_count_as_latest():
    # Batch 20 has no commit (commits stop at 19): its 21.delta and 21.snapshot may be rewritten,
    # and the restart runs batch 20 from version 20 again.
    names = [*_deltas(1, 21), "10.snapshot", "21.snapshot"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=1)
    assert _deleted(plan) == _deltas(1, 9)


def test_a_store_with_a_gap_before_the_retained_range_is_left_alone():
    names = [*_deltas(1, 11), *_deltas(13, 20), "10.snapshot", "15.snapshot"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=7)
    # Version 13 would anchor at 10.snapshot but 12.delta is missing: Spark's filesForVersion fails too.
    assert plan.is_empty


def test_old_temporary_files_go_with_their_crc_and_recent_ones_stay():
    names = [*_deltas(1, 3), TEMP, f".{TEMP}.crc"]
    old = cleanup_plan_from_listings(
        _listings(names, commits=3), now=1.0 + TEMPORARY_FILE_GRACE_SECONDS + 1, quiet_seconds=0
    )
    assert _deleted(old) == [f".{TEMP}.crc", TEMP]
    assert "temporary file of an interrupted write" in old.deletes[-1].reason
    recent = cleanup_plan_from_listings(
        _listings(names, commits=3), now=1.0 + TEMPORARY_FILE_GRACE_SECONDS - 1, quiet_seconds=0
    )
    assert recent.is_empty


def test_spark_checksum_sidecars_go_before_hadoop_crcs_and_the_file():
    names = [*_deltas(1, 20), "10.snapshot", "5.delta.crc", ".5.delta.crc.crc", ".5.delta.crc"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=10)
    assert _deleted(plan)[4:8] == ["5.delta.crc", ".5.delta.crc.crc", ".5.delta.crc", "5.delta"]


def test_the_retention_precondition_counts_the_versions_it_checked():
    names = [*_deltas(1, 20), "10.snapshot"]
    plan = cleanup_plan_from_listings(_listings(names, offsets_from=18), now=LATER, min_versions_to_retain=5)
    retention = next(p for p in plan.preconditions if p.name == "retention")
    assert retention.ok and retention.detail.startswith("11 retained store versions checked")


# --- crash safety: SIGKILL at every step, then check and finish ---------------------------------

CRASH_FIXTURE = "stream_stream_join"
CRASH_VERSIONS = range(9, 13)


def _crash_copy(parent: Path) -> Path:
    root = _copy(CRASH_FIXTURE, parent)
    _purge_logs_before(root, 11)
    return root


def _count_steps() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        storage = CheckpointStorage(str(_crash_copy(Path(scratch))))
        return count_steps(apply_cleanup, storage.url, plan_cleanup(storage, now=LATER, min_versions_to_retain=1))


@pytest.mark.parametrize("kill_at", range(_count_steps()))
def test_a_cleanup_killed_at_any_step_keeps_every_retained_version_and_a_rerun_finishes(tmp_path, kill_at):
    root = _crash_copy(tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    before = _sizes(storage, CRASH_VERSIONS)
    assert apply_killed_at(apply_cleanup, str(root), plan, kill_at) == -signal.SIGKILL
    assert _sizes(storage, CRASH_VERSIONS) == before
    resumed, _ = restrict_to_confirmed(plan, plan_cleanup(storage, now=LATER, min_versions_to_retain=1))
    apply_cleanup(storage, resumed)
    assert not any((root / d.path).exists() for d in plan.deletes)
    assert _sizes(storage, CRASH_VERSIONS) == before
    assert all(parse_hdfs_state_files(s.files)[0][0].name == "9.snapshot" for s in list_state_store_dirs(storage))


def test_a_checkpoint_without_logs_or_state_has_nothing_to_clean(tmp_path):
    plan = plan_cleanup(CheckpointStorage(str(tmp_path)), now=LATER)
    assert plan.is_empty and plan.summary.startswith("nothing to do")
    assert [p.name for p in plan.failed_preconditions()] == ["version-committed"]


def test_files_deleted_by_someone_else_after_planning_are_reported_absent(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    (root / "state/0/1/6.delta").unlink()
    result = apply_cleanup(storage, plan)
    assert result.already_absent == ("state/0/1/6.delta",)
    assert result.bytes_freed == plan.bytes_freed - next(d.size for d in plan.deletes if d.path == "state/0/1/6.delta")


# --- RocksDB, checkpoint format 1: zips, changelogs and the SSTs only old zips list ----------------

ROCKSDB_STORE = "state/0/0"
# version -> the SST files its zip lists
ROCKSDB_ZIPS = {2: ("a", "b"), 4: ("b", "c"), 6: ("c", "d")}


def _rocksdb_zip(ssts) -> bytes:
    metadata = {
        "sstFiles": [{"localFileName": f"{n}.sst", "dfsSstFileName": f"{n}-uuid.sst", "sizeBytes": 3} for n in ssts],
        "numKeys": 1,
        "numInternalKeys": 1,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata", "v1\n" + json.dumps(metadata))
        archive.writestr("CURRENT", "MANIFEST-000001\n")
    return buffer.getvalue()


def _write_files(root: Path, files: dict[str, bytes]) -> Path:
    for relpath, data in files.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_bytes(data)
    return root


def _rocksdb_checkpoint(root: Path) -> Path:
    """Batches 0..5 committed (state version 6), offsets from batch 5 on; changelogs 1..6, zips
    2, 4, 6, SSTs a-d and an orphan e, each with a Hadoop CRC."""
    empty_changelog = compress_lz4_block_stream(b"\xff\xff\xff\xff")
    files = {f"commits/{b}": b"v1\n{}\n" for b in range(6)}
    files.update({f"offsets/{b}": b"v1\n{}\n" for b in (5,)})
    files.update({f"{ROCKSDB_STORE}/{v}.changelog": empty_changelog for v in range(1, 7)})
    files.update({f"{ROCKSDB_STORE}/{v}.zip": _rocksdb_zip(ssts) for v, ssts in ROCKSDB_ZIPS.items()})
    files.update({f"{ROCKSDB_STORE}/SSTs/{n}-uuid.sst": b"sst" for n in "abcde"})
    files.update({_crc_path(path): b"crc\0" for path in list(files) if path.startswith("state/")})
    return _write_files(root, files)


def _crc_path(path: str) -> str:
    directory, name = path.rsplit("/", 1)
    return f"{directory}/.{name}.crc"


def _rocksdb_loadable(storage: CheckpointStorage, versions) -> dict[int, bool]:
    store = next(s for s in list_state_store_dirs(storage) if s.path == ROCKSDB_STORE)
    return {v: read_rocksdb_version(storage, store, v, codec=None).is_loadable for v in versions}


def test_rocksdb_cleanup_deletes_old_zips_changelogs_and_the_ssts_only_they_list(tmp_path):
    root = _rocksdb_checkpoint(tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    # Offsets start at batch 5: version 5 loads 4.zip + 5.changelog, so 4.zip is the oldest kept.
    assert [d.path.removeprefix(ROCKSDB_STORE + "/") for d in plan.deletes] == [
        "SSTs/.a-uuid.sst.crc",
        "SSTs/a-uuid.sst",
        ".2.zip.crc",
        "2.zip",
        ".1.changelog.crc",
        "1.changelog",
        ".2.changelog.crc",
        "2.changelog",
        ".3.changelog.crc",
        "3.changelog",
    ]
    assert plan.is_allowed()
    assert _rocksdb_loadable(storage, range(4, 7)) == {4: True, 5: True, 6: True}
    apply_cleanup(storage, plan)
    assert _rocksdb_loadable(storage, range(4, 7)) == {4: True, 5: True, 6: True}
    assert (root / ROCKSDB_STORE / "SSTs/e-uuid.sst").exists(), "an SST no zip lists is left alone"


def test_rocksdb_cleanup_without_an_old_enough_zip_deletes_nothing(tmp_path):
    root = _rocksdb_checkpoint(tmp_path)
    plan = plan_cleanup(CheckpointStorage(str(root)), now=LATER, min_versions_to_retain=5)
    assert plan.is_empty and plan.is_allowed()


def test_rocksdb_cleanup_leaves_a_store_with_an_unreadable_zip_alone(tmp_path):
    root = _rocksdb_checkpoint(tmp_path)
    (root / ROCKSDB_STORE / "2.zip").write_bytes(b"not a zip")
    plan = plan_cleanup(CheckpointStorage(str(root)), now=LATER, min_versions_to_retain=1)
    assert plan.is_empty and any("unreadable" in note for note in plan.notes)


def _rocksdb_steps() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        _rocksdb_checkpoint(root)
        storage = CheckpointStorage(str(root))
        return count_steps(apply_cleanup, storage.url, plan_cleanup(storage, now=LATER, min_versions_to_retain=1))


@pytest.mark.parametrize("kill_at", range(_rocksdb_steps()))
def test_a_rocksdb_cleanup_killed_at_any_step_keeps_the_retained_versions_and_a_rerun_finishes(tmp_path, kill_at):
    root = _rocksdb_checkpoint(tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_cleanup(storage, now=LATER, min_versions_to_retain=1)
    assert apply_killed_at(apply_cleanup, str(root), plan, kill_at) == -signal.SIGKILL
    assert _rocksdb_loadable(storage, range(4, 7)) == {4: True, 5: True, 6: True}
    resumed, _ = restrict_to_confirmed(plan, plan_cleanup(storage, now=LATER, min_versions_to_retain=1))
    apply_cleanup(storage, resumed)
    assert not any((root / d.path).exists() for d in plan.deletes)
    assert _rocksdb_loadable(storage, range(4, 7)) == {4: True, 5: True, 6: True}
