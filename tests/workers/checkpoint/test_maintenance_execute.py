"""The plan types and the crash-safe executor shared by every maintenance action."""

from __future__ import annotations

import pytest

from workers.checkpoint.errors import MissingFileError
from workers.checkpoint.maintenance.execute import PlanOutdatedError, apply_plan
from workers.checkpoint.maintenance.plan import (
    FileState,
    MaintenancePlan,
    PlannedDelete,
    PlannedWrite,
    Precondition,
    plan_from_json,
    restrict_to_confirmed,
)
from workers.checkpoint.maintenance.sidecars import hadoop_crc_bytes, sidecars_of
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def _storage_in(directory):
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in {"1.delta": b"one", "2.delta": b"two!"}.items():
        (directory / name).write_bytes(data)
        (directory / f".{name}.crc").write_bytes(hadoop_crc_bytes(data))
    return CheckpointStorage(str(directory))


@pytest.fixture
def storage(tmp_path):
    return _storage_in(tmp_path)


def _concat(storage, write):
    return b"".join(storage.read_bytes(i.path) for i in write.inputs)


def _plan(**fields) -> MaintenancePlan:
    defaults = dict(
        action="snapshot",
        parameters={"min_chain": 1},
        writes=(
            PlannedWrite(
                "2.snapshot", (FileState("1.delta", 3), FileState("2.delta", 4)), 7, "chain of 2", hadoop_crc=True
            ),
        ),
        deletes=(
            PlannedDelete(".1.delta.crc", 12, "checksum of 1.delta"),
            PlannedDelete("1.delta", 3, "replaced by 2.snapshot"),
        ),
        preconditions=(Precondition("query-stopped", True, "idle"),),
    )
    return MaintenancePlan(**{**defaults, **fields})


def test_writes_happen_before_deletes_and_each_step_is_announced(storage, tmp_path):
    steps = []

    applied = apply_plan(
        storage, _plan(), _concat, on_step=lambda op, path, done, total: steps.append((op, path, done, total))
    )

    assert (tmp_path / "2.snapshot").read_bytes() == b"onetwo!"
    assert (tmp_path / ".2.snapshot.crc").read_bytes() == hadoop_crc_bytes(b"onetwo!")
    assert not (tmp_path / "1.delta").exists() and not (tmp_path / ".1.delta.crc").exists()
    assert [op for op, *_ in steps] == ["write", "write-crc", "delete", "delete", "done"]
    assert steps[-1][2:] == (3, 3)
    assert (
        applied.written == ("2.snapshot",)
        and applied.deleted == (".1.delta.crc", "1.delta")
        and applied.bytes_freed == 15
    )


def test_applying_the_same_plan_again_changes_nothing_more(storage, tmp_path):
    apply_plan(storage, _plan(), _concat)
    before = sorted(p.name for p in tmp_path.iterdir())

    again = apply_plan(storage, _plan(), _concat)

    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert again.written == () and again.skipped_writes == ("2.snapshot",)
    assert again.already_absent == (".1.delta.crc", "1.delta") and again.bytes_freed == 0


def test_a_temporary_file_of_an_interrupted_write_is_removed_before_writing_again(storage, tmp_path):
    leftover = tmp_path / ".2.snapshot.6f1c0f9e-7c43-4bb6-9a43-2f7d1d2a1c11.tmp"
    leftover.write_bytes(b"half")

    apply_plan(storage, _plan(), _concat)

    assert not leftover.exists()
    assert (tmp_path / "2.snapshot").read_bytes() == b"onetwo!"


def test_an_input_that_changed_since_planning_stops_the_run_before_anything_changes(storage, tmp_path):
    (tmp_path / "2.delta").write_bytes(b"rewritten")

    with pytest.raises(PlanOutdatedError, match="2.delta: was 4 bytes when planned, now 9; plan again"):
        apply_plan(storage, _plan(), _concat)

    assert (tmp_path / "1.delta").exists() and not (tmp_path / "2.snapshot").exists()


def test_a_vanished_input_is_a_missing_file_error_naming_it(storage, tmp_path):
    (tmp_path / "1.delta").unlink()

    with pytest.raises(MissingFileError, match="1.delta: needed to build 2.snapshot"):
        apply_plan(storage, _plan(), _concat)


def test_an_overwrite_replaces_the_crc_too(storage, tmp_path):
    (tmp_path / "2.snapshot").write_bytes(b"old")
    (tmp_path / ".2.snapshot.crc").write_bytes(hadoop_crc_bytes(b"old"))
    plan = _plan(
        writes=(PlannedWrite("2.snapshot", (FileState("2.delta", 4),), 4, "rewrite", overwrite=True, hadoop_crc=True),),
        deletes=(),
    )

    apply_plan(storage, plan, _concat)

    assert (tmp_path / "2.snapshot").read_bytes() == b"two!"
    assert (tmp_path / ".2.snapshot.crc").read_bytes() == hadoop_crc_bytes(b"two!")


def test_a_plan_survives_its_json_form(storage):
    plan = _plan(summary="snapshot 1 store", notes=("note",), planned_at=12.5)

    assert plan_from_json(plan.as_json()) == plan
    assert plan.as_json()["bytes_freed"] == 15 and plan.as_json()["bytes_written"] == 7


def test_only_query_stopped_can_be_overridden():
    plan = _plan(
        preconditions=(Precondition("query-stopped", False, "busy"), Precondition("retention", False, "needed"))
    )

    assert [p.name for p in plan.failed_preconditions(overrides={"query-stopped", "retention"})] == ["retention"]
    assert not plan.is_allowed(overrides={"query-stopped"})
    assert _plan(preconditions=(Precondition("query-stopped", False, "busy"),)).is_allowed(overrides={"query-stopped"})


def test_a_worker_does_only_what_both_the_confirmed_and_a_fresh_plan_contain():
    confirmed = _plan()
    fresh = _plan(
        writes=(),  # the snapshot exists already: an earlier attempt wrote it
        deletes=(PlannedDelete("1.delta", 3, "x"), PlannedDelete("0.delta", 9, "newly expired, never confirmed")),
        preconditions=(Precondition("query-stopped", False, "a batch ran"),),
    )

    plan, skipped = restrict_to_confirmed(confirmed, fresh)

    # The snapshot stays only to add its CRC if the earlier attempt was killed before it.
    assert [(w.path, w.checksum_only) for w in plan.writes] == [("2.snapshot", True)]
    assert [d.path for d in plan.deletes] == ["1.delta"]
    assert plan.preconditions == fresh.preconditions
    assert [line.split(":")[0] for line in skipped] == ["write 2.snapshot", "delete .1.delta.crc"]


def test_a_write_kept_for_its_checksum_adds_the_missing_crc_and_is_reported_once(storage, tmp_path):
    (tmp_path / "2.snapshot").write_bytes(b"earlier attempt")  # written, killed before its CRC
    plan, skipped = restrict_to_confirmed(_plan(), _plan(writes=()))

    applied = apply_plan(storage, plan, _concat)

    assert (tmp_path / ".2.snapshot.crc").read_bytes() == hadoop_crc_bytes(b"earlier attempt")
    assert applied.written == () and applied.skipped_writes == ()  # the skipped line alone says why
    assert [line.split(":")[0] for line in skipped] == ["write 2.snapshot"]


def test_sidecars_are_found_in_the_order_they_must_be_deleted():
    names = {"5_ab.zip", "5_ab.zip.crc", ".5_ab.zip.crc.crc", ".5_ab.zip.crc", "6_cd.zip"}

    assert sidecars_of("5_ab.zip", names) == ("5_ab.zip.crc", ".5_ab.zip.crc.crc", ".5_ab.zip.crc")
    assert sidecars_of("6_cd.zip", names) == ()


def test_an_overwrite_without_a_crc_of_its_own_removes_the_stale_one(storage, tmp_path):
    (tmp_path / "2.snapshot").write_bytes(b"old")
    (tmp_path / ".2.snapshot.crc").write_bytes(hadoop_crc_bytes(b"old"))
    plan = _plan(
        writes=(PlannedWrite("2.snapshot", (FileState("2.delta", 4),), 4, "rewrite", overwrite=True),), deletes=()
    )

    apply_plan(storage, plan, _concat)

    assert (tmp_path / "2.snapshot").read_bytes() == b"two!"
    assert not (tmp_path / ".2.snapshot.crc").exists()


def test_a_run_killed_between_the_file_and_its_crc_is_finished_by_the_next_run(storage, tmp_path):
    def kill_before_the_crc(operation, path, done, total):
        if operation == "write-crc":
            raise _Killed

    with pytest.raises(_Killed):
        apply_plan(storage, _plan(), _concat, on_step=kill_before_the_crc)
    # A file without its CRC: Hadoop reads it unchecked (a CRC without its file would block Spark).
    assert (tmp_path / "2.snapshot").exists() and not (tmp_path / ".2.snapshot.crc").exists()

    apply_plan(storage, _plan(), _concat)

    assert (tmp_path / ".2.snapshot.crc").read_bytes() == hadoop_crc_bytes((tmp_path / "2.snapshot").read_bytes())


class _Killed(Exception):
    """Stands for the SIGKILL of a worker: the apply stops right before a step."""


def _killed_before(step: int):
    """An on_step hook that stops the apply right before its ``step``-th call."""
    calls = []

    def hook(operation, path, done, total):
        if len(calls) == step:
            raise _Killed(f"killed before step {step}: {operation} {path}")
        calls.append(operation)

    return hook


def _step_count(plan, directory) -> int:
    steps = []
    apply_plan(_storage_in(directory), plan, _concat, on_step=lambda *step: steps.append(step))
    return len(steps)


def _checksum_problems(directory) -> list[str]:
    """Hadoop checksums a reader would trip on: one without its file (Spark's write-once rename of a
    log file fails on it) or one of other bytes than its file's (a ChecksumException at read)."""
    problems = []
    for crc in sorted(directory.glob(".*.crc")):
        target = directory / crc.name[1 : -len(".crc")]
        if not target.exists():
            problems.append(f"{crc.name} without its file")
        elif crc.read_bytes() != hadoop_crc_bytes(target.read_bytes()):
            problems.append(f"{crc.name} describes other bytes than {target.name}'s")
    return problems


# A CRC without its file makes Spark's later commit of that name fail ('Multiple streaming queries are
# concurrently using', seen on a skip's commits/N); a CRC beside other bytes fails Spark's read.
@pytest.mark.parametrize("overwrite", [False, True], ids=["new file", "overwrite"])
def test_a_run_killed_at_any_step_leaves_no_checksum_without_its_file_or_of_other_bytes(tmp_path, overwrite):
    plan = _plan(
        writes=(
            PlannedWrite("2.snapshot", (FileState("2.delta", 4),), 4, "write", overwrite=overwrite, hadoop_crc=True),
        ),
    )
    for step in range(_step_count(plan, tmp_path / "uninterrupted")):
        directory = tmp_path / f"killed-before-{step}"
        storage = _storage_in(directory)
        if overwrite:
            (directory / "2.snapshot").write_bytes(b"old")
            (directory / ".2.snapshot.crc").write_bytes(hadoop_crc_bytes(b"old"))
        with pytest.raises(_Killed):
            apply_plan(storage, plan, _concat, on_step=_killed_before(step))
        assert _checksum_problems(directory) == [], step

        apply_plan(storage, plan, _concat)  # the resumed run
        assert (directory / ".2.snapshot.crc").read_bytes() == hadoop_crc_bytes(b"two!"), step
        assert _checksum_problems(directory) == [], step


def test_a_resumed_run_backs_up_only_what_it_deletes_or_overwrites_not_what_its_first_attempt_wrote(tmp_path):
    backup_dir = "_ckptweb_backup/run-1"
    plan = _plan(
        action="repair",
        parameters={"backup_dir": backup_dir},
        writes=(
            PlannedWrite("2.delta", (FileState("1.delta", 3),), 3, "rewritten", overwrite=True),
            PlannedWrite("3.delta", (FileState("1.delta", 3),), 3, "created", overwrite=True),
        ),
        deletes=(),
    )
    steps = _step_count(plan, tmp_path / "uninterrupted")
    storage = _storage_in(tmp_path / "killed")
    with pytest.raises(_Killed):
        apply_plan(storage, plan, _concat, on_step=_killed_before(steps - 1))  # every write done

    apply_plan(storage, plan, _concat)

    backup = tmp_path / "killed" / backup_dir
    assert sorted(p.name for p in backup.iterdir()) == [".2.delta.crc", "2.delta", "manifest.json"]
    assert (backup / "2.delta").read_bytes() == b"two!"
