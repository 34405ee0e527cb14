"""Property-based fuzzing of every pure parser and decoder of the checkpoint library.

For each parser, two shapes of input: random bytes, and a real Spark-written file (tests/fuzz_seeds.py)
damaged by a few mutations (bit flips, inserted and deleted bytes, truncation, splices of
another real file, and 32-bit lengths overwritten with negative or huge values).
Property: the parser returns normally or raises a CheckpointError whose message starts with
the source name; any other exception is a crash and fails the test with Hypothesis's minimal
input. Cases per test: CKPTWEB_FUZZ_EXAMPLES (default 1,000), derandomized so CI is stable; the
fuzzing runs once, in the PostgreSQL leg with the rest of the library (docs/testing.md). The deep
run, `make fuzz`, draws 20,000 new cases per test (CKPTWEB_FUZZ_RANDOM=1): each run tries inputs
no earlier run did, which the same derandomized 5,000 of every CI run (the default until
2026-11-28, 9 minutes of a suite over its budget) never could.

Bounded time and memory per file is checked in test_bad_input_corpus.py (forked children under
RLIMIT_AS and an alarm); here every call runs in-process for speed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import fuzz_seeds
from workers.checkpoint.commits import COMMIT_LOG_MAX_VERSION, parse_commit
from workers.checkpoint.compactible import parse_sink_log_file, parse_source_log_file
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.eventlog import EventLog, EventLogFile, tail_event_log
from workers.checkpoint.logfile import parse_log_file
from workers.checkpoint.lz4block import decompress_lz4_block_stream
from workers.checkpoint.metadata import parse_stream_metadata
from workers.checkpoint.offsets import parse_offset_seq
from workers.checkpoint.progress import parse_streaming_query_progress
from workers.checkpoint.rocksdbchangelog import parse_changelog_content
from workers.checkpoint.rocksdbzip import parse_rocksdb_checkpoint_metadata, parse_rocksdb_zip
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import iter_state_records
from workers.checkpoint.staterows import apply_delta, count_snapshot
from workers.checkpoint.stateschema import parse_operator_state_metadata, parse_state_schema_file
from workers.checkpoint.unsaferow import decode_unsafe_row

FUZZ_EXAMPLES = int(os.environ.get("CKPTWEB_FUZZ_EXAMPLES", "1000"))
FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("CKPTWEB_FUZZ_RANDOM") != "1",
    database=None,
    # A random run's failure prints the blob that replays it (@reproduce_failure).
    print_blob=True,
    # Seeds are real files of up to ~120 KB; drawing positions in them is not "too slow".
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SOURCE = "fuzz/input"

# Values a damaged 32-bit length most often takes: sign bit set, all ones, just past the limits
# the readers check (lz4 block size 1 << 25, a Java int), zero.
INTERESTING_INTS = (-1, -2, -(1 << 31), (1 << 31) - 1, 0, 1, 7, 8, 1 << 25, (1 << 25) + 1, 0x7FFFFF00)
# Bytes that change a text format's structure when inserted.
STRUCTURAL_TOKENS = (
    b"\n",
    b"\r\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"\\",
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"v99\n",
    b"[" * 2000,
    b"\x00",
)


RANDOM_BYTES = st.binary(max_size=512)


# --- the parsers under test ---------------------------------------------------------------------


@dataclass(frozen=True)
class FuzzTarget:
    """One parser, called the way production calls it, and the real inputs it is fed."""

    name: str
    parse: Callable[[bytes], object]
    seeds: Callable[[], tuple[bytes, ...]]
    random_bytes: st.SearchStrategy[bytes] = RANDOM_BYTES


def _delta_records(raw: bytes) -> None:
    """The record framing of HDFS deltas, as the record reader and the counting walk read it."""
    list(iter_state_records(raw, source=SOURCE))
    list(iter_state_records(raw, source=SOURCE, floor_values=False))
    apply_delta(raw, SOURCE, {})


def _snapshot_records(raw: bytes) -> None:
    """Snapshots: the same framing, where a removal is an error."""
    list(iter_state_records(raw, source=SOURCE, removals_allowed=False))
    count_snapshot(raw, SOURCE, {})


def _unsafe_key_row(data: bytes) -> None:
    decode_unsafe_row(data, fuzz_seeds.unsafe_row_schemas()[0], source=SOURCE, what="key row")


def _unsafe_value_row(data: bytes) -> None:
    decode_unsafe_row(data, fuzz_seeds.unsafe_row_schemas()[1], source=SOURCE, what="value row")


class _BytesStorage:
    """Stands in for CheckpointStorage.read_range: the event-log decoder is pure apart from it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_range(self, relpath: str, start: int, *, max_bytes: int | None = None) -> bytes:
        return self.data[start:]


def _event_log(codec: str | None) -> Callable[[bytes], None]:
    """Tail one event-log file both as a finished log and as one still being written."""

    def tail(data: bytes) -> None:
        file = EventLogFile(path=SOURCE, key=SOURCE, index=1, codec=codec, size=len(data))
        for in_progress in (True, False):
            tail_event_log(_BytesStorage(data), EventLog("app", False, in_progress, (file,)))

    return tail


def _streaming_event_lines() -> st.SearchStrategy[bytes]:
    """Lines the event-log reader decodes: other lines are skipped unread, so random bytes alone
    would never reach the JSON and event readers."""
    prefix = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$'
    return st.lists(st.binary(max_size=128), max_size=4).map(lambda tails: b"\n".join(prefix + tail for tail in tails))


def _multiple_of_8_bytes() -> st.SearchStrategy[bytes]:
    """UnsafeRows are whole 8-byte words; other lengths are refused before any field is read."""
    return st.integers(0, 48).flatmap(lambda words: st.binary(min_size=8 * words, max_size=8 * words))


TARGETS = (
    FuzzTarget(
        "log_file",
        lambda d: parse_log_file(d, source=SOURCE, max_version=COMMIT_LOG_MAX_VERSION),
        lambda: fuzz_seeds.offset_logs() + fuzz_seeds.commit_logs(),
    ),
    FuzzTarget("offsets", lambda d: parse_offset_seq(d, source=SOURCE), fuzz_seeds.offset_logs),
    FuzzTarget("commits", lambda d: parse_commit(d, source=SOURCE), fuzz_seeds.commit_logs),
    FuzzTarget("stream_metadata", lambda d: parse_stream_metadata(d, source=SOURCE), fuzz_seeds.stream_metadata),
    FuzzTarget("sink_log", lambda d: parse_sink_log_file(d, source=SOURCE), fuzz_seeds.sink_logs),
    FuzzTarget("source_log", lambda d: parse_source_log_file(d, source=SOURCE), fuzz_seeds.source_logs),
    FuzzTarget("state_schema", lambda d: parse_state_schema_file(d, source=SOURCE), fuzz_seeds.state_schemas),
    FuzzTarget(
        "operator_metadata", lambda d: parse_operator_state_metadata(d, source=SOURCE), fuzz_seeds.operator_metadata
    ),
    FuzzTarget(
        "lz4_block_stream",
        lambda d: decompress_lz4_block_stream(d, source=SOURCE, max_bytes=1 << 24),
        fuzz_seeds.lz4_state_files,
    ),
    FuzzTarget(
        "zstd_state_file",
        lambda d: decompress_state_file(d, source=SOURCE, codec="zstd", max_bytes=1 << 24),
        fuzz_seeds.zstd_state_files,
    ),
    FuzzTarget("delta_records", _delta_records, lambda: fuzz_seeds.decompressed_state_files(snapshots=False)),
    FuzzTarget("snapshot_records", _snapshot_records, lambda: fuzz_seeds.decompressed_state_files(snapshots=True)),
    FuzzTarget("rocksdb_changelog", lambda d: parse_changelog_content(d, source=SOURCE), fuzz_seeds.rocksdb_changelogs),
    FuzzTarget("rocksdb_zip", lambda d: parse_rocksdb_zip(d, source=SOURCE), fuzz_seeds.rocksdb_zips),
    FuzzTarget(
        "rocksdb_metadata",
        lambda d: parse_rocksdb_checkpoint_metadata(d, source=SOURCE),
        fuzz_seeds.rocksdb_zip_metadata,
    ),
    FuzzTarget("unsafe_row_key", _unsafe_key_row, lambda: fuzz_seeds.unsafe_rows()[0], _multiple_of_8_bytes()),
    FuzzTarget("unsafe_row_value", _unsafe_value_row, lambda: fuzz_seeds.unsafe_rows()[1], _multiple_of_8_bytes()),
    FuzzTarget(
        "progress_json", lambda d: parse_streaming_query_progress(d, source=SOURCE), fuzz_seeds.progress_documents
    ),
    FuzzTarget("event_log_plain", _event_log(None), fuzz_seeds.plain_event_logs, _streaming_event_lines()),
    FuzzTarget("event_log_zstd", _event_log("zstd"), fuzz_seeds.zstd_event_logs),
)


# --- mutations of real files --------------------------------------------------------------------
# Strategies are built once: building them inside every draw costs more than most parsers.

_FLIP_MASKS = st.sampled_from((0x01, 0x20, 0x80, 0xFF))
_INSERTED = st.one_of(st.sampled_from(STRUCTURAL_TOKENS), st.binary(min_size=1, max_size=16))
_INTERESTING_WORDS = st.builds(struct.pack, st.sampled_from((">i", "<i")), st.sampled_from(INTERESTING_INTS))
_SPAN = st.integers(1, 256)
_FRACTION = st.floats(0.0, 1.0)
_IN_HEADER = st.integers(0, 63)


def _position(draw, size: int) -> int:
    """A position in [0, size]; half of the draws land in the first 64 bytes, where headers are."""
    if draw(st.booleans()):
        return min(draw(_IN_HEADER), size)
    return int(draw(_FRACTION) * size)


def _flip(draw, data: bytearray, seeds) -> None:
    if data:
        data[min(_position(draw, len(data)), len(data) - 1)] ^= draw(_FLIP_MASKS)


def _insert(draw, data: bytearray, seeds) -> None:
    at = _position(draw, len(data))
    data[at:at] = draw(_INSERTED)


def _delete(draw, data: bytearray, seeds) -> None:
    at = _position(draw, len(data))
    del data[at : at + draw(_SPAN)]


def _truncate(draw, data: bytearray, seeds) -> None:
    del data[_position(draw, len(data)) :]


def _splice(draw, data: bytearray, seeds) -> None:
    """Replace a range with a range of another real file of the same kind."""
    other = draw(st.sampled_from(seeds))
    start = _position(draw, len(other))
    piece = other[start : start + draw(_SPAN)]
    at = _position(draw, len(data))
    data[at : at + draw(_SPAN) - 1] = piece


def _overwrite_length(draw, data: bytearray, seeds) -> None:
    """Overwrite 4 bytes with a negative or huge 32-bit value, in either byte order."""
    if len(data) >= 4:
        at = _position(draw, len(data) - 4)
        data[at : at + 4] = draw(_INTERESTING_WORDS)


_MUTATIONS = (_delete, _flip, _insert, _overwrite_length, _splice, _truncate)
_MUTATION = st.sampled_from(_MUTATIONS)
_MUTATION_COUNT = st.integers(1, 6)


@st.composite
def mutated_real_file(draw, seeds: tuple[bytes, ...]) -> bytes:
    """A real file with 1 to 6 mutations applied in turn."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(_MUTATION_COUNT)):
        draw(_MUTATION)(draw, data, seeds)
    return bytes(data)


# --- the property -------------------------------------------------------------------------------


def _returns_or_raises_a_checkpoint_error(target: FuzzTarget, data: bytes) -> None:
    """Any exception other than a CheckpointError naming the source propagates: a crash.

    The outcome is recorded as a Hypothesis event: ``--hypothesis-show-statistics`` then tells
    how many inputs got past the first check (docs/reliability.md).
    """
    try:
        target.parse(data)
    except CheckpointError as exc:
        assert str(exc).startswith(f"{SOURCE}: "), f"the message does not start with the source: {exc}"
        event(type(exc).__name__)
    else:
        event("read fine")


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
@FUZZ_SETTINGS
@given(data=st.data())
def test_random_bytes_parse_or_raise_a_checkpoint_error(target, data):
    _returns_or_raises_a_checkpoint_error(target, data.draw(target.random_bytes, label="input"))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
@FUZZ_SETTINGS
@given(data=st.data())
def test_mutated_real_files_parse_or_raise_a_checkpoint_error(target, data):
    _returns_or_raises_a_checkpoint_error(target, data.draw(mutated_real_file(target.seeds()), label="input"))


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
def test_every_seed_is_a_real_file_the_parser_reads(target):
    """The mutations start from inputs that parse: otherwise the fuzzing would only test refusals."""
    seeds = target.seeds()
    assert len(seeds) >= 1
    for seed in seeds:
        target.parse(seed)
