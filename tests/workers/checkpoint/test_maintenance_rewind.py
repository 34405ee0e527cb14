"""Rewind (maintenance/rewind.py), its backup (backup.py) and undo (undo.py) on checkpoints PySpark wrote.

``file_source_dedup``: file source (log compacted every 3: 2.compact, 5.compact), HDFS state,
JSON file sink (11.compact, 14.compact), batches 12-15 in offsets/ and commits/. Its sink log
names the data files by absolute path where the fixture was written; a copy gets its paths
rewritten to the copy (``relocated_copy``), so that the sink's data files are the copy's.
What each rewind must delete is worked out here from the files themselves (JSON lines of the
logs, the metadata in the RocksDB zips), not through the code under test.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import time
import zipfile
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, our_fixture_checkpoints
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.inventory import list_tree
from workers.checkpoint.maintenance.actions import ACTIONS, apply_action, plan_action
from workers.checkpoint.maintenance.backup import read_manifest
from workers.checkpoint.maintenance.execute import apply_plan
from workers.checkpoint.maintenance.plan import MaintenancePlan, PlannedWrite, plan_from_json, restrict_to_confirmed
from workers.checkpoint.maintenance.rewind import apply_rewind, plan_rewind
from workers.checkpoint.maintenance.undo import apply_undo, plan_undo
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def later() -> float:
    """An hour from now, taken when a plan is made: the query is long stopped by then. (Taken once
    at import, it ran out in a 62-minute run under load, where files the tests wrote were newer.)"""
    return time.time() + 3600


BACKUP = "_ckptweb_backup/run-7"


def relocated_copy(name: str, tmp_path: Path) -> Path:
    """Copy fixture ``name`` and point its sink log's absolute paths at the copy's output."""
    base = tmp_path / name
    shutil.copytree(OUR_FIXTURES / name, base, symlinks=True)
    log = base / "output" / "_spark_metadata"
    for path in log.glob("[0-9]*") if log.is_dir() else ():
        text = path.read_text()
        path.write_text(re.sub(r"file://[^\"]*?/output/", f"file://{base}/output/", text))
    return base


def storages(base: Path) -> tuple[CheckpointStorage, CheckpointStorage]:
    return CheckpointStorage(str(base / "checkpoint")), CheckpointStorage(str(base / "output"))


def rewind(base: Path, to_batch: int, **options):
    checkpoint, sink = storages(base)
    return plan_rewind(checkpoint, to_batch=to_batch, now=later(), quiet_seconds=0, sink_storage=sink, **options)


def log_entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def sink_data_names(log: Path, names) -> set[str]:
    return {Path(e["path"]).name for name in names for e in log_entries(log / name)}


def tree(base: Path) -> dict[str, bytes]:
    """Every file below ``base`` (the backup left out) with its bytes."""
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and "_ckptweb_backup" not in p.parts
    }


def with_crc(directory: str, names) -> set[str]:
    return {f"{directory}/{n}" for name in names for n in (name, f".{name}.crc")}


# --- what a rewind deletes -----------------------------------------------------------------------


def test_a_rewind_of_a_file_source_hdfs_and_file_sink_query_deletes_what_a_restart_at_n_plus_1_must_not_see(
    tmp_path,
):
    base = relocated_copy("file_source_dedup", tmp_path)
    plan = rewind(base, 13)
    assert plan.is_allowed(), plan.failed_preconditions()

    sink_log = base / "output" / "_spark_metadata"
    # offsets/13 records logOffset 6 for source 0: source entries after 6 go.
    assert json.loads((base / "checkpoint/offsets/13").read_text().splitlines()[-1]) == {"logOffset": 6}
    # Data files listed by 14.compact or 15 and not by what allFiles(13) reads: 11.compact, 12, 13.
    only_rewound = sink_data_names(sink_log, ["14.compact", "15"]) - sink_data_names(
        sink_log, ["11.compact", "12", "13"]
    )
    assert only_rewound and all((base / "output" / n).exists() for n in only_rewound)
    expected = (
        with_crc("offsets", ["14", "15"])
        | with_crc("commits", ["14", "15"])
        | with_crc("sources/0", ["7"])
        | with_crc("state/0/0", ["15.delta", "16.delta", "16.snapshot"])
        | with_crc("state/0/1", ["15.delta", "16.delta", "16.snapshot"])
        | with_crc("@sink/_spark_metadata", ["14.compact", "15"])
        | {f"@sink/{n}" for n in only_rewound}
        | {f"@sink/.{n}.crc" for n in only_rewound if (base / "output" / f".{n}.crc").exists()}
    )
    paths = [d.path for d in plan.deletes]
    assert sorted(paths) == sorted(expected)
    # Data files before the sink log entries that list them (a plan made after a crash finds them
    # through those entries); newest batch first, its commit before its offsets; offsets last.
    position = {path: index for index, path in enumerate(paths)}
    assert max(position[f"@sink/{n}"] for n in only_rewound) < position["@sink/_spark_metadata/15"]
    assert position["commits/15"] < position["offsets/15"] < position["commits/14"] < position["offsets/14"]
    assert paths[-1] == "offsets/14"
    assert "batch 14" in plan.summary and any("Kafka" in note for note in plan.notes)


def test_a_rewind_of_the_latest_batch_or_later_has_nothing_to_do(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    for to_batch in (15, 16):
        plan = rewind(base, to_batch)
        assert plan.is_empty and plan.is_allowed() and "nothing to rewind" in plan.summary


@pytest.mark.parametrize("to_batch", [-1, True, "3"])
def test_a_rewind_target_is_a_batch_id(tmp_path, to_batch):
    with pytest.raises(ValueError, match="to_batch"):
        rewind(relocated_copy("killed_mid_batch", tmp_path), to_batch)


def test_a_rewind_before_an_uncommitted_batch_deletes_its_offsets_too(tmp_path):
    base = relocated_copy("killed_mid_batch", tmp_path)
    plan = rewind(base, 4)
    assert plan.is_allowed(), plan.failed_preconditions()
    logs = [d.path for d in plan.deletes if d.path.startswith(("offsets", "commits"))]
    assert logs == [
        "offsets/.6.crc",
        "offsets/6",
        "commits/.5.crc",
        "commits/5",
        "offsets/.5.crc",
        "offsets/5",
    ]
    state = {d.path.rsplit("/", 1)[1] for d in plan.deletes if d.path.startswith("state/")}
    on_disk = {p.name for p in (base / "checkpoint/state").rglob("*") if p.is_file() and p.parent.name.isdigit()}
    versions = {n: int(n.lstrip(".").split(".")[0]) for n in on_disk if n.lstrip(".").split(".")[0].isdigit()}
    assert state == {n for n, v in versions.items() if v > 5}


def zip_ssts(path: Path) -> set[str]:
    metadata = zipfile.ZipFile(path).read("metadata").decode().splitlines()[1]
    return {f["dfsSstFileName"] for f in json.loads(metadata)["sstFiles"]}


def test_a_rocksdb_rewind_deletes_later_zips_and_the_ssts_only_they_list(tmp_path):
    base = relocated_copy("rocksdb_no_changelog_agg", tmp_path)
    plan = rewind(base, 9)
    assert plan.is_allowed(), plan.failed_preconditions()
    for store in ("state/0/0", "state/0/1"):
        directory = base / "checkpoint" / store
        kept = {z for z in directory.glob("*.zip") if int(z.stem) <= 10}
        doomed = {z for z in directory.glob("*.zip") if int(z.stem) > 10}
        assert kept and doomed
        only_doomed = set().union(*map(zip_ssts, doomed)) - set().union(*map(zip_ssts, kept))
        deleted = {d.path.rsplit("/", 1)[1] for d in plan.deletes if d.path.startswith(f"{store}/")}
        assert {n for n in deleted if n.endswith(".sst")} == only_doomed
        assert {n for n in deleted if n.endswith(".zip")} == {z.name for z in doomed}


def test_a_rocksdb_checkpoint_format_2_rewind_deletes_every_later_version_and_keeps_the_committed_one(tmp_path):
    base = relocated_copy("rocksdb_checkpoint_v2_dedup", tmp_path)
    commit = json.loads((base / "checkpoint/commits/9").read_text().splitlines()[1])
    plan = rewind(base, 9)
    assert plan.is_allowed(), plan.failed_preconditions()
    deleted = {d.path for d in plan.deletes}
    for partition, (unique_id,) in enumerate(commit["stateUniqueIds"]["0"]):
        directory = base / "checkpoint" / "state" / "0" / str(partition)
        assert not any(f"state/0/{partition}/10_" in path for path in deleted)
        assert any(directory.glob(f"10_{unique_id}.*"))
        versions = {p.name: re.match(r"\.?([0-9]+)_", p.name) for p in directory.iterdir()}
        later = {f"state/0/{partition}/{n}" for n, m in versions.items() if m and int(m[1]) > 10}
        assert later and later <= deleted


# --- refusals ----------------------------------------------------------------------------------------


def refusal(plan) -> str:
    failed = plan.failed_preconditions()
    assert [p.name for p in failed] == ["rewind-needs"], plan.preconditions
    assert not plan.deletes
    return failed[0].detail


def test_a_rewind_whose_previous_offsets_are_purged_is_refused_with_the_newest_possible_batch(tmp_path):
    detail = refusal(rewind(relocated_copy("file_source_dedup", tmp_path), 12))
    assert "offsets/11 is gone" in detail and "the newest batch that can be rewound to is 14" in detail


def test_a_rewind_whose_state_version_is_gone_is_refused(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    (base / "checkpoint/state/0/1/14.delta").unlink()
    detail = refusal(rewind(base, 13))
    assert "state version 14 of state/0/1" in detail and "14.delta" in detail
    # Batch 14 loads version 15, whose chain needs 14.delta as well.
    assert "no batch can be rewound to" in detail


def test_a_rewind_whose_source_log_entry_is_gone_is_refused(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    (base / "checkpoint/sources/0/6").unlink()
    detail = refusal(rewind(base, 13))
    # allFiles(6) reads 5.compact and 6; offsets/14 also records logOffset 6 (a no-data batch), so
    # no batch can be rewound to.
    assert "sources/0/6 is gone" in detail


def test_a_rewind_across_a_sink_compaction_needs_the_batches_after_the_previous_one(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    (base / "output/_spark_metadata/12").unlink()
    detail = refusal(rewind(base, 13))
    assert "_spark_metadata/12 is gone" in detail and "the newest batch that can be rewound to is 14" in detail


def test_without_a_sink_location_the_plan_says_the_sink_log_must_be_rewound_too(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    plan = plan_rewind(storages(base)[0], to_batch=13, now=later(), quiet_seconds=0)
    assert not any(d.path.startswith("@sink/") for d in plan.deletes)
    assert any("_spark_metadata must be rewound" in note for note in plan.notes)


# --- apply, backup, undo ---------------------------------------------------------------------------


def test_apply_backs_up_every_file_before_deleting_it_and_undo_restores_the_checkpoint_byte_for_byte(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    before = tree(base)
    plan = plan_from_json(json.loads(json.dumps(rewind(base, 13, backup_dir=BACKUP).as_json())))
    checkpoint, sink = storages(base)
    applied = apply_rewind(checkpoint, plan, sink_storage=sink)
    assert sorted(applied.deleted) == sorted(d.path for d in plan.deletes)
    manifest = read_manifest(checkpoint, BACKUP)
    assert manifest.action == "rewind" and not manifest.created and not manifest.overwritten
    assert manifest.deleted == {d.path: d.size for d in plan.deletes}
    for path in manifest.deleted:
        assert (base / "checkpoint" / BACKUP / path).read_bytes() == before[_tree_key(path)], path

    undo = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0, sink_storage=sink)
    assert undo.is_allowed(), undo.failed_preconditions()
    apply_undo(checkpoint, undo, sink_storage=sink)
    assert tree(base) == before


def test_an_undo_is_refused_when_the_checkpoint_moved_on_or_the_backup_is_incomplete(tmp_path):
    base = relocated_copy("killed_mid_batch", tmp_path)
    checkpoint, sink = storages(base)
    apply_rewind(checkpoint, rewind(base, 4, backup_dir=BACKUP), sink_storage=sink)
    offsets_5 = (base / "checkpoint" / BACKUP / "offsets/5").read_bytes()
    # Same size, other bytes: what a query that ran on writes.
    (base / "checkpoint/offsets/5").write_bytes(offsets_5.replace(b"1", b"2"))
    (base / "checkpoint" / BACKUP / "commits/5").unlink()
    plan = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0)
    failed = {p.name: p.detail for p in plan.failed_preconditions()}
    assert "offsets/5, which the run deleted, exists again" in failed["unchanged-since-run"]
    assert "the copy of commits/5 is missing" in failed["backup-complete"]


def test_an_undo_without_a_manifest_is_refused_and_a_backup_dir_stays_inside_the_backup_root(tmp_path):
    base = relocated_copy("killed_mid_batch", tmp_path)
    plan = plan_undo(storages(base)[0], backup_dir=BACKUP, now=later(), quiet_seconds=0)
    assert [p.name for p in plan.failed_preconditions()] == ["backup-complete"] and plan.is_empty
    for wrong in ("state", "_ckptweb_backup", "_ckptweb_backup/../offsets"):
        with pytest.raises(ValueError, match="backup directory"):
            plan_undo(storages(base)[0], backup_dir=wrong, now=later(), quiet_seconds=0)


def test_rewind_and_undo_are_actions_with_the_sink_storage(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    before = tree(base)
    checkpoint, sink = storages(base)
    assert {"rewind", "undo"} <= set(ACTIONS)
    for action, parameters in (("rewind", {"to_batch": 14, "backup_dir": BACKUP}), ("undo", {"backup_dir": BACKUP})):
        plan = plan_action(action, checkpoint, parameters, now=later(), quiet_seconds=0, sink_storage=sink)
        assert plan.is_allowed() and not plan.is_empty, plan.failed_preconditions()
        apply_action(checkpoint, plan, parameters, sink_storage=sink)
        assert (tree(base) == before) == (action == "undo")


# --- crash safety: killed at any step, resumed -----------------------------------------------------


def _crash_base(scratch: Path) -> Path:
    return relocated_copy("file_source_dedup", scratch)


def _steps(apply, make_plan) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        base = _crash_base(Path(scratch))
        return count_steps(
            functools.partial(apply, sink_storage=storages(base)[1]), storages(base)[0].url, make_plan(base)
        )


def _tree_key(plan_path: str) -> str:
    """The key of ``tree`` for a plan path."""
    return plan_path.replace("@sink/", "output/", 1) if plan_path.startswith("@sink/") else f"checkpoint/{plan_path}"


def _rewind_plan(base: Path):
    return rewind(base, 14, backup_dir=BACKUP)


@pytest.mark.parametrize("kill_at", range(_steps(apply_rewind, _rewind_plan)))
def test_a_rewind_killed_at_any_step_resumes_to_the_planned_checkpoint_and_undo_restores_it(tmp_path, kill_at):
    base = _crash_base(tmp_path)
    before = tree(base)
    checkpoint, sink = storages(base)
    plan = _rewind_plan(base)
    planned = set(before) - {_tree_key(d.path) for d in plan.deletes}
    apply = functools.partial(apply_rewind, sink_storage=sink)
    assert apply_killed_at(apply, checkpoint.url, plan, kill_at) == -signal.SIGKILL
    resumed, _ = restrict_to_confirmed(plan, _rewind_plan(base))
    apply_rewind(checkpoint, resumed, sink_storage=sink)
    assert set(tree(base)) == planned
    undo = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0, sink_storage=sink)
    assert undo.is_allowed(), undo.failed_preconditions()
    apply_undo(checkpoint, undo, sink_storage=sink)
    assert tree(base) == before


def _undo_plan(base: Path):
    checkpoint, sink = storages(base)
    apply_rewind(checkpoint, _rewind_plan(base), sink_storage=sink)
    return plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0, sink_storage=sink)


@pytest.mark.parametrize("kill_at", range(_steps(apply_undo, _undo_plan)))
def test_an_undo_killed_at_any_step_resumes_to_the_checkpoint_before_the_rewind(tmp_path, kill_at):
    base = _crash_base(tmp_path)
    before = tree(base)
    checkpoint, sink = storages(base)
    plan = _undo_plan(base)
    apply = functools.partial(apply_undo, sink_storage=sink)
    assert apply_killed_at(apply, checkpoint.url, plan, kill_at) == -signal.SIGKILL
    fresh = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0, sink_storage=sink)
    assert fresh.is_allowed(), fresh.failed_preconditions()
    resumed, _ = restrict_to_confirmed(plan, fresh)
    apply_undo(checkpoint, resumed, sink_storage=sink)
    assert tree(base) == before


@pytest.mark.parametrize("name", [path.parent.name for path in our_fixture_checkpoints()])
def test_every_fixture_rewinds_one_batch_and_its_undo_restores_it_byte_for_byte(tmp_path, name):
    base = relocated_copy(name, tmp_path)
    before = tree(base)
    checkpoint, sink = storages(base)
    committed = sorted(int(p.name) for p in (base / "checkpoint/commits").iterdir() if p.name.isdigit())
    plan = rewind(base, committed[-2], backup_dir=BACKUP)
    assert plan.is_allowed() and plan.deletes, (plan.summary, plan.failed_preconditions())
    apply_rewind(checkpoint, plan, sink_storage=sink)
    remaining = sorted(int(p.name) for p in (base / "checkpoint/offsets").iterdir() if p.name.isdigit())
    assert remaining[-1] == committed[-2]
    undo = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0, sink_storage=sink)
    apply_undo(checkpoint, undo, sink_storage=sink)
    assert tree(base) == before


def test_the_checkpoint_walkers_do_not_enter_the_backup(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    checkpoint, sink = storages(base)
    apply_rewind(checkpoint, rewind(base, 13, backup_dir=BACKUP), sink_storage=sink)
    # A leftover temporary file and Hadoop checksums whose files the backup holds, as a killed copy leaves.
    leftover = base / "checkpoint" / BACKUP / "offsets" / ".15.12345678-1234-1234-1234-123456789012.tmp"
    leftover.write_bytes(b"")
    os.utime(leftover, (time.time() - 7200, time.time() - 7200))  # past the temporary-file grace period
    assert (base / "checkpoint" / BACKUP / "offsets" / ".15.crc").exists()
    assert not any(path.startswith("_ckptweb_backup") for path in list_tree(checkpoint).directories)
    findings = check_checkpoint(checkpoint, sink_log=sink)
    assert not [f for f in findings if "_ckptweb_backup" in f.path]


def test_an_undo_of_a_run_that_changed_the_sink_needs_the_sink_location(tmp_path):
    base = relocated_copy("file_source_dedup", tmp_path)
    checkpoint, sink = storages(base)
    apply_rewind(checkpoint, rewind(base, 14, backup_dir=BACKUP), sink_storage=sink)
    plan = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0)
    assert [p.name for p in plan.failed_preconditions()] == ["sink-location"] and plan.is_empty
    with pytest.raises(ValueError, match="no sink storage"):
        apply_rewind(checkpoint, rewind(base, 13, backup_dir=BACKUP), sink_storage=None)
    assert (base / "checkpoint/offsets/14").exists()  # refused before any change


def test_an_overwrite_is_backed_up_once_even_when_the_run_is_repeated_and_undo_restores_the_file_and_its_crc(
    tmp_path,
):
    # An overwrite as skip and repair plan them (a rewritten offsets file with a new Hadoop CRC).
    base = relocated_copy("killed_mid_batch", tmp_path)
    before = tree(base)
    checkpoint = storages(base)[0]
    write = PlannedWrite("offsets/6", (), 3, "rewritten", overwrite=True, hadoop_crc=True)
    plan = MaintenancePlan("repair", {"backup_dir": BACKUP}, writes=(write,))
    for _ in range(2):  # a resumed run writes again; the backup must keep the first bytes
        apply_plan(checkpoint, plan, lambda storage, planned: b"new")
    assert (base / "checkpoint/offsets/6").read_bytes() == b"new"
    manifest = read_manifest(checkpoint, BACKUP)
    assert set(manifest.overwritten) == {"offsets/6", "offsets/.6.crc"} and not manifest.created
    assert (base / "checkpoint" / BACKUP / "offsets/6").read_bytes() == before["checkpoint/offsets/6"]
    undo = plan_undo(checkpoint, backup_dir=BACKUP, now=later(), quiet_seconds=0)
    assert [w.path for w in undo.writes] == ["offsets/6", "offsets/.6.crc"] and undo.is_allowed()
    apply_undo(checkpoint, undo)
    assert tree(base) == before
