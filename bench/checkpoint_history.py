"""Write checkpoints with long offset and commit logs, byte for byte as Spark writes them.

Every ``offsets/N`` and ``commits/N`` written here is a copy of the newest entry of a checkpoint
PySpark wrote (one of ``tests/fixtures/*/checkpoint``), under a new batch id: the version line,
the batch metadata and the source offsets are Spark's own, so the format is identical to what a
long-running query leaves. The ``metadata`` file is copied too. State partitions are copies of
the fixture's Spark-written partition directories under new partition numbers. Used by the
benchmarks and by tests (incremental sync, probes, S3, state fan-out).

Command line (a 1M-batch history takes about 2M files and 8 GB of 4 KB blocks)::

    .venv/bin/python -m bench.checkpoint_history DIR --batches 1000000 --state-partitions 200
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
TEMPLATE_CHECKPOINT = REPO_DIR / "tests" / "fixtures" / "windowed_agg_file_sink" / "checkpoint"


@dataclass(frozen=True)
class LogTemplate:
    """The bytes copied into every generated batch: Spark's newest offsets and commits entries."""

    offsets: bytes
    commits: bytes
    metadata: bytes


def read_template(checkpoint: Path = TEMPLATE_CHECKPOINT) -> LogTemplate:
    """Read the newest offsets/N and commits/N of a Spark-written checkpoint."""
    newest = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    return LogTemplate(
        offsets=(checkpoint / "offsets" / str(newest)).read_bytes(),
        commits=(checkpoint / "commits" / str(newest)).read_bytes(),
        metadata=(checkpoint / "metadata").read_bytes(),
    )


def write_batches(target: Path, batch_ids: range, template: LogTemplate, *, committed: bool = True) -> None:
    """Write offsets/N (and commits/N when ``committed``) for every N of ``batch_ids`` under ``target``."""
    for dirname in ("offsets", "commits"):
        (target / dirname).mkdir(parents=True, exist_ok=True)
    if not (target / "metadata").exists():
        (target / "metadata").write_bytes(template.metadata)
    for batch_id in batch_ids:
        (target / "offsets" / str(batch_id)).write_bytes(template.offsets)
        if committed:
            (target / "commits" / str(batch_id)).write_bytes(template.commits)


def purge_batches(target: Path, below: int) -> None:
    """Delete offsets/N and commits/N for N < ``below``, as HDFSMetadataLog.purge does."""
    for dirname in ("offsets", "commits"):
        for path in (target / dirname).iterdir():
            if path.name.isdigit() and int(path.name) < below:
                path.unlink()


def write_state_partitions(target: Path, partitions: int, source: Path = TEMPLATE_CHECKPOINT) -> dict[int, int]:
    """Give operator 0 of ``target`` ``partitions`` partitions, copies of ``source``'s in turn.

    Returns partition -> the Spark-written partition it copies. Partitions already under
    ``target`` (a copy of ``source``) are kept.
    """
    source_dir, operator_dir = source / "state" / "0", target / "state" / "0"
    sources = _copied_partitions(source_dir, partitions)
    if not (operator_dir / "_metadata").exists() and (source_dir / "_metadata").exists():
        shutil.copytree(source_dir / "_metadata", operator_dir / "_metadata", copy_function=shutil.copyfile)
    for partition, copied in sources.items():
        if not (operator_dir / str(partition)).exists():
            shutil.copytree(source_dir / str(copied), operator_dir / str(partition), copy_function=shutil.copyfile)
    return sources


def _copied_partitions(source_dir: Path, partitions: int) -> dict[int, int]:
    """Partition -> the Spark-written partition of ``source_dir`` it copies, in turn."""
    written = sorted(int(p.name) for p in source_dir.iterdir() if p.name.isdigit())
    return {partition: written[partition % len(written)] for partition in range(partitions)}


def write_state_history(
    target: Path, partitions: int, latest_version: int, *, retained: int = 100, source: Path = TEMPLATE_CHECKPOINT
) -> None:
    """State of ``partitions`` partitions at ``latest_version``, as Spark leaves it after cleanup.

    Each partition keeps the last ``retained`` versions: a snapshot at the oldest one and a delta
    for every version (Spark writes one per batch), copied from the source partition's newest
    snapshot and its deltas in turn. Delta and snapshot files carry no version inside, so copies
    under new version numbers are files Spark itself reads.
    """
    write_state_partitions(target, 0, source)  # the operator's _metadata
    source_partition = source / "state" / "0" / "0"
    snapshot, deltas = _newest_snapshot_and_deltas(source_partition)
    schema = source_partition / "_metadata"
    oldest = max(1, latest_version - retained + 1)
    for partition in range(partitions):
        directory = target / "state" / "0" / str(partition)
        directory.mkdir(parents=True, exist_ok=True)
        if schema.exists() and not (directory / "_metadata").exists():
            shutil.copytree(schema, directory / "_metadata", copy_function=shutil.copyfile)
        _write_versions(directory, snapshot, deltas, oldest=oldest, latest=latest_version)


def _newest_snapshot_and_deltas(partition: Path) -> tuple[bytes, list[bytes]]:
    """The bytes of the partition's newest snapshot, and of each of its deltas in version order."""
    snapshot = max(partition.glob("*.snapshot"), key=lambda p: int(p.name.split(".")[0])).read_bytes()
    deltas = [p.read_bytes() for p in sorted(partition.glob("*.delta"), key=lambda p: int(p.name.split(".")[0]))]
    return snapshot, deltas


def _write_versions(directory: Path, snapshot: bytes, deltas: list[bytes], *, oldest: int, latest: int) -> None:
    """A snapshot at ``oldest`` and a delta for every version up to ``latest``, the deltas in turn."""
    (directory / f"{oldest}.snapshot").write_bytes(snapshot)
    for version in range(oldest, latest + 1):
        (directory / f"{version}.delta").write_bytes(deltas[version % len(deltas)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Write a long checkpoint history copied from a PySpark-written fixture."
    )
    parser.add_argument("target", type=Path)
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--state-partitions", type=int, default=0)
    args = parser.parse_args()
    write_batches(args.target, range(args.batches), read_template())
    if args.state_partitions:
        # Batch N's state is version N + 1: the newest committed batch leaves version `batches`.
        write_state_history(args.target, args.state_partitions, args.batches)
    print(f"{args.target}: {args.batches} batches, {args.state_partitions} state partitions")


if __name__ == "__main__":
    main()
