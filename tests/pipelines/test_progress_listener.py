"""pipelines.progress_listener sends every progress to ckptweb, and spools while ckptweb is down.

The ingest endpoint is played by a tiny http.server in a thread that checks the token and can be
stopped and restarted on the same port. The sender's tests feed it progress JSON that PySpark
recorded; the test marked `spark` runs a real query with the listener added.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from pipelines.progress_listener import (
    INGEST_PATH,
    CkptwebProgressListener,
    ProgressSender,
    ProgressSpool,
    SenderStats,
)

TOKEN = "s3cret-token"
RECORDED = [
    json.dumps(progress, separators=(",", ":"))
    for progress in json.loads((OUR_FIXTURES / "event_logs" / "plain-report.json").read_text())["progress"]
]
WAIT_SECONDS = 60


class IngestServer:
    """ckptweb's ingest endpoint as far as the listener can tell: token check, then store."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.requests = 0
        self.status = 200
        self.port = 0
        self._server: HTTPServer | None = None

    def start(self) -> None:
        self._server = HTTPServer(("127.0.0.1", self.port), self._handler())
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop answering: the port refuses connections until start() again."""
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                server.requests += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path != INGEST_PATH or self.headers["Authorization"] != f"Token {TOKEN}":
                    return self._answer(401 if self.path == INGEST_PATH else 404)
                if server.status == 200:
                    server.received.append(json.loads(body)["progress"])
                self._answer(server.status)

            def _answer(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        return Handler


@pytest.fixture
def ingest():
    server = IngestServer()
    server.start()
    yield server
    if server._server is not None:
        server._server.server_close()


def assert_closed(sender) -> None:
    """Close a sender or listener; fail if its queue is not sent or spooled within WAIT_SECONDS."""
    assert sender.close(timeout_seconds=WAIT_SECONDS), (
        f"the sender did not send or spool its queue within {WAIT_SECONDS} s"
    )


def wait_until(condition, what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def make_sender(url: str, spool_dir: Path, *, token: str = TOKEN, **options) -> ProgressSender:
    options.setdefault("first_backoff_seconds", 0.05)
    options.setdefault("max_backoff_seconds", 0.2)
    spool = ProgressSpool(spool_dir, max_files=100, max_bytes=1 << 20, stats=SenderStats())
    return ProgressSender(url, token, spool, **options)


def spooled_files(spool_dir: Path) -> list[Path]:
    return sorted(spool_dir.glob("*.json"))


# --- the sender, with real HTTP --------------------------------------------------------------------


def test_progress_reaches_the_endpoint_as_the_request_contract_says(ingest, tmp_path):
    sender = make_sender(ingest.url, tmp_path / "spool")
    for progress in RECORDED:
        sender.submit(progress)
    assert_closed(sender)
    assert ingest.received == [json.loads(progress) for progress in RECORDED]
    assert sender.stats.sent == len(RECORDED) and spooled_files(tmp_path / "spool") == []


def test_a_wrong_token_is_rejected_once_and_not_spooled(ingest, tmp_path):
    sender = make_sender(ingest.url, tmp_path / "spool", token="wrong")
    sender.submit(RECORDED[0])
    assert_closed(sender)
    assert (ingest.requests, ingest.received, sender.stats.rejected) == (1, [], 1)
    assert spooled_files(tmp_path / "spool") == []


def test_server_errors_are_retried_then_spooled_then_sent_when_answered(ingest, tmp_path):
    ingest.status = 503
    sender = make_sender(ingest.url, tmp_path / "spool", max_attempts=3)
    sender.submit(RECORDED[0])
    wait_until(lambda: sender.stats.spooled == 1, "the event is spooled")
    assert ingest.requests >= 3 and len(spooled_files(tmp_path / "spool")) == 1
    ingest.status = 200
    wait_until(lambda: ingest.received, "the spooled event is sent")
    assert_closed(sender)
    assert ingest.received == [json.loads(RECORDED[0])]
    assert spooled_files(tmp_path / "spool") == []


def test_while_ckptweb_is_down_events_are_spooled_and_later_sent_oldest_first(ingest, tmp_path):
    sender = make_sender(ingest.url, tmp_path / "spool")
    ingest.stop()
    for progress in RECORDED:
        sender.submit(progress)
    wait_until(lambda: sender.stats.spooled == len(RECORDED), "every event is spooled")
    assert len(spooled_files(tmp_path / "spool")) == len(RECORDED)
    ingest.start()
    wait_until(lambda: len(ingest.received) == len(RECORDED), "the spool is sent")
    assert_closed(sender)
    assert ingest.received == [json.loads(progress) for progress in RECORDED]
    assert spooled_files(tmp_path / "spool") == []


def test_events_spooled_by_an_earlier_run_are_sent_before_new_ones(ingest, tmp_path):
    earlier = ProgressSpool(tmp_path / "spool", max_files=10, max_bytes=1 << 20, stats=SenderStats())
    for progress in RECORDED[:2]:
        earlier.put(b'{"progress":' + progress.encode() + b"}")
    sender = make_sender(ingest.url, tmp_path / "spool")
    sender.submit(RECORDED[2])
    assert_closed(sender)
    assert ingest.received == [json.loads(progress) for progress in RECORDED[:3]]


def test_close_spools_what_an_unreachable_ckptweb_cannot_take(ingest, tmp_path):
    ingest.stop()
    sender = make_sender(ingest.url, tmp_path / "spool")
    for progress in RECORDED:
        sender.submit(progress)
    assert_closed(sender)
    assert len(spooled_files(tmp_path / "spool")) == len(RECORDED)


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path):
    release = threading.Event()

    class Stalled(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            release.wait(WAIT_SECONDS)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Stalled)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sender = make_sender(f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "spool", queue_size=2)
        sender.submit(RECORDED[0])
        wait_until(lambda: sender._queue.empty(), "the first event is being sent")
        for progress in RECORDED:
            sender.submit(progress)
        assert sender.stats.queue_dropped == len(RECORDED) - 2
        release.set()
        assert_closed(sender)
    finally:
        release.set()
        server.shutdown()
        server.server_close()


# --- the spool ----------------------------------------------------------------------------------------


def test_the_spool_keeps_the_newest_events_within_its_file_bound(tmp_path):
    stats = SenderStats()
    spool = ProgressSpool(tmp_path, max_files=3, max_bytes=1 << 20, stats=stats)
    for number in range(5):
        spool.put(b'{"n":%d}' % number)
    assert [path.read_bytes() for path in spooled_files(tmp_path)] == [b'{"n":2}', b'{"n":3}', b'{"n":4}']
    assert (stats.spooled, stats.spool_dropped) == (5, 2)


def test_the_spool_keeps_the_newest_events_within_its_byte_bound(tmp_path):
    stats = SenderStats()
    spool = ProgressSpool(tmp_path, max_files=100, max_bytes=25, stats=stats)
    for number in range(5):
        spool.put(b'{"n":%d}' % number)  # 7 bytes each
    assert [path.read_bytes() for path in spooled_files(tmp_path)] == [b'{"n":2}', b'{"n":3}', b'{"n":4}']
    assert stats.spool_dropped == 2


def test_a_spool_write_cut_short_by_a_crash_is_never_sent(tmp_path):
    (tmp_path / ".00000000000000000001-000001.json.tmp").write_bytes(b'{"progress":')
    spool = ProgressSpool(tmp_path, max_files=10, max_bytes=1 << 20, stats=SenderStats())
    assert spool.oldest() is None and list(tmp_path.iterdir()) == []


def test_a_spooled_file_deleted_by_someone_else_is_skipped(ingest, tmp_path):
    ingest.stop()
    sender = make_sender(ingest.url, tmp_path / "spool")
    for progress in RECORDED[:2]:
        sender.submit(progress)
    wait_until(lambda: sender.stats.spooled == 2, "both events are spooled")
    spooled_files(tmp_path / "spool")[0].unlink()
    # The sender may have read the file just before it went; a probe made after ckptweb is back
    # would then deliver it from memory. Start ckptweb only once the sender has noticed the loss.
    wait_until(lambda: len(sender.spool) == 1, "the sender forgets the deleted file")
    ingest.start()
    wait_until(lambda: ingest.received, "the remaining event is sent")
    assert_closed(sender)
    assert ingest.received == [json.loads(RECORDED[1])] and sender.stats.sender_errors == 0


# --- the listener in a real query ---------------------------------------------------------------------


class _Event:
    """What PySpark passes to onQueryProgress, as far as the listener looks."""

    def __init__(self, progress) -> None:
        self.progress = progress


def test_the_listener_never_raises_into_spark(tmp_path):
    listener = CkptwebProgressListener("http://127.0.0.1:9", TOKEN, spool_dir=tmp_path)
    listener.onQueryProgress(_Event(progress=None))  # no .json: the callback must swallow it
    assert listener.stats()["callback_errors"] == 1
    assert_closed(listener)


@pytest.fixture(scope="module")
def spark_session():
    from pyspark.sql import SparkSession

    from pipelines.queries import build_session

    existing = SparkSession.getActiveSession()
    session = build_session("ckptweb-listener-test", master="local[1]")
    session.conf.set("spark.sql.shuffle.partitions", "1")
    # recentProgress is what the test compares ckptweb's copy with: Spark keeps only the last 100
    # by default, and at a 300 ms trigger a loaded machine's slow waits ran past batch 100.
    session.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    yield session
    if existing is None:
        session.stop()


def _start_query(spark):
    from pipelines.queries import FIXTURE_START_MS, RateSpec, rate_events, windowed_counts

    rate = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000, num_partitions=1)
    counts = windowed_counts(rate_events(spark, rate))
    writer = counts.writeStream.queryName("listener_test").outputMode("update").format("noop")
    return writer.trigger(processingTime="300 milliseconds").start()


def _last_batch(query) -> int:
    return -1 if query.lastProgress is None else query.lastProgress["batchId"]


@pytest.mark.spark
def test_a_real_query_delivers_every_batch_once_across_a_ckptweb_outage(spark_session, ingest, tmp_path):
    from pipelines.queries import stop_between_batches

    spool_dir = tmp_path / "spool"
    listener = CkptwebProgressListener(
        ingest.url, TOKEN, spool_dir=spool_dir, first_backoff_seconds=0.1, max_backoff_seconds=0.5
    )
    spark_session.streams.addListener(listener)
    query = _start_query(spark_session)
    try:
        wait_until(lambda: len(ingest.received) >= 2, "two batches reached ckptweb", timeout=180)
        ingest.stop()
        down_at = _last_batch(query)
        # The query keeps going while ckptweb is down: three more batches complete.
        wait_until(lambda: _last_batch(query) >= down_at + 3, "batches complete during the outage", timeout=180)
        wait_until(lambda: spooled_files(spool_dir), "progress is spooled")
        ingest.start()
        wait_until(lambda: not spooled_files(spool_dir), "the spool is drained")
        stop_between_batches(query, timeout_seconds=60)
        reported = [json.loads(progress.json) for progress in query.recentProgress]
        # Spark's listener bus may still hold the last events: removing the listener now would
        # drop them, so wait for them first (a loaded machine delays the bus by seconds).
        wait_until(lambda: len(ingest.received) >= len(reported), "every batch reached ckptweb", timeout=180)
    finally:
        if query.isActive:
            stop_between_batches(query, timeout_seconds=60)
        spark_session.streams.removeListener(listener)
    assert_closed(listener)
    assert sorted(p["batchId"] for p in ingest.received) == [p["batchId"] for p in reported]
    assert sorted(ingest.received, key=lambda p: p["batchId"]) == reported
    stats = listener.stats()
    assert stats["spooled"] >= 1 and stats["sent"] == len(reported)
    assert (stats["rejected"], stats["queue_dropped"], stats["spool_dropped"]) == (0, 0, 0)
