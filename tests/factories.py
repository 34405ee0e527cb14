"""Small explicit factories: defaults filled with setdefault, deterministic values."""

import json
from datetime import UTC, datetime


def make_checkpoint(**overrides):
    from dashboards.models import Checkpoint

    overrides.setdefault("name", "orders")
    overrides.setdefault("sync_interval_seconds", 30)
    return Checkpoint.objects.create(**overrides)


def write_sink_log(log_dir, batch_ids) -> None:
    """A file sink log as Spark 3.x/4.x writes it, one "add" entry per batch (no compaction)."""
    entry = (
        b'{"path":"file:///out/part-%d","size":1,"isDir":false,"modificationTime":1,"blockReplication":1,'
        b'"blockSize":1,"action":"add"}'
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    for batch_id in batch_ids:
        (log_dir / str(batch_id)).write_bytes(b"v1\n" + entry % batch_id)


def long_stateless_history(checkpoint_dir, *, batches: int, idle_seconds: float = 3600.0) -> None:
    """Turn a copied fixture into a stateless checkpoint with ``batches`` committed batches.

    Offset and commit files carry no batch id, so the fixture's newest pair stands for every
    batch; the state directory goes (no state to retain), the Hadoop CRCs stay beside each file,
    and every file gets an mtime ``idle_seconds`` ago (a stopped query).
    """
    import shutil

    shutil.rmtree(checkpoint_dir / "state", ignore_errors=True)
    for log in ("offsets", "commits"):
        directory = checkpoint_dir / log
        newest = max(int(p.name) for p in directory.iterdir() if p.name.isdigit())
        content, crc = (directory / str(newest)).read_bytes(), (directory / f".{newest}.crc").read_bytes()
        for path in list(directory.iterdir()):
            path.unlink()
        for batch_id in range(batches):
            (directory / str(batch_id)).write_bytes(content)
            (directory / f".{batch_id}.crc").write_bytes(crc)
    make_idle(checkpoint_dir, idle_seconds=idle_seconds)


def make_idle(checkpoint_dir, *, idle_seconds: float = 3600.0) -> None:
    """Date every file of a copied checkpoint ``idle_seconds`` ago: a stopped query, to the storage clock."""
    import os
    import time

    stamp = time.time() - idle_seconds
    for path in checkpoint_dir.rglob("*"):
        os.utime(path, (stamp, stamp))


def planned_at(checkpoint_dir, batch_id: int) -> datetime:
    """When Spark planned a batch: the batchTimestampMs of its offsets file (a sync "while it runs" is then)."""
    metadata = (checkpoint_dir / "offsets" / str(batch_id)).read_text().splitlines()[1]
    return datetime.fromtimestamp(json.loads(metadata)["batchTimestampMs"] / 1000, tz=UTC)
