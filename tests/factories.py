"""Small explicit factories: defaults filled with setdefault, deterministic values."""


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
