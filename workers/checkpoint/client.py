"""One view of a checkpoint's batches, from the ckptweb server when it is current, else from storage.

The server's read API (``/api/v1/``, dashboards/api/read) answers from what its workers synced,
with the newest batch it knows and a signature. This client trusts that answer only after one
cheap look at storage: the next offsets and commits names after the server's latest. If either
exists the server is behind; the client then reads the checkpoint itself with the library and
tells the server (``known_latest_batch``), which queues a catch-up sync. The same happens, minus
the telling, when the server cannot be reached, times out, fails (5xx) or answers something that
is not the API's JSON. This is Hudi RFC-03's executor-side proxy: the timeline server is a cache
of storage that the client checks and bypasses, never a source of truth of its own.

Only the standard library talks HTTP here (urllib), so workers, the CLI and PySpark drivers can
import this without Django.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from .errors import CheckpointError, StorageError
from .layout import COMMITS_DIR, OFFSETS_DIR
from .storage.checkpointstorage import CheckpointStorage
from .summary import CheckpointSummary, summarize_checkpoint

API_PATH = "/api/v1"
DEFAULT_TIMEOUT_SECONDS = 5.0
PAGE_ROWS = 1000
# A sync that lands while the client walks the batch pages changes the signature; the walk then
# starts over, at most this many times, before the client reads storage instead.
MAX_READ_ATTEMPTS = 3
SOURCE_SERVER = "server"
SOURCE_STORAGE = "storage"


class ServerUnavailableError(CheckpointError):
    """The server could not be reached, timed out, failed (5xx) or sent something that is not the API's JSON."""


class ServerRefusedError(CheckpointError):
    """The server refused the request (4xx: a wrong token, no permission); reading storage would hide that."""


@dataclass(frozen=True, slots=True)
class BatchView:
    """One batch as both sides describe it; times are epoch ms, 0 when Spark wrote none."""

    batch_id: int
    timestamp_ms: int
    watermark_ms: int
    is_committed: bool


@dataclass(frozen=True, slots=True)
class CheckpointView:
    """The batches still on storage of one checkpoint, and where this view of them came from.

    Two views are equal when they say the same about the checkpoint, whichever side they came
    from: ``source``, ``reason``, ``name`` and ``signature`` describe the answer, not the
    checkpoint, and storage knows no name or signature.
    """

    url: str
    query_id: str | None
    latest_batch_id: int | None
    latest_committed_batch_id: int | None
    batches: tuple[BatchView, ...]
    source: str = field(default=SOURCE_SERVER, compare=False)
    reason: str = field(default="", compare=False)
    name: str | None = field(default=None, compare=False)
    signature: str | None = field(default=None, compare=False)


def view_from_summary(url: str, summary: CheckpointSummary, *, reason: str) -> CheckpointView:
    """Return the view of a checkpoint that the library read from storage."""
    # The sync stores 0 for a batch whose offsets file has no metadata line; so does the view.
    batches = tuple(
        BatchView(batch.batch_id, batch.timestamp_ms or 0, batch.watermark_ms or 0, batch.is_committed)
        for batch in summary.batches
    )
    return CheckpointView(
        url=url,
        query_id=summary.query_id,
        latest_batch_id=batches[-1].batch_id if batches else None,
        latest_committed_batch_id=max((batch.batch_id for batch in batches if batch.is_committed), default=None),
        batches=batches,
        source=SOURCE_STORAGE,
        reason=reason,
    )


def read_storage_view(url: str, storage: CheckpointStorage, *, reason: str) -> CheckpointView:
    """Read the checkpoint at ``storage`` with the library (every offsets and commits file)."""
    return view_from_summary(url, summarize_checkpoint(storage), reason=reason)


def find_newer_entry(
    storage: CheckpointStorage, latest_batch_id: int | None, latest_committed_batch_id: int | None
) -> str | None:
    """Return the first log entry past what the server has ("offsets/N" or "commits/N"), or None.

    Spark writes offsets/N and commits/N only after N-1, so asking for the next name of each log
    is enough (has_file: one request on an object store, where s3fs's exists of a missing key is
    two). When storage cannot be asked, the server's view is the best there is: None.
    """
    for dirname, latest in ((OFFSETS_DIR, latest_batch_id), (COMMITS_DIR, latest_committed_batch_id)):
        relpath = f"{dirname}/{0 if latest is None else latest + 1}"
        try:
            if storage.has_file(relpath):
                return relpath
        except StorageError:
            return None
    return None


class CheckpointViewClient:
    """Read checkpoint views through a ckptweb server (``base_url``), with storage as the fallback."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        *,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.api_url = base_url.rstrip("/") + API_PATH
        self.token = token
        self.timeout = timeout
        self.storage_options = storage_options

    def read_view(self, checkpoint_url: str) -> CheckpointView:
        """Return the server's view of the checkpoint at ``checkpoint_url``, or storage's and why.

        Raises ServerRefusedError when the server refuses the token, and the library's errors
        when storage has to be read and cannot be.
        """
        storage = CheckpointStorage(checkpoint_url, storage_options=self.storage_options)
        try:
            checkpoint = self.find_checkpoint(checkpoint_url)
            if checkpoint is None:
                return read_storage_view(
                    checkpoint_url, storage, reason="the server has no checkpoint registered at this URL"
                )
            newer = find_newer_entry(storage, checkpoint["latest_batch_id"], checkpoint["latest_committed_batch_id"])
            if newer is None:
                return self.fetch_server_view(checkpoint["id"])
        except ServerUnavailableError as exc:
            return read_storage_view(checkpoint_url, storage, reason=f"the server is unavailable: {exc}")
        view = read_storage_view(
            checkpoint_url, storage, reason=f"the server is behind: {newer} is on storage but not on the server"
        )
        self.report_latest_batch(checkpoint["id"], view.latest_batch_id)
        return view

    def find_checkpoint(self, checkpoint_url: str) -> dict[str, Any] | None:
        """Return the server's description of the checkpoint registered at ``checkpoint_url``, or None."""
        found = self._get_json(f"{self.api_url}/checkpoints/?" + urllib.parse.urlencode({"url": checkpoint_url}))
        results = _field(found, "results", self.api_url)
        return _checked_checkpoint(results[0], self.api_url) if results else None

    def fetch_server_view(self, checkpoint_id: int) -> CheckpointView:
        """Read the checkpoint and every page of its batches still on storage, all of one signature."""
        for _attempt in range(MAX_READ_ATTEMPTS):
            answer = self._get_json(f"{self.api_url}/checkpoints/{checkpoint_id}/")
            checkpoint = _checked_checkpoint(_field(answer, "checkpoint", self.api_url), self.api_url)
            pages = self._fetch_batch_pages(checkpoint_id, checkpoint["earliest_stored_batch_id"])
            if all(_field(page, "signature", self.api_url) == checkpoint["signature"] for page in pages):
                return _view_from_answers(checkpoint, pages, self.api_url)
        raise ServerUnavailableError(
            self.api_url, f"the server's view changed during each of {MAX_READ_ATTEMPTS} reads"
        )

    def report_latest_batch(self, checkpoint_id: int, batch_id: int | None) -> bool:
        """Tell the server that storage has ``batch_id``, so that it queues a catch-up; True if it answered."""
        if batch_id is None:
            return False
        with contextlib.suppress(ServerUnavailableError, ServerRefusedError):
            self._get_json(f"{self.api_url}/checkpoints/{checkpoint_id}/?known_latest_batch={batch_id}")
            return True
        return False

    def _fetch_batch_pages(self, checkpoint_id: int, earliest_stored_batch_id: int | None) -> list[dict[str, Any]]:
        query = {"limit": PAGE_ROWS}
        if earliest_stored_batch_id is not None:
            # Rows of batches Spark purged stay on the server as history; the view is of what is on storage.
            query["from"] = earliest_stored_batch_id
        url: str | None = f"{self.api_url}/checkpoints/{checkpoint_id}/batches/?" + urllib.parse.urlencode(query)
        pages = []
        while url is not None:
            pages.append(self._get_json(url))
            url = _field(pages[-1], "next", url)
        return pages

    def _get_json(self, url: str) -> dict[str, Any]:
        """GET ``url`` with the token; raise ServerUnavailableError or ServerRefusedError."""
        return _json_object(url, self._get(url))

    def _get(self, url: str) -> bytes:
        """The body of the answer to a GET of ``url`` with the token."""
        request = urllib.request.Request(
            url, headers={"Authorization": f"Token {self.token}", "Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            # HTTPError is also a URLError: it must be told apart first.
            raise _http_error(url, exc) from exc
        except (OSError, http.client.HTTPException) as exc:
            # URLError (refused, unknown host), timeouts and connections dropped mid-answer.
            raise ServerUnavailableError(url, f"cannot be reached: {getattr(exc, 'reason', exc)}") from exc
        return body


def _http_error(url: str, exc: urllib.error.HTTPError) -> ServerUnavailableError | ServerRefusedError:
    """The error an HTTP error status of the server is: a failure (5xx) or a refusal."""
    if exc.code >= 500:
        return ServerUnavailableError(url, f"the server failed: {exc.code} {exc.reason}")
    return ServerRefusedError(url, f"the server refused: {exc.code} {exc.reason}")


def _json_object(url: str, body: bytes) -> dict[str, Any]:
    """The JSON object of an answer's ``body``."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise ServerUnavailableError(url, "the answer is not JSON") from None
    if not isinstance(answer, dict):
        raise ServerUnavailableError(url, "the answer is not a JSON object")
    return answer


CHECKPOINT_FIELDS = (
    "id",
    "name",
    "url",
    "query_id",
    "latest_batch_id",
    "latest_committed_batch_id",
    "earliest_stored_batch_id",
    "signature",
)


def _checked_checkpoint(checkpoint: Any, url: str) -> dict[str, Any]:
    """Return the server's description of a checkpoint once it has every field the client reads."""
    if not isinstance(checkpoint, dict):
        raise ServerUnavailableError(url, "a checkpoint in the answer is not a JSON object")
    for name in CHECKPOINT_FIELDS:
        _field(checkpoint, name, url)
    return checkpoint


def _field(answer: dict[str, Any], name: str, url: str) -> Any:
    try:
        return answer[name]
    except KeyError:
        raise ServerUnavailableError(url, f"the answer has no {name!r}: not the ckptweb read API") from None


def _view_from_answers(checkpoint: dict[str, Any], pages: list[dict[str, Any]], url: str) -> CheckpointView:
    """Return the view the server's answers describe."""
    try:
        return CheckpointView(
            url=checkpoint["url"],
            query_id=checkpoint["query_id"],
            latest_batch_id=checkpoint["latest_batch_id"],
            latest_committed_batch_id=checkpoint["latest_committed_batch_id"],
            batches=_batches_of(pages),
            source=SOURCE_SERVER,
            name=checkpoint["name"],
            signature=checkpoint["signature"],
        )
    except (KeyError, TypeError) as exc:
        raise ServerUnavailableError(url, f"the answer lacks a field of the read API: {exc}") from None


def _batches_of(pages: list[dict[str, Any]]) -> tuple[BatchView, ...]:
    """The batch rows of every page, in order (a missing field raises KeyError)."""
    return tuple(
        BatchView(row["batch_id"], row["timestamp_ms"], row["watermark_ms"], row["is_committed"])
        for page in pages
        for row in page["results"]
    )
