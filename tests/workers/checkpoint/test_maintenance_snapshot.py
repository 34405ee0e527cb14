"""The snapshot action: which stores get ``V.snapshot``, its bytes in Spark's format, and crash safety.

Expected rows come from the fixtures' own files read by statefiles.parse_state_file and
staterows.read_state_size (independent of the snapshot's replay and encoder).
"""

from __future__ import annotations

import shutil
import signal
import struct
import tempfile
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.errors import TruncatedFileError
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.inventory import TreeListing
from workers.checkpoint.lz4block import compress_lz4_block_stream, iter_lz4_blocks
from workers.checkpoint.maintenance.execute import PlanOutdatedError
from workers.checkpoint.maintenance.plan import plan_from_json, restrict_to_confirmed
from workers.checkpoint.maintenance.sidecars import hadoop_crc_bytes
from workers.checkpoint.maintenance.snapshot import apply_snapshot, plan_snapshot, snapshot_plan_from_listings
from workers.checkpoint.maintenance.statestores import StateListings
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import iter_state_records, parse_state_file
from workers.checkpoint.stateinventory import files_for_version, list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.staterows import read_state_size
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

# Long after every fixture's last batch: the query-stopped precondition holds.
LATER = 4_000_000_000.0
LZ4 = StateConf(None, False)


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(OUR_FIXTURES / name / "checkpoint", target, copy_function=shutil.copyfile)
    return target


def _replayed(
    root: Path, store_path: str, version: int, *, codec: str = "lz4", row_checksum: bool = False
) -> dict[bytes, bytes]:
    """The rows of ``version`` as parse_state_file reads the store's chain (values without checksums)."""
    state: dict[bytes, bytes] = {}
    files, _ = parse_hdfs_state_files(
        next(s for s in list_state_store_dirs(CheckpointStorage(str(root))) if s.path == store_path).files
    )
    for state_file in files_for_version(files, version):
        data = (root / store_path / state_file.name).read_bytes()
        for record in parse_state_file(data, source=state_file.name, codec=codec, row_checksum=row_checksum):
            if record.is_removal:
                state.pop(record.key, None)
            else:
                state[record.key] = record.value
    return state


def _snapshot_rows(path: Path, *, codec: str = "lz4", row_checksum: bool = False) -> dict[bytes, bytes]:
    records = parse_state_file(
        path.read_bytes(), source=path.name, codec=codec, row_checksum=row_checksum, removals_allowed=False
    )
    return {r.key: r.value for r in records}


def test_a_snapshot_holds_the_rows_the_chain_it_replaces_loads(tmp_path):
    root = _copy("stream_stream_join", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_snapshot(storage, now=LATER, min_chain=1, version=11)
    assert plan.is_allowed() and len(plan.writes) == 8
    expected = {w.path: _replayed(root, w.path.rsplit("/", 1)[0], 11) for w in plan.writes}
    apply_snapshot(storage, plan)
    for path, rows in expected.items():
        assert rows and _snapshot_rows(root / path) == rows


def test_the_snapshot_is_an_lz4_block_stream_of_32_kib_blocks_with_a_hadoop_crc(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    storage = CheckpointStorage(str(root))
    apply_snapshot(storage, plan_snapshot(storage, now=LATER, min_chain=0, version=11))
    data = (root / "state/0/0/11.snapshot").read_bytes()
    assert data[:8] == b"LZ4Block" and data[8] in (0x25, 0x15)
    assert data[-21:] == b"LZ4Block" + bytes([0x15]) + bytes(12)
    assert list(iter_lz4_blocks(data, source="11.snapshot"))[-1][-4:] == b"\xff\xff\xff\xff"
    assert (root / "state/0/0/.11.snapshot.crc").read_bytes() == hadoop_crc_bytes(data)


def test_zstd_snapshot_keeps_row_checksums_byte_for_byte(tmp_path):
    root = _copy("hdfs_zstd_row_checksum", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_snapshot(storage, now=LATER, min_chain=0, version=11)
    assert [w.path for w in plan.writes] == ["state/0/0/11.snapshot", "state/0/1/11.snapshot"]
    expected = _replayed(root, "state/0/0", 11, codec="zstd", row_checksum=True)
    apply_snapshot(storage, plan)
    written = root / "state/0/0/11.snapshot"
    assert written.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    assert _snapshot_rows(written, codec="zstd", row_checksum=True) == expected
    # Read whole, without the checksum setting, every value is 4 bytes longer: the checksums are there.
    content = decompress_state_file(written.read_bytes(), source="11.snapshot", codec="zstd")
    whole = {
        r.key: r.value
        for r in iter_state_records(content, source="11.snapshot", removals_allowed=False, floor_values=False)
    }
    assert {k: len(v) for k, v in whole.items()} == {k: len(v) + 4 for k, v in expected.items()}


def test_rows_counted_at_every_version_are_unchanged_by_the_snapshot(tmp_path):
    root = _copy("file_source_dedup", tmp_path)
    storage = CheckpointStorage(str(root))
    stores = list_state_store_dirs(storage)
    before = {(s.path, v): read_state_size(storage, s, v) for s in stores for v in (13, 14, 15)}
    apply_snapshot(storage, plan_snapshot(storage, now=LATER, min_chain=0, version=15))
    stores = list_state_store_dirs(storage)
    assert {(s.path, v): read_state_size(storage, s, v) for s in stores for v in (13, 14, 15)} == before
    assert all(any(f.name == "15.snapshot" for f in s.files) for s in stores)


def test_the_default_version_is_the_newest_one_a_committed_batch_wrote(tmp_path):
    # killed_mid_batch: batch 6 has offsets but no commit, so 7.delta may be rewritten on restart.
    storage = CheckpointStorage(str(OUR_FIXTURES / "killed_mid_batch" / "checkpoint"))
    plan = plan_snapshot(storage, now=LATER, min_chain=0)
    assert plan.is_empty and plan.is_allowed()
    assert all("version 6 already has a snapshot" in note for note in plan.notes)


def test_a_version_of_an_uncommitted_batch_is_refused(tmp_path):
    storage = CheckpointStorage(str(OUR_FIXTURES / "killed_mid_batch" / "checkpoint"))
    plan = plan_snapshot(storage, now=LATER, min_chain=0, version=7)
    assert plan.is_empty
    assert [p.name for p in plan.failed_preconditions()] == ["version-committed"]
    assert "a batch without a commit runs again" in plan.failed_preconditions()[0].detail


def test_rocksdb_stores_are_refused_with_the_reason():
    storage = CheckpointStorage(str(OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint"))
    plan = plan_snapshot(storage, now=LATER, min_chain=0)
    failed = plan.failed_preconditions()
    assert [p.name for p in failed] == ["hdfs-provider"]
    assert "RocksDB snapshots are written by Spark's RocksDB provider; not supported" in failed[0].detail


def test_a_running_query_fails_only_the_overridable_precondition():
    storage = CheckpointStorage(str(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"))
    newest = max(info.mtime for info in storage.list_dir("commits"))
    plan = plan_snapshot(storage, now=newest + 10, min_chain=0, version=11)
    assert [p.name for p in plan.failed_preconditions()] == ["query-stopped"]
    assert plan.is_allowed(overrides={"query-stopped"})


# --- crafted listings: thresholds and broken chains ------------------------------------------------


def _listings(names: list[str], *, commits: int = 20, extra: dict[str, list[str]] | None = None) -> StateListings:
    """A checkpoint with batches 0..commits-1 committed and one store state/0/0 holding ``names``."""
    logs = tuple(FileInfo(str(b), 10, 1.0, False) for b in range(commits))
    directories = {
        "state": (FileInfo("0", 0, None, True),),
        "state/0": (FileInfo("0", 0, None, True),),
        "state/0/0": tuple(FileInfo(name, 100, 1.0, False) for name in names),
    }
    return StateListings(logs, logs, TreeListing(directories))


def _deltas(first: int, last: int) -> list[str]:
    return [f"{v}.delta" for v in range(first, last + 1)]


@pytest.mark.parametrize(("min_chain", "planned"), [(10, True), (11, False)])
def test_a_store_is_chosen_only_when_its_chain_is_longer_than_min_chain(min_chain, planned):
    # Version 20 replays snapshot 9 and deltas 10..20: 11 deltas.
    listings = _listings(["9.snapshot", *_deltas(1, 20)])
    plan = snapshot_plan_from_listings(listings, LZ4, now=LATER, min_chain=min_chain)
    assert [w.path for w in plan.writes] == (["state/0/0/20.snapshot"] if planned else [])
    if planned:
        assert [i.path for i in plan.writes[0].inputs] == [
            "state/0/0/9.snapshot",
            *(f"state/0/0/{n}" for n in _deltas(10, 20)),
        ]


def test_a_missing_delta_fails_inputs_complete():
    listings = _listings(["9.snapshot", *_deltas(10, 14), *_deltas(16, 20)])
    plan = snapshot_plan_from_listings(listings, LZ4, now=LATER, min_chain=0)
    assert plan.is_empty
    failed = plan.failed_preconditions()
    assert [p.name for p in failed] == ["inputs-complete"] and "state/0/0/15.delta" in failed[0].detail


def test_an_unsupported_codec_fails_the_codec_precondition():
    plan = snapshot_plan_from_listings(_listings(_deltas(1, 20)), StateConf("snappy", False), now=LATER, min_chain=0)
    assert [p.name for p in plan.failed_preconditions()] == ["codec"]


def test_a_leftover_spark_checksum_of_the_target_fails_the_plan():
    plan = snapshot_plan_from_listings(_listings([*_deltas(1, 20), "20.snapshot.crc"]), LZ4, now=LATER, min_chain=0)
    assert plan.is_empty and [p.name for p in plan.failed_preconditions()] == ["no-stale-checksum"]


def test_an_unknown_store_fails_stores_exist():
    plan = snapshot_plan_from_listings(_listings(_deltas(1, 20)), LZ4, now=LATER, min_chain=0, stores=["state/0/7"])
    assert plan.is_empty and [p.name for p in plan.failed_preconditions()] == ["stores-exist"]


def test_no_commit_means_nothing_to_snapshot():
    plan = snapshot_plan_from_listings(_listings(_deltas(1, 3), commits=0), LZ4, now=LATER, min_chain=0)
    assert plan.is_empty and [p.name for p in plan.failed_preconditions()] == ["version-committed"]


def test_removals_in_deltas_drop_their_keys_from_the_snapshot(tmp_path, write_files):
    def framed(*records: tuple[bytes, bytes | None]) -> bytes:
        out = b""
        for key, value in records:
            out += struct.pack(">i", len(key)) + key
            out += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
        return compress_lz4_block_stream(out + struct.pack(">i", -1))

    key_a, key_b, key_c = (bytes([n]) * 8 for n in (1, 2, 3))
    root = write_files(
        tmp_path,
        {
            "offsets/0": b"v1\n{}\n",
            "offsets/1": b"v1\n{}\n",
            "commits/0": b"v1\n{}\n",
            "commits/1": b"v1\n{}\n",
            "state/0/0/1.delta": framed((key_a, b"A" * 8), (key_b, b"B" * 8)),
            "state/0/0/2.delta": framed((key_a, None), (key_c, b"C" * 12), (key_b, b"b" * 8)),
        },
    )
    storage = CheckpointStorage(str(root))
    apply_snapshot(storage, plan_snapshot(storage, now=LATER, min_chain=0))
    # The 12-byte value is copied whole (Spark's reader floors it to 8 when it loads it).
    assert _snapshot_rows(root / "state/0/0/2.snapshot") == {key_b: b"b" * 8, key_c: b"C" * 8}
    # Two rows of 4 + 8 + 4 + value bytes (8 and 12), then the -1 end marker.
    assert len(b"".join(iter_lz4_blocks((root / "state/0/0/2.snapshot").read_bytes(), source="s"))) == 24 + 28 + 4


def test_a_plan_survives_json_and_a_second_apply_changes_nothing(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_from_json(plan_snapshot(storage, now=LATER, min_chain=0, version=11).as_json())
    first = apply_snapshot(storage, plan)
    contents = {w.path: (root / w.path).read_bytes() for w in plan.writes}
    second = apply_snapshot(storage, plan)
    assert len(first.written) == 2 and second.written == () and second.skipped_writes == first.written
    assert {p: (root / p).read_bytes() for p in contents} == contents
    assert plan_snapshot(storage, now=LATER, min_chain=0, version=11).is_empty


# --- crash safety: SIGKILL at every step, then check and finish ---------------------------------

CRASH_FIXTURE = "stream_stream_join"
CRASH_PARAMETERS = {"min_chain": 0, "version": 11}


def _count_steps() -> int:
    """How many times the hook is called applying the crash plan (on a throwaway copy)."""
    with tempfile.TemporaryDirectory() as scratch:
        storage = CheckpointStorage(str(_copy(CRASH_FIXTURE, Path(scratch))))
        return count_steps(apply_snapshot, storage.url, plan_snapshot(storage, now=LATER, **CRASH_PARAMETERS))


@pytest.mark.parametrize("kill_at", range(_count_steps()))
def test_a_snapshot_killed_at_any_step_leaves_loadable_state_and_a_rerun_finishes(tmp_path, kill_at):
    root = _copy(CRASH_FIXTURE, tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_snapshot(storage, now=LATER, **CRASH_PARAMETERS)
    stores = list_state_store_dirs(storage)
    expected = {(s.path, v): read_state_size(storage, s, v) for s in stores for v in (10, 11, 12)}
    rows = {w.path: _replayed(root, w.path.rsplit("/", 1)[0], 11) for w in plan.writes}
    assert apply_killed_at(apply_snapshot, str(root), plan, kill_at) == -signal.SIGKILL
    assert {
        (s.path, v): read_state_size(storage, s, v) for s in list_state_store_dirs(storage) for v in (10, 11, 12)
    } == expected
    resumed, _ = restrict_to_confirmed(plan, plan_snapshot(storage, now=LATER, **CRASH_PARAMETERS))
    apply_snapshot(storage, resumed)
    assert {path: _snapshot_rows(root / path) for path in rows} == rows
    assert plan_snapshot(storage, now=LATER, **CRASH_PARAMETERS).is_empty


def test_a_checkpoint_without_logs_or_state_has_nothing_to_snapshot(tmp_path):
    plan = plan_snapshot(CheckpointStorage(str(tmp_path)), now=LATER)
    assert plan.is_empty and plan.summary.startswith("nothing to do")
    assert [p.name for p in plan.failed_preconditions()] == ["version-committed"]


def test_an_input_that_changed_since_planning_stops_the_write(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    storage = CheckpointStorage(str(root))
    plan = plan_snapshot(storage, now=LATER, min_chain=0, version=11)
    with (root / "state/0/0/11.delta").open("ab") as delta:
        delta.write(b"x")
    with pytest.raises(PlanOutdatedError, match="state/0/0/11.delta"):
        apply_snapshot(storage, plan)
    assert not (root / "state/0/0/11.snapshot").exists()


def test_a_delta_cut_short_is_reported_with_its_path_and_nothing_is_written(tmp_path, write_files):
    body = struct.pack(">i", 8) + b"k" * 8 + struct.pack(">i", 8) + b"v" * 8  # no -1 end marker
    root = write_files(
        tmp_path,
        {
            "commits/0": b"v1\n{}\n",
            "commits/1": b"v1\n{}\n",
            "state/0/0/1.delta": compress_lz4_block_stream(body + struct.pack(">i", -1)),
            "state/0/0/2.delta": compress_lz4_block_stream(body),
        },
    )
    storage = CheckpointStorage(str(root))
    with pytest.raises(TruncatedFileError, match="state/0/0/2.delta"):
        apply_snapshot(storage, plan_snapshot(storage, now=LATER, min_chain=0))
    assert not (root / "state/0/0/2.snapshot").exists()
