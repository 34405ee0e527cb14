"""A checkpoint on S3 that grows batch by batch as a stateful file-source query with a file sink grows.

Every file is a copy of one PySpark wrote (tests/fixtures/file_source_dedup: a file source with
dropDuplicates on HDFS state; tests/fixtures/windowed_agg_file_sink: the sink log): per batch
``offsets/N``, ``commits/N``, the source log's and the sink log's batch file (``N.compact`` every
``compact_interval``-th), and each state partition's ``<N+1>.delta``. What Spark's background
work does is placed deterministically: a snapshot every ``snapshot_every`` versions, versions
older than the newest ``retained_versions`` deleted (spark.sql.streaming.minBatchesToRetain).
With ``retained_batches`` the offsets and commits older than that many batches are purged as
Spark does, and each compaction deletes the compactible logs' files before the previous compact
that are older than ``cleanup_delay_batches`` batches (Spark's cleanupDelay, 10 minutes, over the
trigger interval); without it every log file is kept, the longest listing a history can have.

Used by tests/s3/test_periodic_calls_s3.py and bench/periodic_calls.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.checkpoint_history import read_template

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
DEDUP = FIXTURES / "file_source_dedup" / "checkpoint"
SINK_LOG = FIXTURES / "windowed_agg_file_sink" / "output" / "_spark_metadata"
SHUFFLE_PARTITIONS = b'"spark.sql.shuffle.partitions":"%d"'
WRITERS = 16  # requests in flight while writing (boto3's client is thread-safe)


class GrowingCheckpoint:
    """Writes one checkpoint's files (``<prefix>/checkpoint``, ``<prefix>/output``) on S3 as its batches run."""

    def __init__(
        self,
        client,
        bucket: str,
        prefix: str,
        *,
        partitions: int = 2,
        compact_interval: int = 3,
        snapshot_every: int = 10,
        retained_versions: int = 100,
        retained_batches: int | None = None,
        cleanup_delay_batches: int = 0,
    ) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.partitions, self.compact_interval = range(partitions), compact_interval
        self.snapshot_every, self.retained_versions = snapshot_every, retained_versions
        self.retained_batches, self.cleanup_delay_batches = retained_batches, cleanup_delay_batches
        self._logs_from = 0  # the compactible logs' oldest batch file not deleted
        template = read_template(DEDUP)
        self.offsets = _with_shuffle_partitions(template.offsets, partitions)
        self.commits, self.metadata = template.commits, template.metadata
        # A delta whose puts are all in the snapshot: replaying it on the snapshot gives the snapshot's rows.
        self.delta = (DEDUP / "state" / "0" / "0" / "16.delta").read_bytes()
        self.snapshot = (DEDUP / "state" / "0" / "0" / "16.snapshot").read_bytes()
        self.source_entry, self.source_compact = (
            (DEDUP / "sources" / "0" / n).read_bytes() for n in ("7", "5.compact")
        )
        self.sink_entry, self.sink_compact = ((SINK_LOG / n).read_bytes() for n in ("10", "11.compact"))

    def start(self, batches: int) -> int:
        """The query's first ``batches`` batches as Spark's retention left them; returns the objects written."""
        files = {"checkpoint/metadata": self.metadata, "checkpoint/state/0/_metadata/metadata": self._schema()}
        first_offsets, first_logs = self._first_retained(batches)
        for batch_id in range(min(first_offsets, first_logs), batches):
            files.update(self._log_files(batch_id, offsets=batch_id >= first_offsets, logs=batch_id >= first_logs))
        for version in range(max(1, batches + 1 - self.retained_versions), batches + 1):
            files.update(self._state_files(version))
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            list(pool.map(lambda item: self._put(*item), files.items()))
        return len(files)

    def run_batch(self, batch_id: int) -> None:
        """Batch ``batch_id`` runs: its logs and state version, then what Spark's retention deletes."""
        written = {**self._log_files(batch_id), **self._state_files(batch_id + 1)}
        oldest = batch_id + 1 - self.retained_versions
        doomed = [f"{_store(p)}/{oldest}.{suffix}" for p in self.partitions for suffix in ("delta", "snapshot")]
        if self.retained_batches is not None:
            doomed += self._purged_logs(batch_id)
        # As Spark's tasks write them: the partitions' files in parallel (a few hundred requests).
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            list(pool.map(lambda item: self._put(*item), written.items()))
            list(pool.map(self._delete, doomed))

    def _purged_logs(self, batch_id: int) -> list[str]:
        """The log files Spark deletes once ``batch_id`` committed (offsets purge, logs after a compact)."""
        purged = batch_id - self.retained_batches
        keys = [f"checkpoint/offsets/{purged}", f"checkpoint/commits/{purged}"] if purged >= 0 else []
        if self._is_compact(batch_id):
            expired = self._expired_below(batch_id)
            for old in range(self._logs_from, expired):
                keys += [f"checkpoint/sources/0/{self._log_name(old)}", f"output/_spark_metadata/{self._log_name(old)}"]
            self._logs_from = max(self._logs_from, expired)
        return keys

    def _expired_below(self, compact_batch: int) -> int:
        """Compacting at ``compact_batch`` deletes the batch files below this: those before the previous
        compact, once older than the cleanup delay (CompactibleFileStreamLog.deleteExpiredLog)."""
        return max(0, compact_batch - max(self.compact_interval, self.cleanup_delay_batches))

    def _first_retained(self, batches: int) -> tuple[int, int]:
        """After ``batches`` batches: the first batch in offsets/ and commits/, and in the compactible logs
        (as ``_purged_logs`` leaves them after the latest compaction)."""
        if self.retained_batches is None:
            return 0, 0
        compacts = [b for b in range(max(0, batches - self.compact_interval), batches) if self._is_compact(b)]
        self._logs_from = self._expired_below(compacts[-1]) if compacts else 0
        return max(0, batches - self.retained_batches), self._logs_from

    def _is_compact(self, batch_id: int) -> bool:
        return (batch_id + 1) % self.compact_interval == 0

    def _log_name(self, batch_id: int) -> str:
        return f"{batch_id}.compact" if self._is_compact(batch_id) else str(batch_id)

    def _log_files(self, batch_id: int, *, offsets: bool = True, logs: bool = True) -> dict[str, bytes]:
        compact, name = self._is_compact(batch_id), self._log_name(batch_id)
        files = {}
        if logs:
            files.update(
                {
                    f"checkpoint/sources/0/{name}": self.source_compact if compact else self.source_entry,
                    f"output/_spark_metadata/{name}": self.sink_compact if compact else self.sink_entry,
                }
            )
        if offsets:
            files.update(
                {f"checkpoint/offsets/{batch_id}": self.offsets, f"checkpoint/commits/{batch_id}": self.commits}
            )
        return files

    def _state_files(self, version: int) -> dict[str, bytes]:
        files = {}
        for partition in self.partitions:
            files[f"{_store(partition)}/{version}.delta"] = self.delta
            if version % self.snapshot_every == 0:
                files[f"{_store(partition)}/{version}.snapshot"] = self.snapshot
        return files

    def _schema(self) -> bytes:
        return (DEDUP / "state" / "0" / "_metadata" / "metadata").read_bytes()

    def _delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")

    def _put(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}", Body=body)


def _store(partition: int) -> str:
    return f"checkpoint/state/0/{partition}"


def _with_shuffle_partitions(offsets: bytes, partitions: int) -> bytes:
    """The offsets entry with ``spark.sql.shuffle.partitions`` set to the state's partitions, as Spark pins it."""
    template = SHUFFLE_PARTITIONS % 2
    if template not in offsets:
        raise ValueError(f"{DEDUP}/offsets: no {template.decode()} in the newest entry to set to {partitions}")
    return offsets.replace(template, SHUFFLE_PARTITIONS % partitions)
