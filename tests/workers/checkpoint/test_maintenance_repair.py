"""The repair action on damaged copies of real checkpoints: what it plans, and that the check is clean after.

Every test copies a checkpoint PySpark wrote (tests/fixtures), damages it the way a crash or a
hand edit does, plans and applies the repair, and runs the integrity check again: no error may be
left. Where the repair rebuilds a file, the rebuilt bytes are compared with the file Spark wrote.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.maintenance.plan import plan_from_json
from workers.checkpoint.maintenance.repair import apply_repair, is_repairable, plan_repair, repairable_findings
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

LATER = 4_000_000_000.0
TEMP_NAME = ".7.0f8fad5b-d9cb-469f-a165-70867728950e.tmp"


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(OUR_FIXTURES / name / "checkpoint", target, copy_function=shutil.copyfile)
    return target


def _repair(root: Path, **parameters):
    storage = CheckpointStorage(str(root))
    plan = plan_repair(storage, now=LATER, **parameters)
    assert plan.is_allowed(), plan.preconditions
    apply_repair(storage, plan)
    return plan


def _errors(root: Path) -> list:
    return [f for f in check_checkpoint(CheckpointStorage(str(root))) if f.severity == "error"]


def _names(root: Path, log: str) -> list[str]:
    return sorted((p.name for p in (root / log).iterdir()), key=lambda n: (n.startswith("."), n))


def test_an_empty_latest_offsets_file_of_an_uncommitted_batch_goes_so_spark_plans_the_batch_again(tmp_path):
    root = _copy("killed_mid_batch", tmp_path)
    (root / "offsets" / "6").write_bytes(b"")
    assert {f.code for f in _errors(root)} == {"log-file-empty"}

    plan = _repair(root)

    assert [d.path for d in plan.deletes] == ["offsets/.6.crc", "offsets/6"] and not plan.writes
    assert "batch 6" in plan.summary
    assert _names(root, "offsets") == ["3", "4", "5", ".3.crc", ".4.crc", ".5.crc"]
    assert _errors(root) == []


def test_damaged_offsets_of_the_batch_before_the_latest_cut_the_logs_back_below_it(tmp_path):
    root = _copy("killed_mid_batch", tmp_path)
    (root / "offsets" / "5").write_bytes(b'v1\n{"batchWatermarkMs":')

    plan = _repair(root)

    assert "batches 5–6" in plan.summary
    assert _names(root, "offsets") == ["3", "4", ".3.crc", ".4.crc"]
    assert _names(root, "commits") == ["3", "4", ".3.crc", ".4.crc"]
    assert _errors(root) == []


def test_a_cut_that_makes_a_damaged_commit_the_latest_also_repairs_that_commit(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    (root / "offsets" / "11").write_bytes(b"")
    (root / "commits" / "10").write_bytes(b"v1\n{")
    assert {f.path for f in _errors(root)} == {"offsets/11"}  # the check reads only the latest commit

    plan = _repair(root)

    assert {d.path for d in plan.deletes if not d.path.endswith(".crc")} == {"offsets/11", "commits/11", "commits/10"}
    assert _names(root, "commits") == ["8", "9", ".8.crc", ".9.crc"]
    assert _errors(root) == []


def test_a_truncated_latest_commit_is_rebuilt_from_the_next_offsets_byte_for_byte(tmp_path):
    root = _copy("killed_mid_batch", tmp_path)
    original = (root / "commits" / "5").read_bytes()
    (root / "commits" / "5").write_bytes(original[:10])
    assert {f.code for f in _errors(root)} == {"file-corrupt"}

    plan = _repair(root)

    assert [w.path for w in plan.writes] == ["commits/5"] and plan.writes[0].overwrite and not plan.deletes
    assert (root / "commits" / "5").read_bytes() == original
    assert _errors(root) == []


def test_a_damaged_commit_of_the_latest_batch_goes_so_spark_re_runs_that_batch(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    (root / "commits" / "11").write_bytes(b'v1\n{"nextBatchWat')

    plan = _repair(root)

    assert [d.path for d in plan.deletes] == ["commits/.11.crc", "commits/11"] and not plan.writes
    assert any("Batch 11 runs again" in note for note in plan.notes)
    assert _errors(root) == []
    assert {f.code for f in check_checkpoint(CheckpointStorage(str(root)))} >= {"batch-uncommitted"}


def test_a_hole_before_the_latest_offsets_cuts_the_logs_back_to_the_batch_before_it(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    (root / "offsets" / "10").unlink()
    assert {f.code for f in _errors(root)} == {"offsets-gap"}

    plan = _repair(root)

    assert {d.path for d in plan.deletes} == {
        "offsets/11",
        "offsets/.11.crc",
        "offsets/.10.crc",  # the checksum of the file lost in the hole, an orphan now
        "commits/10",
        "commits/.10.crc",
        "commits/11",
        "commits/.11.crc",
    }
    assert _names(root, "offsets") == ["8", "9", ".8.crc", ".9.crc"]
    assert _names(root, "commits") == ["8", "9", ".8.crc", ".9.crc"]
    assert _errors(root) == []


def test_a_hole_with_nothing_below_it_is_not_repaired_and_the_plan_says_why(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    for batch_id in (8, 9, 10):
        (root / "offsets" / str(batch_id)).unlink()

    plan = plan_repair(CheckpointStorage(str(root)), now=LATER)

    assert not plan.writes and {d.path for d in plan.deletes} == {"offsets/.8.crc", "offsets/.9.crc", "offsets/.10.crc"}
    assert any("no batch is left below batch 10" in note for note in plan.notes)


def test_commits_beyond_the_latest_offsets_go(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    (root / "offsets" / "11").unlink()
    assert {f.code for f in _errors(root)} == {"commit-without-offsets"}

    plan = _repair(root)

    assert [d.path for d in plan.deletes] == ["commits/.11.crc", "commits/11", "offsets/.11.crc"]
    assert _errors(root) == []


def test_a_commit_missing_below_the_latest_is_rebuilt_byte_for_byte(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    original = (root / "commits" / "9").read_bytes()
    (root / "commits" / "9").unlink()

    plan = _repair(root, damage="commit-missing")

    assert [w.path for w in plan.writes] == ["commits/9"] and not plan.writes[0].overwrite
    assert (root / "commits" / "9").read_bytes() == original
    assert (root / "commits" / ".9.crc").exists()
    assert not [f for f in check_checkpoint(CheckpointStorage(str(root))) if f.code == "commit-missing"]


def test_a_checkpoint_format_2_commit_is_never_rebuilt(tmp_path):
    root = _copy("rocksdb_checkpoint_v2_dedup", tmp_path)
    (root / "commits" / "9").unlink()

    plan = plan_repair(CheckpointStorage(str(root)), now=LATER)

    assert not plan.writes
    assert any(note.startswith("not repaired: commit-missing commits/9") for note in plan.notes)


def test_a_missing_metadata_file_is_written_with_the_query_id_given(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    original = (root / "metadata").read_bytes()
    (root / "metadata").unlink()
    storage = CheckpointStorage(str(root))

    unknown = plan_repair(storage, now=LATER)
    assert not unknown.writes and any("query id is not known" in note for note in unknown.notes)

    plan = _repair(root, query_id="ff1d0735-693d-429a-9ec2-c0ac91f92c73")

    assert [w.path for w in plan.writes] == ["metadata"] and not plan.deletes
    assert (root / "metadata").read_bytes() == original
    assert (root / ".metadata.crc").exists()
    assert _errors(root) == []


def test_a_query_id_that_is_no_uuid_is_refused(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    with pytest.raises(ValueError, match="UUID"):
        plan_repair(CheckpointStorage(str(root)), now=LATER, query_id="not-an-id")


def test_temporary_files_of_a_killed_writer_go_and_nothing_else(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    leftover = root / "offsets" / TEMP_NAME
    leftover.write_bytes(b"v1\n{")
    an_hour_ago = time.time() - 3600
    os.utime(leftover, (an_hour_ago, an_hour_ago))
    findings = check_checkpoint(CheckpointStorage(str(root)))
    assert [f.code for f in repairable_findings(findings)] == ["temporary-file"]

    plan = _repair(root)

    assert [d.path for d in plan.deletes] == [f"offsets/{TEMP_NAME}"]
    assert not leftover.exists()
    assert not [f for f in check_checkpoint(CheckpointStorage(str(root))) if f.code == "temporary-file"]


def test_leftovers_inside_a_maintenance_backup_are_left_alone(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    backup = root / "_ckptweb_backup" / "run-7" / "offsets"
    backup.mkdir(parents=True)
    (backup / ".12.crc").write_bytes(b"crc\0")  # the checksum of a file the run deleted and kept

    plan = plan_repair(CheckpointStorage(str(root)), now=LATER)

    assert not [d for d in plan.deletes if d.path.startswith("_ckptweb_backup/")]


def test_a_healthy_checkpoint_needs_no_repair_and_no_finding_links_to_one(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    findings = check_checkpoint(CheckpointStorage(str(root)))
    assert not [f for f in findings if is_repairable(f)]
    assert plan_repair(CheckpointStorage(str(root)), now=LATER).is_empty


def test_an_unknown_damage_code_is_refused(tmp_path):
    root = _copy("windowed_agg_file_sink", tmp_path)
    with pytest.raises(ValueError, match="no repairable finding code"):
        plan_repair(CheckpointStorage(str(root)), now=LATER, damage="state-version-missing")


def test_the_repair_goes_through_the_action_entry_points_and_its_stored_plan(tmp_path):
    root = _copy("killed_mid_batch", tmp_path)
    (root / "offsets" / "6").write_bytes(b"v1\n")
    storage = CheckpointStorage(str(root))

    plan = plan_action("repair", storage, {"damage": "log-file-incomplete"}, now=LATER, quiet_seconds=0)
    stored = plan_from_json(plan.as_json())
    applied = apply_action(storage, stored, {"damage": "log-file-incomplete"})

    assert applied.deleted == ("offsets/.6.crc", "offsets/6")
    assert _errors(root) == []


@pytest.mark.parametrize("damage", ["hole", "damaged-latest-commit"])
def test_a_repair_killed_at_any_step_is_finished_by_planning_and_applying_again(tmp_path, damage):
    reference = _copy("killed_mid_batch", tmp_path / "reference")
    if damage == "hole":
        (reference / "offsets" / "5").unlink()
    else:
        (reference / "offsets" / "6").unlink()  # the latest commit then has no next offsets to rebuild it from
        (reference / "commits" / "5").write_bytes(b"v1\n{")
    pristine = tmp_path / "pristine"
    shutil.copytree(reference, pristine)
    plan = _repair(reference)
    steps = count_steps(apply_repair, str(_fresh_copy(pristine, tmp_path / "count")), plan)

    for kill_at in range(steps):
        root = _fresh_copy(pristine, tmp_path / f"killed-{kill_at}")
        assert apply_killed_at(apply_repair, str(root), plan, kill_at) == -signal.SIGKILL
        _repair(root)
        assert _tree(root) == _tree(reference), f"killed at step {kill_at}"
        assert _errors(root) == []


def _fresh_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    return target


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
