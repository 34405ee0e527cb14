"""Query directories (checkpoint and file sink output) compared before and after maintenance.

``tree_differences``: two trees, byte for byte (an undo's result against a copy of its input).

What a maintenance run killed part-way may leave, a query directory taken as relative path ->
bytes (``contents``): a run that backs up (``backup_dir``, below the checkpoint) may leave only a
mix of the files as they were before it and as the uninterrupted run leaves them (no third
content, no temporary file), and every file it already deleted or overwrote has its exact copy
in the backup.
"""

from __future__ import annotations

import filecmp
from collections.abc import Mapping
from pathlib import Path

from workers.checkpoint.maintenance.sidecars import hadoop_crc_bytes

BACKUP_ROOT = "checkpoint/_ckptweb_backup/"
# A plan path below the file sink's output directory is "@sink/<path>"; its copy is inside the checkpoint.
SINK_PREFIX = "output/"


def contents(base: Path) -> dict[str, bytes]:
    """Every file below ``base`` (relative path -> bytes)."""
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def outside_backups(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files Spark reads: everything but the ``_ckptweb_backup`` directory."""
    return {path: data for path, data in files.items() if not path.startswith(BACKUP_ROOT)}


def neither_before_nor_after(
    before: Mapping[str, bytes], after: Mapping[str, bytes], left: Mapping[str, bytes]
) -> list[str]:
    """Files (outside the backups) whose presence or bytes are those of neither the run's input nor
    its result, and Hadoop CRCs that describe other bytes than their file's.

    One third state is allowed: a file whose Hadoop CRC is gone (deleted right before the file is
    replaced, written right after it). Hadoop reads a file without a CRC unchecked; a CRC without
    its file, or beside other bytes, is what would fail Spark, and is never allowed.
    """
    before, after, left = outside_backups(before), outside_backups(after), outside_backups(left)
    changed = {path for path in {*before, *after, *left} if left.get(path) not in (before.get(path), after.get(path))}
    crc_gone = {path for path in changed if path not in left and _crc_file(path) in left}
    return sorted((changed - crc_gone) | _crcs_of_other_bytes(left))


def _crc_file(path: str) -> str | None:
    """The file a Hadoop ``.<name>.crc`` describes, or None when ``path`` is no such CRC."""
    directory, _, name = path.rpartition("/")
    if not (name.startswith(".") and name.endswith(".crc")):
        return None
    return f"{directory}/{name[1:-4]}" if directory else name[1:-4]


def _crcs_of_other_bytes(left: Mapping[str, bytes]) -> set[str]:
    return {
        path
        for path, data in left.items()
        if (file := _crc_file(path)) is not None and (file not in left or data != hadoop_crc_bytes(left[file]))
    }


def changed_without_copy(before: Mapping[str, bytes], left: Mapping[str, bytes], backup_dir: str) -> list[str]:
    """Files of the run's input, deleted or rewritten since, without their exact copy in ``backup_dir``."""
    missing = []
    for path, data in outside_backups(before).items():
        if left.get(path) != data and left.get(_copy_path(path, backup_dir)) != data:
            missing.append(path)
    return sorted(missing)


def _copy_path(path: str, backup_dir: str) -> str:
    if path.startswith(SINK_PREFIX):
        return f"checkpoint/{backup_dir}/@sink/{path.removeprefix(SINK_PREFIX)}"
    return f"checkpoint/{backup_dir}/{path.removeprefix('checkpoint/')}"


def first_step_of_each_kind(steps: list[tuple[str, str]]) -> list[int]:
    """Kill points: the first step of each operation on each top directory, and the last step.

    The steps of one kind (copy a state file, delete a sink data file, restore an offsets file)
    differ only in the file; the first of each kind is the first time the run is killed right
    after a different kind of step, and the last step ("done") is a kill after every change and
    before the run records its end. A "delete" step is announced after the file's copy is made,
    so killing there is a kill between the copy and the delete; an undo's "write" steps are its
    restores.
    """
    first: dict[tuple[str, str], int] = {}
    for index, (operation, path) in enumerate(steps):
        first.setdefault((operation, path.split("/")[0]), index)
    return sorted({*first.values(), len(steps) - 1})


def tree_differences(left: Path, right: Path, ignore=("_ckptweb_backup",)) -> list[str]:
    """Paths that differ in name or bytes between two directory trees (``ignore``d names left out)."""
    comparison = filecmp.dircmp(left, right, ignore=list(ignore))
    differences = [str(left / n) for n in comparison.left_only + comparison.right_only + comparison.funny_files]
    _, mismatch, errors = filecmp.cmpfiles(left, right, comparison.common_files, shallow=False)
    differences += [str(left / n) for n in mismatch + errors]
    for name in comparison.common_dirs:
        differences += tree_differences(left / name, right / name, ignore)
    return differences
