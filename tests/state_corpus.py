"""Every HDFS state file among the Spark-written fixtures, with the codec and row-checksum flag
its checkpoint's offset log records (shared by the state tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES

# Old Spark versions' checkpoints with HDFS state (Spark's own test resources).
SHARED_STATE_CHECKPOINTS = (
    "checkpoint-version-2.1.0",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1",
    "checkpoint-version-2.4.0-streaming-join",
    "checkpoint-version-3.2.0-deduplication-with-repartition",
)
# Our PySpark 4.3.0 fixtures whose stores are HDFS-backed, and how they were written.
OUR_STATE_CHECKPOINTS = {
    "windowed_agg_file_sink": ("lz4", False),
    "file_source_dedup": ("lz4", False),
    "stream_stream_join": ("lz4", False),
    "killed_mid_batch": ("lz4", False),
    "hdfs_zstd_row_checksum": ("zstd", True),
}

# Our PySpark 4.3.0 fixtures whose stores are RocksDB-backed (all lz4, no row checksums).
ROCKSDB_STATE_CHECKPOINTS = (
    "rocksdb_changelog_agg",
    "rocksdb_checkpoint_v2_dedup",
    "rocksdb_no_changelog_agg",
    "rocksdb_stream_join",
    "rocksdb_limit_checkpoint_v2",
)


@dataclass(frozen=True)
class StateFileCase:
    checkpoint: str  # the fixture's name
    path: Path
    source: str  # relative to the checkpoint root, e.g. "state/0/1/12.delta"
    codec: str
    row_checksum: bool

    @property
    def is_snapshot(self) -> bool:
        return self.path.suffix == ".snapshot"


def state_checkpoints() -> dict[Path, tuple[str, bool]]:
    """Checkpoint root -> (codec, row checksum) for every fixture with HDFS state."""
    roots = {SPARK_TEST_RESOURCES / name: ("lz4", False) for name in SHARED_STATE_CHECKPOINTS}
    for name, settings in OUR_STATE_CHECKPOINTS.items():
        roots[OUR_FIXTURES / name / "checkpoint"] = settings
    return roots


def state_file_cases() -> list[StateFileCase]:
    cases = []
    for root, (codec, row_checksum) in state_checkpoints().items():
        for path in sorted(root.glob("state/**/*")):
            if path.suffix in (".delta", ".snapshot") and not path.name.startswith("."):
                name = root.parent.name if root.name == "checkpoint" else root.name
                cases.append(StateFileCase(name, path, path.relative_to(root).as_posix(), codec, row_checksum))
    return cases


def case_id(case: StateFileCase) -> str:
    return f"{case.checkpoint}/{case.source}"
