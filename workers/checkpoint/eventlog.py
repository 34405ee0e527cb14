"""Spark event logs: find them in a directory, decode them, and tail their streaming-query events.

Layout of ``spark.eventLog.dir`` (EventLogFileWriters.scala; appIds contain no dots)::

    <appId>[_<attempt>][.<codec>][.inprogress]       SingleEventLogFileWriter (3.x default)
    eventlog_v2_<appId>[_<attempt>]/                  RollingEventLogFilesWriter (4.x default)
        events_<n>_<appId>[_<attempt>][.<codec>]      n = 1, 2, ...; rolled at maxFileSize
        events_<n>_<appId>[...].compact               history-server compaction of files 1..n
        appstatus_<appId>[_<attempt>][.inprogress]    zero bytes; loses .inprogress at the end

``<codec>`` is the codec's short name: ``zstd`` (4.x default), ``lz4``, ``lzf``, ``snappy``.
The content is one JSON event per line (JsonProtocol), compressed as a whole:

* zstd: a sequence of independent zstd frames; Spark closes a frame on every flush, and it
  flushes after each streaming-query event, so a frame ends at the end of a line.
* lz4: lz4-java's LZ4Block stream (the same framing as HDFS state files; see lz4block.py).
* lzf, snappy: not supported (UnsupportedCodecError).

Tailing keeps an ``EventLogPosition`` per log. A file is complete when a later rolling file
exists or the log is no longer in progress; complete files are never read again. Within the
file still being written, the position is a byte offset where decoding can restart (after the
last complete line of a plain file; after the last complete frame of a zstd file) plus the
number of lines already read after it. A partly written last line, or a partly written last
zstd frame or LZ4 block of an in-progress file, is left for the next call; in a complete file
it is a TruncatedFileError. Only streaming-query lines are decoded as JSON (see progress.py);
other events are skipped unread, whatever they hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import zstandard

from .errors import CorruptFileError, TruncatedFileError, UnsupportedCodecError
from .logfile import JsonSite, parse_json_object
from .lz4block import iter_lz4_blocks
from .progress import LISTENER_EVENT_PREFIX, ListenerEvent, listener_event_from_dict

if TYPE_CHECKING:
    from .storage.checkpointstorage import CheckpointStorage

IN_PROGRESS_SUFFIX = ".inprogress"
COMPACTED_SUFFIX = ".compact"
ROLLING_DIR_PREFIX = "eventlog_v2_"
APP_STATUS_PREFIX = "appstatus_"
SUPPORTED_CODECS = frozenset({"lz4", "zstd"})

# Rolling files are 128 MiB of uncompressed events by default (spark.eventLog.rolling.maxFileSize).
MAX_EVENT_LOG_FILE_BYTES = 256 * 1024 * 1024
# A streaming-query event is a few kilobytes (hundreds with many sources); a line far longer is
# refused before it is decoded and parsed, which would take several times its size in memory.
MAX_EVENT_LINE_BYTES = 16 * 1024 * 1024
# Compressed input fed to the zstd decompressor at a time: bounds the copy of what follows a
# frame end (unused_data) and the output of one call.
ZSTD_CHUNK_BYTES = 128 * 1024

_EVENTS_FILE = re.compile(r"events_([0-9]{1,18})_[^.]+(\.[^.]+)?(\.compact)?")
_STREAMING_LINE_PREFIX = b'{"Event":"' + LISTENER_EVENT_PREFIX.encode("ascii")


@dataclass(frozen=True, slots=True)
class EventLogFile:
    """One file of an event log. ``key`` is its path without ``.inprogress`` (stable across the rename)."""

    path: str
    key: str
    index: int
    codec: str | None
    size: int


@dataclass(frozen=True, slots=True)
class EventLog:
    """One application's event log: a single file or a rolling directory (``is_rolling``).

    ``name`` is the file or directory name without ``.inprogress``; ``files`` are in index order.
    """

    name: str
    is_rolling: bool
    is_in_progress: bool
    files: tuple[EventLogFile, ...]


@dataclass(frozen=True, slots=True)
class EventLogPosition:
    """How far a log has been read.

    Files with an index up to ``completed_index`` were read to their end. ``file`` is the key of
    the file being read, ``offset`` a byte offset in it where decoding can restart and ``lines``
    the number of lines already read after that offset.
    """

    log: str
    completed_index: int = 0
    file: str | None = None
    offset: int = 0
    lines: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Return the position as a JSON-serialisable dict (to store between tails)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> EventLogPosition:
        """Rebuild a position stored with ``as_dict``."""
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class EventLogTail:
    """What one tail call found: the new events, in log order, and the position after them."""

    events: tuple[ListenerEvent, ...]
    position: EventLogPosition


def find_event_logs(storage: CheckpointStorage, dirname: str = "") -> list[EventLog]:
    """List the event logs in ``dirname`` (one LIST, plus one per rolling directory).

    Hidden files (Hadoop's ``.crc``) and directories without the rolling prefix are ignored.
    """
    logs = []
    for info in storage.list_dir(dirname):
        if info.name.startswith("."):
            continue
        path = f"{dirname}/{info.name}" if dirname else info.name
        if not info.is_dir:
            logs.append(_single_file_log(path, info.name, info.size))
        elif info.name.startswith(ROLLING_DIR_PREFIX):
            logs.append(_rolling_log(storage, path, info.name))
    return logs


def tail_event_log(storage: CheckpointStorage, log: EventLog, position: EventLogPosition | None = None) -> EventLogTail:
    """Read the streaming-query events added to ``log`` since ``position`` (None: from the start).

    Reads only files that are not complete at ``position``. Raises CorruptFileError (and
    subclasses) naming the file, and UnsupportedCodecError for lzf or snappy logs.
    """
    position = position or EventLogPosition(log.name)
    if position.log != log.name:
        raise ValueError(f"the position belongs to the log {position.log!r}, not {log.name!r}")
    events: list[ListenerEvent] = []
    for file in log.files:
        if file.index <= position.completed_index:
            continue
        position = _tail_file(storage, file, position, _is_complete(log, file), events)
    return EventLogTail(tuple(events), position)


def _is_complete(log: EventLog, file: EventLogFile) -> bool:
    """Tell whether Spark may still append to ``file``: only the last file of a running app."""
    return not log.is_in_progress or file is not log.files[-1]


# --- finding logs ---------------------------------------------------------------------------------


def codec_of(name: str) -> str | None:
    """Return the codec short name in a log file name (EventLogFileWriter.codecName), or None."""
    base = name.removesuffix(COMPACTED_SUFFIX).removesuffix(IN_PROGRESS_SUFFIX)
    parts = base.split(".")
    return parts[-1] if len(parts) > 1 else None


def _single_file_log(path: str, name: str, size: int) -> EventLog:
    key = path.removesuffix(IN_PROGRESS_SUFFIX)
    file = EventLogFile(path=path, key=key, index=1, codec=codec_of(name), size=size)
    return EventLog(name.removesuffix(IN_PROGRESS_SUFFIX), False, name.endswith(IN_PROGRESS_SUFFIX), (file,))


def _rolling_log(storage: CheckpointStorage, path: str, name: str) -> EventLog:
    """Describe a rolling directory; without an appstatus file the log counts as in progress."""
    files, is_in_progress = [], True
    for info in storage.list_dir(path):
        match = _EVENTS_FILE.fullmatch(info.name)
        if match and not info.is_dir:
            file_path = f"{path}/{info.name}"
            files.append(EventLogFile(file_path, file_path, int(match.group(1)), codec_of(info.name), info.size))
        elif info.name.startswith(APP_STATUS_PREFIX):
            is_in_progress = info.name.endswith(IN_PROGRESS_SUFFIX)
    # A compacted file n replaces files 1..n; sorting puts it after an uncompacted n.
    files.sort(key=lambda file: (file.index, file.path.endswith(COMPACTED_SUFFIX)))
    return EventLog(name, True, is_in_progress, tuple(files))


# --- reading one file -----------------------------------------------------------------------------


def _tail_file(
    storage: CheckpointStorage,
    file: EventLogFile,
    position: EventLogPosition,
    is_complete: bool,
    events: list[ListenerEvent],
) -> EventLogPosition:
    """Append the new events of ``file`` to ``events``; return the position after them."""
    if file.codec is not None and file.codec not in SUPPORTED_CODECS:
        raise UnsupportedCodecError(file.path, codec=file.codec, setting="spark.eventLog.compression.codec")
    resume = position.file == file.key
    offset, skip = (position.offset, position.lines) if resume else (0, 0)
    data = _read_from(storage, file.path, offset)
    segments = _decode(data, file, offset, may_grow=not is_complete)
    reader = _LineReader(file, offset, skip)
    for text, restart in segments:
        reader.feed(text, restart, events)
    reader.finish(is_complete, events)
    if is_complete:
        return EventLogPosition(position.log, completed_index=file.index)
    return EventLogPosition(position.log, position.completed_index, file.key, reader.offset, reader.lines)


def _read_from(storage: CheckpointStorage, path: str, offset: int) -> bytes:
    """Return the bytes of ``path`` from ``offset`` on: only what was not consumed travels."""
    return storage.read_range(path, offset, max_bytes=MAX_EVENT_LOG_FILE_BYTES)


def _decode(data: bytes, file: EventLogFile, start: int, *, may_grow: bool) -> Iterator[tuple[bytes, int | None]]:
    """Yield decoded text in pieces, each with the file offset where decoding can restart after it.

    The restart offset is None where decoding cannot restart (inside a zstd frame, or anywhere
    in an LZ4 stream). ``start`` is the file offset of ``data``.
    """
    if file.codec == "zstd":
        return _zstd_segments(data, file.path, start, may_grow=may_grow)
    if file.codec == "lz4":
        # Blocks are independent, but lz4block exposes no block offsets, so an in-progress
        # LZ4 log is decoded from its start on every call and the lines already read skipped.
        return _lz4_segments(data, file.path, may_grow=may_grow)
    return _plain_segments(data, start)


def _plain_segments(data: bytes, start: int) -> Iterator[tuple[bytes, int | None]]:
    end = data.rfind(b"\n") + 1
    if end:
        yield data[:end], start + end
    if end < len(data):
        yield data[end:], None


def _zstd_segments(data: bytes, source: str, start: int, *, may_grow: bool) -> Iterator[tuple[bytes, int | None]]:
    """Decode zstd frames one by one (not read_across_frames) to learn where each one ends."""
    view, pos = memoryview(data), 0
    while pos < len(data):
        frame_start, decompressor = pos, zstandard.ZstdDecompressor().decompressobj()
        while not decompressor.eof and pos < len(data):
            chunk = view[pos : pos + ZSTD_CHUNK_BYTES]
            try:
                text = decompressor.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise CorruptFileError(source, f"invalid zstd frame: {exc}", offset=start + frame_start) from None
            pos += len(chunk) - (len(decompressor.unused_data) if decompressor.eof else 0)
            yield text, start + pos if decompressor.eof else None
        if not decompressor.eof and not may_grow:
            raise TruncatedFileError(source, "the file ends inside a zstd frame", offset=start + frame_start)


def _lz4_segments(data: bytes, source: str, *, may_grow: bool) -> Iterator[tuple[bytes, int | None]]:
    try:
        for block in iter_lz4_blocks(data, source=source):
            yield block, None
    except TruncatedFileError:
        if not may_grow:
            raise
        # The writer is in the middle of a block: what came before it is complete.


class _LineReader:
    """Split decoded text into lines, skip those already read, and parse the streaming events.

    ``offset`` and ``lines`` track the restart point: the last restart offset reached at a
    line end, and the lines read after it.
    """

    def __init__(self, file: EventLogFile, offset: int, skip: int) -> None:
        self.file, self.offset, self.lines = file, offset, 0
        self._start, self._skip, self._pending, self._decoded = offset, skip, b"", 0

    def feed(self, text: bytes, restart: int | None, events: list[ListenerEvent]) -> None:
        lines = (self._pending + text).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._take(line, events)
            self._decoded += len(line) + 1
        if restart is not None and not self._pending:
            self.offset, self.lines = restart, 0

    def finish(self, is_complete: bool, events: list[ListenerEvent]) -> None:
        """Take an unterminated last line of a complete file; Spark ends every line with \\n, so
        one that does not parse was cut off."""
        if not (is_complete and self._pending):
            return
        try:
            self._take(self._pending, events)
        except CorruptFileError as exc:
            raise TruncatedFileError(
                exc.path, f"the last line is incomplete: {exc.reason}", offset=exc.offset
            ) from None

    def _take(self, line: bytes, events: list[ListenerEvent]) -> None:
        self.lines += 1
        if self._skip:
            self._skip -= 1
            return
        if line.startswith(_STREAMING_LINE_PREFIX):
            site = self._site()
            if len(line) > MAX_EVENT_LINE_BYTES:
                raise site.error(
                    f"an event line of {len(line)} bytes is longer than the limit of {MAX_EVENT_LINE_BYTES} bytes"
                )
            event = listener_event_from_dict(parse_json_object(_decode_line(line, site), site), site)
            if event is not None:
                events.append(event)

    def _site(self) -> JsonSite:
        """Name the current line: its byte offset in a plain file, its place in the decoded text otherwise."""
        if self.file.codec is None:
            return JsonSite(self.file.path, "event", self._start + self._decoded)
        what = f"event at byte {self._decoded} of the text decompressed from byte {self._start}"
        return JsonSite(self.file.path, what)


def _decode_line(line: bytes, site: JsonSite) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = None if site.offset is None else site.offset + exc.start
        raise site.error("not UTF-8 text", offset=offset) from None
