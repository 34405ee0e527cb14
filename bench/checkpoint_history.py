"""Write checkpoints with long offset and commit logs, byte for byte as Spark writes them.

Every ``offsets/N`` and ``commits/N`` written here is a copy of the newest entry of a checkpoint
PySpark wrote (one of ``tests/fixtures/*/checkpoint``), under a new batch id: the version line,
the batch metadata and the source offsets are Spark's own, so the format is identical to what a
long-running query leaves. The ``metadata`` file is copied too. Used by ``bench/sync_calls.py``
and by ``tests/workers/test_sync_incremental.py``.
"""
from __future__ import annotations

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
