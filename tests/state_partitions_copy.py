"""A checkpoint with many state partitions: a PySpark-written one whose partition directories are
copied under new partition numbers (each copy is a valid store Spark itself wrote)."""
from __future__ import annotations

import shutil
from pathlib import Path

from fixture_paths import OUR_FIXTURES

WINDOWED_AGG = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"


def widen_state(checkpoint_dir: Path, partitions: int) -> dict[int, int]:
    """Give operator 0 ``partitions`` partitions, copies of the ones Spark wrote, in turn.

    Returns partition -> the Spark-written partition it copies.
    """
    operator_dir = checkpoint_dir / "state" / "0"
    written = sorted(int(p.name) for p in operator_dir.iterdir() if p.name.isdigit())
    sources = {partition: written[partition % len(written)] for partition in range(partitions)}
    for partition, source in sources.items():
        if partition not in written:
            shutil.copytree(operator_dir / str(source), operator_dir / str(partition), copy_function=shutil.copyfile)
    return sources
