"""A corpus of malformed checkpoint files, made from real Spark-written fixtures at test time.

Each ``BadFile`` is one damaged file in a checkpoint of its own, read through the library's
public ``read_*`` / ``find_*`` functions and a ``CheckpointStorage`` limited to an allowed root,
as the worker reads it. Categories (see docs/reliability.md for the counts):

  truncated       cut at every structural boundary: line ends and JSON punctuation of logs,
                  each field of every LZ4Block header, each field of the first state records,
                  zip headers, the version string of binary files
  flipped_bytes   bytes xor 0xFF at evenly spaced places in the kinds the older corpus leaves out
  wrong_magic     LZ4Block, zstd and zip magics damaged, or a file of the other codec
  bad_lengths     negative and huge lengths: LZ4 block headers, state record key and value sizes,
                  schema chunk counts and string lengths
  unknown_version version headers newer than any reader, zero, negative or not a number
  invalid_utf8    bytes no UTF-8 decoder accepts, inside the JSON lines
  invalid_json    the JSON document replaced by something json.loads or the reader refuses
  empty           every kind of file with no bytes
  enormous        a 100 MB JSON line (over storage.MAX_LOG_FILE_BYTES)
  deep_nesting    100,000 levels of '[' or '{"a":'
  symlinks        a checkpoint root or a file that is a link out of the allowed root, a loop,
                  a dangling link, a link to a directory
  unreadable      a directory where a file belongs; mode 000 files (only meaningful as non-root)

Nothing here is committed: ``write_corpus`` writes it under a pytest tmp directory.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    PathNotAllowedError,
    StorageError,
    TruncatedFileError,
    UnsupportedVersionError,
)
from workers.checkpoint.eventlog import find_event_logs, tail_event_log
from workers.checkpoint.logdir import find_stream_metadata, read_commit, read_offset_seq
from workers.checkpoint.lz4block import HEADER as LZ4_HEADER
from workers.checkpoint.lz4block import compress_lz4_block_stream
from workers.checkpoint.metadatalog import read_metadata_log
from workers.checkpoint.rocksdbstate import read_changelog, read_rocksdb_zip
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.staterows import read_state_size
from workers.checkpoint.stateschema import find_operator_state_metadata, find_store_schema
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

ENORMOUS_LINE_BYTES = 100 * 1024 * 1024
DEEP_NESTING = 100_000

_AGG = OUR_FIXTURES / "windowed_agg_file_sink"
_ZSTD = OUR_FIXTURES / "hdfs_zstd_row_checksum" / "checkpoint"
_ROCKSDB = OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint"


# --- where each kind of file lives and how the worker reads it ------------------------------


def _tail_all_event_logs(storage: CheckpointStorage) -> None:
    for log in find_event_logs(storage, "events"):
        tail_event_log(storage, log)


def _state_size(codec: str, version: int, *, row_checksum: bool = False) -> Callable[[CheckpointStorage], object]:
    def read(storage: CheckpointStorage) -> object:
        (store,) = list_state_store_dirs(storage)
        return read_state_size(storage, store, version, codec=codec, row_checksum=row_checksum)

    return read


@dataclass(frozen=True)
class FileKind:
    """A kind of checkpoint file: the real file it is made from, where it goes, how it is read."""

    name: str
    seed: Path
    relpath: str
    read: Callable[[CheckpointStorage], object]
    is_text: bool = False
    # Offset log and friends: line 2 is the JSON document; the metadata file is one document.
    json_line: int = 1


KINDS = {
    kind.name: kind
    for kind in (
        FileKind("offsets", _AGG / "checkpoint/offsets/10", "offsets/0", lambda s: read_offset_seq(s, 0), is_text=True),
        FileKind("commits", _AGG / "checkpoint/commits/10", "commits/0", lambda s: read_commit(s, 0), is_text=True),
        FileKind("metadata", _AGG / "checkpoint/metadata", "metadata", find_stream_metadata, is_text=True, json_line=0),
        FileKind(
            "sink_log",
            _AGG / "output/_spark_metadata/9",
            "_spark_metadata/0",
            lambda s: read_metadata_log(s, "_spark_metadata", kind="sink"),
            is_text=True,
        ),
        FileKind(
            "source_log",
            OUR_FIXTURES / "file_source_dedup/checkpoint/sources/0/3",
            "sources/0/0",
            lambda s: read_metadata_log(s, "sources/0", kind="source"),
            is_text=True,
        ),
        FileKind(
            "operator_metadata",
            _AGG / "checkpoint/state/0/_metadata/metadata",
            "state/0/_metadata/metadata",
            lambda s: find_operator_state_metadata(s, 0),
            is_text=True,
        ),
        FileKind(
            "state_schema",
            _AGG / "checkpoint/state/0/0/_metadata/schema",
            "state/0/0/_metadata/schema",
            lambda s: find_store_schema(s, 0),
        ),
        FileKind("lz4_delta", _AGG / "checkpoint/state/0/0/12.delta", "state/0/0/1.delta", _state_size("lz4", 1)),
        FileKind(
            "lz4_snapshot", _AGG / "checkpoint/state/0/0/12.snapshot", "state/0/0/2.snapshot", _state_size("lz4", 2)
        ),
        FileKind(
            "zstd_delta", _ZSTD / "state/0/0/12.delta", "state/0/0/1.delta", _state_size("zstd", 1, row_checksum=True)
        ),
        FileKind(
            "rocksdb_zip",
            _ROCKSDB / "state/0/0/12.zip",
            "state/0/0/1.zip",
            lambda s: read_rocksdb_zip(s, "state/0/0/1.zip"),
        ),
        FileKind(
            "rocksdb_changelog",
            _ROCKSDB / "state/0/0/12.changelog",
            "state/0/0/1.changelog",
            lambda s: read_changelog(s, "state/0/0/1.changelog", codec="lz4"),
        ),
        FileKind(
            "event_log",
            next((OUR_FIXTURES / "event_logs/plain").iterdir()),
            "events/local-1",
            _tail_all_event_logs,
            is_text=True,
            json_line=-1,
        ),
        FileKind(
            "event_log_zstd",
            next((OUR_FIXTURES / "event_logs/rolling_zstd").glob("eventlog_v2_*/events_1_*.zstd")),
            "events/local-1.zstd",
            _tail_all_event_logs,
        ),
    )
}
TEXT_KINDS = tuple(name for name, kind in KINDS.items() if kind.is_text)


# --- one corpus entry ------------------------------------------------------------------------


@dataclass(frozen=True)
class BadFile:
    """One malformed file, described before it is written (so pytest can parametrize over it).

    ``expected`` is the error class the read must raise (a subclass is fine), or None when the
    damage may leave a readable file (a cut right after a complete line). ``names`` is what the
    message must start with: the relative path, or the root URL for a refused root.
    """

    category: str
    kind: str
    name: str
    damage: Callable[[bytes], bytes] | None
    expected: type[CheckpointError] | None
    xfail_reason: str = ""
    needs_non_root: bool = False
    place: Callable[[Path, Path, FileKind], Path] | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return f"{self.category}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class WrittenBadFile:
    """A corpus entry on disk: open ``root`` under ``allowed_root`` and call ``read``."""

    bad: BadFile
    root: Path
    allowed_root: Path
    relpath: str
    read: Callable[[CheckpointStorage], object]

    def open_and_read(self) -> object:
        storage = CheckpointStorage(str(self.root), allowed_roots=[str(self.allowed_root)])
        return self.read(storage)

    @property
    def names(self) -> str:
        """What the error message must start with."""
        return str(self.root) if self.bad.name == "root-outside" else self.relpath


def write_corpus_file(bad: BadFile, base: Path) -> WrittenBadFile:
    """Write ``bad`` as ``<base>/allowed/<id>/<relpath>``; ``<base>/outside`` is outside the root."""
    kind = KINDS[bad.kind]
    allowed, outside = base / "allowed", base / "outside"
    root = allowed / bad.id.replace("/", "__")
    if bad.place is not None:
        root = bad.place(root, outside, kind)
    else:
        target = root / kind.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bad.damage(kind.seed.read_bytes()))
    return WrittenBadFile(bad, root, allowed, kind.relpath, kind.read)


# --- damage helpers ---------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _json_line_index(kind: FileKind, data: bytes) -> int:
    """The line holding the kind's JSON: for event logs, the first streaming-query event."""
    if kind.json_line >= 0:
        return kind.json_line
    return next(i for i, line in enumerate(_lines(data)) if b"StreamingQueryListener$" in line)


def _replace_json_line(kind: FileKind, new: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        lines = _lines(data)
        index = _json_line_index(kind, data)
        lines[index] = new(lines[index])
        return b"\n".join(lines)

    return damage


EVENT_LINE_PREFIX = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":'


def _event_line(payload: bytes) -> bytes:
    """A streaming-query event line (so the reader decodes it) that ends with ``payload``."""
    return EVENT_LINE_PREFIX + payload


def _as_json_line(kind: FileKind, payload: bytes) -> bytes:
    return _event_line(payload) if kind.json_line < 0 else payload


def _cut(length: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:length]


def _lz4_block_starts(data: bytes) -> Iterator[tuple[int, int]]:
    """Yield (block start, compressed length) of each LZ4Block of a stream, the end mark included."""
    pos = 0
    while pos + LZ4_HEADER.size <= len(data):
        _, _, compressed, _, _ = LZ4_HEADER.unpack_from(data, pos)
        yield pos, compressed
        pos += LZ4_HEADER.size + compressed


def _records(raw: bytes, limit: int) -> Iterator[tuple[int, int, int]]:
    """Yield (start, key size, value size) of the first ``limit`` records of decompressed state."""
    pos = 0
    for _ in range(limit):
        key_size = struct.unpack_from(">i", raw, pos)[0]
        if key_size < 0:
            return
        value_size = struct.unpack_from(">i", raw, pos + 4 + key_size)[0]
        yield pos, key_size, value_size
        pos += 8 + key_size + max(value_size, 0)


def _recompressed(codec: str, edit: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """Decompress a state file, edit its records, and compress it again with the same codec."""

    def damage(data: bytes) -> bytes:
        raw = edit(decompress_state_file(data, source="seed", codec=codec))
        return compress_lz4_block_stream(raw) if codec == "lz4" else zstandard.ZstdCompressor().compress(raw)

    return damage


def _put_int(at: int, value: int, fmt: str = ">i") -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        return data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt) :]

    return edit


def _seed(kind: str) -> bytes:
    return KINDS[kind].seed.read_bytes()


# --- the categories -------------------------------------------------------------------------


def _truncated() -> Iterator[BadFile]:
    for kind in TEXT_KINDS:
        data = _seed(kind)
        # The event log has 56 lines of 2 KB: every line end, not every comma of every event.
        punctuation = b"\n" if kind == "event_log" else b"\n{}[],:"
        boundaries = {i for i, byte in enumerate(data) if byte in punctuation}
        for at in sorted(boundaries | {b + 1 for b in boundaries}):
            if 0 < at < len(data):
                yield BadFile("truncated", kind, f"at-{at}", _cut(at), None)
    for kind in ("lz4_delta", "lz4_snapshot"):
        yield from _truncated_lz4(kind)
        yield from _truncated_records(kind, "lz4")
    yield from _truncated_records("zstd_delta", "zstd")
    zip_data = _seed("rocksdb_zip")
    for magic in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"):
        at = zip_data.find(magic)
        for cut in (c for c in (at, at + 2, at + 4, at + 30) if c < len(zip_data)):
            yield BadFile("truncated", "rocksdb_zip", f"{magic[2:].hex()}-at-{cut}", _cut(cut), CorruptFileError)
    schema = _seed("state_schema")
    for at in (1, 2, 3, 4, 6, 8, 9, 10, len(schema) // 2, len(schema) - 1):
        yield BadFile("truncated", "state_schema", f"at-{at}", _cut(at), TruncatedFileError)
    zstd = _seed("zstd_delta")
    for at in (1, 4, 5, 6, len(zstd) // 2, len(zstd) - 1):
        yield BadFile("truncated", "zstd_delta", f"frame-at-{at}", _cut(at), CorruptFileError)


def _truncated_lz4(kind: str) -> Iterator[BadFile]:
    """Cut inside each field of every block header, and in and after each payload."""
    data = _seed(kind)
    blocks = list(_lz4_block_starts(data))
    for index, (start, compressed) in enumerate(blocks):
        is_end_mark = index == len(blocks) - 1
        cuts = [start + offset for offset in (4, 8, 9, 13, 17)]
        if is_end_mark:
            cuts.append(start + 20)
        else:
            cuts += [start + LZ4_HEADER.size, start + LZ4_HEADER.size + compressed // 2]
        for cut in cuts:
            yield BadFile("truncated", kind, f"block{index}-at-{cut}", _cut(cut), TruncatedFileError)


def _truncated_records(kind: str, codec: str) -> Iterator[BadFile]:
    """Cut the decompressed content after each field of the first records, then recompress."""
    raw = _decompress_seed(kind, codec)
    for start, key_size, value_size in _records(raw, 6):
        for cut in (
            start + 2,
            start + 4,
            start + 4 + key_size,
            start + 8 + key_size,
            start + 8 + key_size + max(value_size, 0),
        ):
            yield BadFile("truncated", kind, f"record-at-{cut}", _recompressed(codec, _cut(cut)), TruncatedFileError)


def _decompress_seed(kind: str, codec: str) -> bytes:
    return decompress_state_file(_seed(kind), source="seed", codec=codec)


def _flipped_bytes() -> Iterator[BadFile]:
    """The kinds test_corrupt_inputs and test_state_corrupt_inputs do not flip byte by byte."""
    for kind in (
        "state_schema",
        "operator_metadata",
        "rocksdb_zip",
        "rocksdb_changelog",
        "event_log",
        "event_log_zstd",
    ):
        size = KINDS[kind].seed.stat().st_size
        for step in range(12):
            at = step * (size - 1) // 11

            def flip(data: bytes, at: int = at) -> bytes:
                return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]

            yield BadFile("flipped_bytes", kind, f"at-{at}", flip, None)


def _wrong_magic() -> Iterator[BadFile]:
    for kind in ("lz4_delta", "lz4_snapshot"):
        for magic in (b"LZ4BLOCK", b"\x00" * 8, b"lz4block", b"\x28\xb5\x2f\xfdLZ4B", b"PK\x03\x04LZ4B"):
            yield BadFile("wrong_magic", kind, magic.hex(), lambda d, m=magic: m + d[8:], CorruptFileError)
        for index in range(8):
            yield BadFile(
                "wrong_magic", kind, f"byte{index}", _put_int(index, _seed(kind)[index] ^ 0x20, "B"), CorruptFileError
            )
        second = list(_lz4_block_starts(_seed(kind)))[1][0]
        yield BadFile(
            "wrong_magic",
            kind,
            "second-block",
            lambda d, at=second: d[:at] + b"XXXXXXXX" + d[at + 8 :],
            CorruptFileError,
        )
    for index in range(4):
        yield BadFile(
            "wrong_magic",
            "zstd_delta",
            f"byte{index}",
            _put_int(index, _seed("zstd_delta")[index] ^ 0x20, "B"),
            CorruptFileError,
        )
        yield BadFile(
            "wrong_magic", "rocksdb_zip", f"byte{index}", _put_int(index, _seed("rocksdb_zip")[index] ^ 0x20, "B"), None
        )
        yield BadFile(
            "wrong_magic",
            "event_log_zstd",
            f"byte{index}",
            _put_int(index, _seed("event_log_zstd")[index] ^ 0x20, "B"),
            CorruptFileError,
        )
    # A file of the other codec: what a changed spark.sql.streaming.stateStore.compression.codec leaves.
    yield BadFile("wrong_magic", "zstd_delta", "lz4-content", lambda d: _seed("lz4_delta"), CorruptFileError)
    yield BadFile("wrong_magic", "lz4_delta", "zstd-content", lambda d: _seed("zstd_delta"), CorruptFileError)
    yield BadFile("wrong_magic", "rocksdb_zip", "lz4-content", lambda d: _seed("lz4_delta"), CorruptFileError)


HUGE_AND_NEGATIVE = (-1, -2, -(1 << 31), (1 << 31) - 1, 1 << 30, (1 << 25) + 1)


def _bad_lengths() -> Iterator[BadFile]:
    for kind in ("lz4_delta", "lz4_snapshot"):
        first_payload, _ = next(_lz4_block_starts(_seed(kind)))
        for field_at, field_name in ((9, "compressed"), (13, "decompressed")):
            for value in HUGE_AND_NEGATIVE:
                yield BadFile(
                    "bad_lengths",
                    kind,
                    f"lz4-{field_name}-{value}",
                    _put_int(first_payload + field_at, value, "<i"),
                    CheckpointError,
                )
    for kind, codec in (("lz4_delta", "lz4"), ("lz4_snapshot", "lz4"), ("zstd_delta", "zstd")):
        records = list(_records(_decompress_seed(kind, codec), 3))
        for index, (start, key_size, _) in enumerate(records):
            for value in HUGE_AND_NEGATIVE:
                # -1 as a key size is the end marker: the records before it are the whole file.
                yield BadFile(
                    "bad_lengths",
                    kind,
                    f"record{index}-key-{value}",
                    _recompressed(codec, _put_int(start, value)),
                    None if value == -1 else CheckpointError,
                )
                # -1 as a value size is a removal, legal in a delta.
                expected = None if value == -1 and kind != "lz4_snapshot" else CheckpointError
                yield BadFile(
                    "bad_lengths",
                    kind,
                    f"record{index}-value-{value}",
                    _recompressed(codec, _put_int(start + 4 + key_size, value)),
                    expected,
                )
    for value in (-1, -(1 << 31), (1 << 31) - 1, 1 << 20):
        yield BadFile("bad_lengths", "state_schema", f"chunk-count-{value}", _put_int(4, value), CheckpointError)
    for value in (0xFFFF, 0x8000, 0):
        yield BadFile("bad_lengths", "state_schema", f"utf-length-{value}", _put_int(8, value, ">H"), CheckpointError)


def _unknown_versions() -> Iterator[BadFile]:
    headers = (b"v99", b"v2147483648", b"v0", b"v-1", b"V1", b"v 1", b"v1.0", b"version1", b"v99999999999")
    for kind in ("offsets", "commits", "sink_log", "source_log", "operator_metadata"):
        for header in headers:
            expected = UnsupportedVersionError if header == b"v99" else CheckpointError
            yield BadFile(
                "unknown_version", kind, header.decode(), lambda d, h=header: h + d[d.index(b"\n") :], expected
            )
    for header in (b"v4", b"v99", b"v0", b"x2"):
        expected = UnsupportedVersionError if header in (b"v4", b"v99") else CheckpointError
        yield BadFile(
            "unknown_version", "state_schema", header.decode(), lambda d, h=header: d[:2] + h + d[4:], expected
        )


INVALID_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\xc0\xaf",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\x80",
    b"\xf8\x88\x80\x80\x80",
)


def _invalid_utf8() -> Iterator[BadFile]:
    for kind in TEXT_KINDS:
        for index, bad in enumerate(INVALID_UTF8):

            def inject(line: bytes, bad: bytes = bad) -> bytes:
                # Inside the last string value, after its opening quote (in an event line the
                # first one is the event's class name, which decides whether the line is read).
                at = line.rindex(b'":"') + 3 if b'":"' in line else len(line) // 2
                return line[:at] + bad + line[at:]

            yield BadFile(
                "invalid_utf8", kind, f"{index}-{bad.hex()}", _replace_json_line(KINDS[kind], inject), CorruptFileError
            )


INVALID_JSON = (
    b"{",
    b"}",
    b'{"a":}',
    b"{'a':1}",
    b'{"a":NaN}',
    b'{"a":Infinity}',
    b'{"a":1,}',
    b"[]",
    b"null",
    b'"text"',
    b"42",
    b'{"batchWatermarkMs":1e99999,"nextBatchWatermarkMs":1e99999,"id":1e99999}',
    b'{"batchWatermarkMs":' + b"9" * 200 + b"}",
    b'{"a":"\\ud800',
    b"\x00",
    b"{}}",
    b'{"a":1}{"b":2}',
    b'{"batchWatermarkMs":"',
    b'{"id":[}',
)


def _invalid_json() -> Iterator[BadFile]:
    for kind in TEXT_KINDS:
        for index, document in enumerate(INVALID_JSON):
            replace = _replace_json_line(KINDS[kind], lambda line, d=document, k=KINDS[kind]: _as_json_line(k, d))
            yield BadFile("invalid_json", kind, str(index), replace, CorruptFileError)


def _empty() -> Iterator[BadFile]:
    for kind in KINDS:
        # An empty event log holds no events yet; every other kind must say what is wrong.
        expected = None if kind.startswith("event_log") else CheckpointError
        if kind in ("offsets", "commits", "sink_log", "source_log", "operator_metadata"):
            expected = IncompleteLogFileError
        yield BadFile("empty", kind, "0-bytes", lambda d: b"", expected)


def _enormous() -> Iterator[BadFile]:
    def enormous_line(data: bytes) -> bytes:
        return b'v1\n{"batchWatermarkMs":0,"padding":"' + b"x" * ENORMOUS_LINE_BYTES + b'"}'

    for kind in ("offsets", "commits"):
        yield BadFile("enormous", kind, "100MB-line", enormous_line, CorruptFileError)


def _deep_nesting() -> Iterator[BadFile]:
    shapes = {
        "brackets": b"[" * DEEP_NESTING,
        "closed": b"[" * DEEP_NESTING + b"]" * DEEP_NESTING,
        "objects": b'{"a":' * DEEP_NESTING,
    }
    for kind in TEXT_KINDS:
        for shape, document in shapes.items():
            replace = _replace_json_line(KINDS[kind], lambda line, d=document, k=KINDS[kind]: _as_json_line(k, d))
            yield BadFile("deep_nesting", kind, shape, replace, CorruptFileError)


def _place_link(how: str) -> Callable[[Path, Path, FileKind], Path]:
    """Lay out a checkpoint whose file (or root) is a symbolic link of the given sort."""

    def place(root: Path, outside: Path, kind: FileKind) -> Path:
        outside.mkdir(parents=True, exist_ok=True)
        if how == "root-outside":
            real = outside / root.name
            (real / kind.relpath).parent.mkdir(parents=True)
            (real / kind.relpath).write_bytes(kind.seed.read_bytes())
            root.parent.mkdir(parents=True, exist_ok=True)
            root.symlink_to(real, target_is_directory=True)
            return root
        link = root / kind.relpath
        link.parent.mkdir(parents=True)
        targets = {
            "file-outside": outside / f"{root.name}.secret",
            "loop": link,
            "dangling": root / "gone",
            "directory": outside,
        }
        if how == "file-outside":
            targets[how].write_bytes(kind.seed.read_bytes())
        link.symlink_to(targets[how])
        return root

    return place


def _symlinks() -> Iterator[BadFile]:
    for kind in ("offsets", "commits", "metadata", "lz4_delta"):
        yield BadFile("symlinks", kind, "root-outside", None, PathNotAllowedError, place=_place_link("root-outside"))
        yield BadFile("symlinks", kind, "file-outside", None, PathNotAllowedError, place=_place_link("file-outside"))
        yield BadFile("symlinks", kind, "loop", None, StorageError, place=_place_link("loop"))
        # find_stream_metadata treats a missing metadata file as "none written yet".
        dangling = None if kind == "metadata" else StorageError
        yield BadFile("symlinks", kind, "dangling", None, dangling, place=_place_link("dangling"))
        # A link to a directory outside the roots: refused for where it leads, before any read.
        yield BadFile("symlinks", kind, "directory", None, PathNotAllowedError, place=_place_link("directory"))


def _place_unreadable(how: str) -> Callable[[Path, Path, FileKind], Path]:
    def place(root: Path, outside: Path, kind: FileKind) -> Path:
        target = root / kind.relpath
        target.parent.mkdir(parents=True)
        if how == "directory":
            target.mkdir()
        else:
            target.write_bytes(kind.seed.read_bytes())
            os.chmod(target, 0)
        return root

    return place


def _unreadable() -> Iterator[BadFile]:
    for kind in ("offsets", "commits", "metadata", "lz4_delta", "state_schema", "rocksdb_zip", "event_log"):
        yield BadFile(
            "unreadable", kind, "mode-000", None, StorageError, needs_non_root=True, place=_place_unreadable("mode-000")
        )
    for kind in (
        "offsets",
        "commits",
        "metadata",
        "state_schema",
        "operator_metadata",
        "rocksdb_zip",
        "rocksdb_changelog",
    ):
        yield BadFile("unreadable", kind, "a-directory", None, StorageError, place=_place_unreadable("directory"))


CATEGORIES = {
    "truncated": _truncated,
    "flipped_bytes": _flipped_bytes,
    "wrong_magic": _wrong_magic,
    "bad_lengths": _bad_lengths,
    "unknown_version": _unknown_versions,
    "invalid_utf8": _invalid_utf8,
    "invalid_json": _invalid_json,
    "empty": _empty,
    "enormous": _enormous,
    "deep_nesting": _deep_nesting,
    "symlinks": _symlinks,
    "unreadable": _unreadable,
}


def bad_input_corpus() -> list[BadFile]:
    """Every corpus entry, in category order; ids are unique."""
    corpus = [bad for make in CATEGORIES.values() for bad in make()]
    ids = [bad.id for bad in corpus]
    assert len(ids) == len(set(ids)), "two corpus entries share an id"
    return corpus


def counts_by_category(corpus: list[BadFile], *, is_root: bool) -> dict[str, int]:
    """How many entries of each category run here (mode-000 files mean nothing to root)."""
    counts: dict[str, int] = {}
    for bad in corpus:
        if not (bad.needs_non_root and is_root):
            counts[bad.category] = counts.get(bad.category, 0) + 1
    return counts
