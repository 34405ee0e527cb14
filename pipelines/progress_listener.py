"""Ship every StreamingQueryProgress of a pipeline to ckptweb, without ever slowing the query.

A pipeline adds it with one line (and may close it before exiting, to flush what is queued)::

    from pipelines.progress_listener import CkptwebProgressListener
    listener = CkptwebProgressListener("https://ckptweb.example.com", token)
    spark.streams.addListener(listener)
    ...
    listener.close(timeout_seconds=10)

``onQueryProgress`` only puts ``event.progress.json`` on a bounded in-memory queue; a daemon
thread sends it. When ckptweb cannot be reached or answers 5xx, the thread retries with bounded
exponential backoff and then writes the request to a spool directory (one JSON file per event,
written atomically, bounded in count and bytes: the oldest are dropped and counted). While
ckptweb is down new events go straight to the spool; once a probe with the oldest spooled event
succeeds, the spool is sent first, oldest first, then the queue. Nothing raises into Spark's
listener bus: failures are logged and counted (``stats()``).

Request contract (the ingest endpoint is ckptweb's; this is what it receives)::

    POST <url>/api/ingest/progress/
    Authorization: Token <token>
    Content-Type: application/json
    {"progress": <the StreamingQueryProgress.json object, unchanged>}

* Any 2xx means stored. The same progress may arrive twice (a reply lost after the server
  stored it, then resent from the spool), so the endpoint must be idempotent on
  (``progress.id``, ``progress.runId``, ``progress.batchId``) and answer 2xx to a repeat.
* 5xx, 408, 429, timeouts and connection errors mean "try again later": retried, then spooled.
* Any other 4xx (a bad token 401/403, a malformed progress 400) will not change by retrying:
  the event is dropped, counted as rejected and logged.
* ``workers.checkpoint.progress.progress_from_dict`` reads the ``progress`` object.
"""

from __future__ import annotations

import enum
import http.client
import json
import logging
import os
import queue
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql.streaming import StreamingQueryListener

logger = logging.getLogger(__name__)

INGEST_PATH = "/api/ingest/progress/"
RETRYABLE_CLIENT_STATUSES = frozenset({408, 429})
SPOOL_SUFFIX = ".json"

# Bounds; each can be changed per listener.
QUEUE_SIZE = 1000
MAX_SPOOL_FILES = 10_000
MAX_SPOOL_BYTES = 100 * 1024 * 1024
REQUEST_TIMEOUT_SECONDS = 5.0
MAX_ATTEMPTS = 3
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 60.0


@dataclass
class SenderStats:
    """Counters of what happened to the events (read them with ``CkptwebProgressListener.stats``)."""

    sent: int = 0
    spooled: int = 0
    spool_dropped: int = 0
    rejected: int = 0
    queue_dropped: int = 0
    callback_errors: int = 0
    sender_errors: int = 0


class ProgressSpool:
    """A directory of request bodies waiting for ckptweb, oldest first, bounded in count and bytes.

    Files are named ``<ns>-<seq>.json`` so that name order is arrival order, and written under
    a hidden temporary name, then renamed, so that a crash never leaves half a request to send.
    Only the sender thread uses it; it keeps the names and sizes in memory, in arrival order.
    """

    def __init__(self, directory: Path, *, max_files: int, max_bytes: int, stats: SenderStats) -> None:
        self.directory, self.max_files, self.max_bytes, self.stats = directory, max_files, max_bytes, stats
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob(".*.tmp"):
            leftover.unlink(missing_ok=True)  # a write interrupted by a crash
        # Files left by an earlier run are sent first.
        self._sizes = {path: path.stat().st_size for path in sorted(self.directory.glob(f"[0-9]*{SPOOL_SUFFIX}"))}
        self._total_bytes = sum(self._sizes.values())
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._sizes)

    def put(self, body: bytes) -> None:
        """Store one request body, dropping the oldest files beyond the bounds."""
        self._sequence += 1
        path = self.directory / f"{time.time_ns():020d}-{self._sequence:06d}{SPOOL_SUFFIX}"
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(body)
        os.replace(temporary, path)
        self._sizes[path] = len(body)
        self._total_bytes += len(body)
        self.stats.spooled += 1
        self._enforce_bounds()

    def oldest(self) -> Path | None:
        """Return the oldest spooled file, or None when the spool is empty."""
        return next(iter(self._sizes), None)

    def read(self, path: Path) -> bytes | None:
        """Return a spooled body; None, and forget the file, when it can no longer be read."""
        try:
            return path.read_bytes()
        except OSError:
            logger.warning("ckptweb progress spool: %s vanished or is unreadable; skipped", path.name)
            self.remove(path)
            return None

    def remove(self, path: Path) -> None:
        """Delete a spooled file (sent, rejected or dropped)."""
        self._total_bytes -= self._sizes.pop(path, 0)
        path.unlink(missing_ok=True)

    def _enforce_bounds(self) -> None:
        dropped = 0
        while len(self._sizes) > self.max_files or self._total_bytes > self.max_bytes:
            self.remove(self.oldest())
            dropped += 1
        if dropped:
            self.stats.spool_dropped += dropped
            logger.warning("ckptweb progress spool is full: dropped the %d oldest events", dropped)


class Outcome(enum.Enum):
    """What one POST achieved."""

    SENT = "sent"
    RETRY = "retry"
    REJECTED = "rejected"


class ProgressSender:
    """The daemon thread that POSTs queued progress to ckptweb, spooling while it is down."""

    def __init__(
        self,
        url: str,
        token: str,
        spool: ProgressSpool,
        *,
        queue_size: int = QUEUE_SIZE,
        timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
        max_attempts: int = MAX_ATTEMPTS,
        first_backoff_seconds: float = FIRST_BACKOFF_SECONDS,
        max_backoff_seconds: float = MAX_BACKOFF_SECONDS,
    ) -> None:
        self.endpoint = url.rstrip("/") + INGEST_PATH
        self.spool, self.stats = spool, spool.stats
        self._headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self._timeout, self._max_attempts = timeout_seconds, max_attempts
        self._first_backoff, self._max_backoff = first_backoff_seconds, max_backoff_seconds
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=queue_size)
        self._closing = threading.Event()
        self._backoff = 0.0  # 0 while ckptweb answers; the wait before the next probe otherwise
        self._next_probe = 0.0
        self._thread = threading.Thread(target=self._run, name="ckptweb-progress-sender", daemon=True)
        self._thread.start()

    def submit(self, progress_json: str) -> None:
        """Queue one progress for sending; never blocks (a full queue drops the event, counted)."""
        self._queue_body(b'{"progress":' + progress_json.encode("utf-8") + b"}")

    def submit_idle(self, query_id: str, run_id: str, timestamp: str) -> None:
        """Queue one QueryIdleEvent (the run is alive, with no new data); never blocks."""
        self._queue_body(
            json.dumps({"idle": {"id": query_id, "runId": run_id, "timestamp": timestamp}}).encode("utf-8")
        )

    def _queue_body(self, body: bytes) -> None:
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.stats.queue_dropped += 1

    def close(self, timeout_seconds: float) -> bool:
        """Send or spool what is queued, stop the thread; True if it finished within the timeout."""
        self._closing.set()
        try:
            self._queue.put(None, timeout=timeout_seconds)
        except queue.Full:
            return False
        self._thread.join(timeout_seconds)
        return not self._thread.is_alive()

    @property
    def is_down(self) -> bool:
        """Tell whether ckptweb failed the last attempt."""
        return self._backoff > 0

    def _run(self) -> None:
        while True:
            try:
                if not self._step():
                    return
            except Exception:  # noqa: BLE001 - the thread must outlive a full disk or a lost spool file
                self.stats.sender_errors += 1
                logger.exception("ckptweb progress sender: unexpected error")
                time.sleep(1.0)

    def _step(self) -> bool:
        """Send what the spool holds, then wait for and deliver one body; False once closed."""
        self._drain_spool()
        body = self._next_body()
        if body is not None:
            self._deliver(body)
        return not (body is None and self._closing.is_set() and self._queue.empty())

    def _next_body(self) -> bytes | None:
        """Wait for a queued body; wake up for the next probe while ckptweb is down."""
        wait = max(0.05, self._next_probe - time.monotonic()) if self.is_down else 1.0
        try:
            return self._queue.get(timeout=wait)
        except queue.Empty:
            return None

    def _deliver(self, body: bytes) -> None:
        """Send one body now, or spool it if ckptweb is down or does not take it after retries."""
        if self.is_down or len(self.spool):
            self.spool.put(body)  # keeps the order: the spool goes out first
            return
        for attempt in range(self._max_attempts):
            outcome = self._post(body)
            if outcome != Outcome.RETRY:
                self._count(outcome)
                return
            if attempt + 1 < self._max_attempts and self._closing.wait(self._retry_delay(attempt)):
                break  # closing: spool instead of waiting
        self.spool.put(body)
        self._mark_down()

    def _drain_spool(self) -> None:
        """Send spooled bodies, oldest first, while ckptweb takes them; probe at most once if down."""
        while (path := self.spool.oldest()) is not None:
            if self.is_down and time.monotonic() < self._next_probe:
                return
            body = self.spool.read(path)
            if body is None:
                continue
            outcome = self._post(body)
            if outcome == Outcome.RETRY:
                self._mark_down()
                return
            self._count(outcome)
            self.spool.remove(path)
            self._mark_up()

    def _post(self, body: bytes) -> Outcome:
        request = urllib.request.Request(self.endpoint, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
            return Outcome.SENT
        except urllib.error.HTTPError as error:
            error.close()
            if error.code >= 500 or error.code in RETRYABLE_CLIENT_STATUSES:
                return Outcome.RETRY
            logger.warning("ckptweb rejected a progress event: HTTP %d %s", error.code, error.reason)
            return Outcome.REJECTED
        except (OSError, http.client.HTTPException):
            # URLError, refused or reset connections and timeouts are OSErrors; a garbled
            # status line is an HTTPException.
            return Outcome.RETRY

    def _count(self, outcome: Outcome) -> None:
        if outcome == Outcome.SENT:
            self.stats.sent += 1
            self._mark_up()
        else:
            self.stats.rejected += 1

    def _retry_delay(self, attempt: int) -> float:
        return min(self._max_backoff, self._first_backoff * 2**attempt)

    def _mark_down(self) -> None:
        if not self.is_down:
            logger.warning("ckptweb is unreachable at %s: spooling progress events", self.endpoint)
        self._backoff = min(self._max_backoff, max(self._first_backoff, self._backoff * 2))
        self._next_probe = time.monotonic() + self._backoff

    def _mark_up(self) -> None:
        if self.is_down:
            logger.warning("ckptweb is reachable again at %s: sending the spool", self.endpoint)
        self._backoff = 0.0


class CkptwebProgressListener(StreamingQueryListener):
    """A StreamingQueryListener that sends each progress to ckptweb (see the module docstring).

    ``spool_dir`` defaults to ``$TMPDIR/ckptweb-progress-spool``; give each pipeline its own
    directory on persistent disk so that a restart resends what the last run could not.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        spool_dir: str | Path | None = None,
        max_spool_files: int = MAX_SPOOL_FILES,
        max_spool_bytes: int = MAX_SPOOL_BYTES,
        **sender_options,
    ) -> None:
        directory = Path(spool_dir) if spool_dir else Path(tempfile.gettempdir()) / "ckptweb-progress-spool"
        spool = ProgressSpool(directory, max_files=max_spool_files, max_bytes=max_spool_bytes, stats=SenderStats())
        self.sender = ProgressSender(url, token, spool, **sender_options)

    def onQueryStarted(self, event) -> None:
        """Nothing to send: the first progress names the query."""

    def onQueryProgress(self, event) -> None:
        try:
            self.sender.submit(event.progress.json)
        except Exception:  # noqa: BLE001 - an exception here would reach Spark's listener bus
            self.sender.stats.callback_errors += 1
            logger.exception("could not queue a progress event for ckptweb")

    def onQueryIdle(self, event) -> None:
        """Spark 3.5+ reports an idle trigger here instead of as a progress: tells ckptweb the run is alive."""
        try:
            self.sender.submit_idle(str(event.id), str(event.runId), event.timestamp)
        except Exception:  # noqa: BLE001 - an exception here would reach Spark's listener bus
            self.sender.stats.callback_errors += 1
            logger.exception("could not queue an idle event for ckptweb")

    def onQueryTerminated(self, event) -> None:
        """Nothing to send: ckptweb sees the end of a run in the checkpoint."""

    def stats(self) -> dict[str, int]:
        """Return the counters of SenderStats as a dict."""
        return asdict(self.sender.stats)

    def close(self, timeout_seconds: float = 10.0) -> bool:
        """Flush the queue (sent, or spooled if ckptweb is down) and stop; True if done in time."""
        return self.sender.close(timeout_seconds)
