"""A checkpoint with many state partitions: a PySpark-written one whose partition directories are
copied under new partition numbers (each copy is a valid store Spark itself wrote)."""
from __future__ import annotations

from pathlib import Path

from bench.checkpoint_history import TEMPLATE_CHECKPOINT, write_state_partitions

WINDOWED_AGG = TEMPLATE_CHECKPOINT


def widen_state(checkpoint_dir: Path, partitions: int) -> dict[int, int]:
    """Give the copy of WINDOWED_AGG at ``checkpoint_dir`` ``partitions`` partitions (partition -> its source)."""
    return write_state_partitions(checkpoint_dir, partitions, WINDOWED_AGG)
