"""Every Spark-written log file, damaged in every way we can think of, gives only our errors.

A damaged file must either still parse (a truncation can end exactly after a complete line) or
raise a CheckpointError whose message starts with the file's relative path: never
JSONDecodeError, IndexError, UnicodeDecodeError, KeyError or ValueError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.commits import parse_commit
from workers.checkpoint.compactible import parse_sink_log_file, parse_source_log_file
from workers.checkpoint.errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    TruncatedFileError,
    UnsupportedVersionError,
)
from workers.checkpoint.logdir import find_stream_metadata, read_commit, read_offset_seq
from workers.checkpoint.metadata import parse_stream_metadata
from workers.checkpoint.offsets import parse_offset_seq
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

PARSERS = {"offsets": parse_offset_seq, "commits": parse_commit, "metadata": parse_stream_metadata}


def _parses_or_raises_our_error(parse, data: bytes, source: str) -> str:
    """Return "ok" or the name of the CheckpointError raised; let any other exception fail the test."""
    try:
        parse(data, source=source)
    except CheckpointError as exc:
        assert str(exc).startswith(f"{source}: "), str(exc)
        return type(exc).__name__
    return "ok"


def test_corpus_lists_every_metadata_log_file_among_the_fixtures(spark_resources, fixture_corpus):
    files = [path.relative_to(spark_resources).as_posix() for path in spark_resources.rglob("*") if path.is_file()]
    for kind in ("offsets", "commits"):
        on_disk = {name for name in files if f"/{kind}/" in name and not name.rsplit("/", 1)[1].startswith(".")}
        extra = {"offset-log-version-2.1.0/0"} if kind == "offsets" else set()
        assert on_disk | extra == set(fixture_corpus[kind])
    metadata = {name for name in files if name.endswith("/metadata") and "/state/" not in name}
    assert metadata | {"query-metadata-logs-version-2.1.0.txt"} == set(fixture_corpus["metadata"])


def test_every_truncation_parses_or_raises_a_checkpoint_error(spark_resources, corpus_file):
    kind, relpath = corpus_file
    data = (spark_resources / relpath).read_bytes()
    outcomes = [_parses_or_raises_our_error(PARSERS[kind], data[:length], kind) for length in range(len(data))]
    # Cutting everything off is always an error; the untouched file always parses.
    assert outcomes[0] == ("CorruptFileError" if kind == "metadata" else "IncompleteLogFileError")
    assert _parses_or_raises_our_error(PARSERS[kind], data, kind) == "ok"


@pytest.mark.parametrize("mask", [0x01, 0x20, 0x80, 0xFF], ids=lambda mask: f"xor{mask:#04x}")
def test_every_single_byte_flip_parses_or_raises_a_checkpoint_error(spark_resources, corpus_file, mask):
    kind, relpath = corpus_file
    data = bytearray((spark_resources / relpath).read_bytes())
    for position in range(len(data)):
        flipped = data.copy()
        flipped[position] ^= mask
        _parses_or_raises_our_error(PARSERS[kind], bytes(flipped), kind)


# --- the same damage, read through storage so messages carry the relative path -------------


def _damaged_copy(source: Path, root: Path, kind: str, damage) -> tuple[CheckpointStorage, int]:
    """Write a damaged copy of a fixture log file to ``<root>/<kind>/<batch id>``."""
    batch_id = int(source.name)
    target = root / kind / str(batch_id)
    target.parent.mkdir(parents=True)
    target.write_bytes(damage(source.read_bytes()))
    return CheckpointStorage(str(root)), batch_id


def _read(kind: str, storage: CheckpointStorage, batch_id: int) -> None:
    (read_offset_seq if kind == "offsets" else read_commit)(storage, batch_id)


def _replace_line(data: bytes, index: int, line: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[index] = line
    return b"\n".join(lines)


@pytest.mark.parametrize(
    ("damage", "error_class", "message"),
    [
        (lambda data: b"", IncompleteLogFileError, "Incomplete log file"),
        (lambda data: b"w" + data[1:], CorruptFileError, "Log file was malformed"),  # 'v' xor 0x01
        (lambda data: data[:1] + b"0" + data[2:], CorruptFileError, "Log file was malformed"),  # '1' xor 0x01
        (lambda data: _replace_line(data, 0, b"v99"), UnsupportedVersionError, "log version v99 is newer"),
        (lambda data: data[:3] + b"\xff" + data[3:], CorruptFileError, "not UTF-8 text (at byte 3)"),
        (lambda data: _replace_line(data, 1, b'{"batchWatermarkMs":0,'), CorruptFileError, "line 2 ("),
    ],
    ids=["empty", "header-v-flipped", "header-digit-flipped", "version-v99", "invalid-utf8", "invalid-json-line-2"],
)
def test_damaged_log_file_raises_a_checkpoint_error_naming_its_relative_path(
    spark_resources, tmp_path, log_corpus_file, damage, error_class, message
):
    kind, relpath = log_corpus_file
    storage, batch_id = _damaged_copy(spark_resources / relpath, tmp_path, kind, damage)
    with pytest.raises(error_class) as raised:
        _read(kind, storage, batch_id)
    assert str(raised.value).startswith(f"{kind}/{batch_id}: ")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"", "metadata: the metadata file is empty"),
        (lambda data: data[:-2], "metadata: metadata: invalid JSON"),
        (lambda data: b"\xfe" + data, "metadata: not UTF-8 text (at byte 0)"),
        (lambda data: data.replace(b'"id"', b'"ID"'), "metadata: metadata: expected a non-empty string field 'id'"),
    ],
    ids=["empty", "truncated", "invalid-utf8", "no-id"],
)
def test_damaged_metadata_file_raises_a_corrupt_file_error_naming_it(
    spark_resources, tmp_path, metadata_file, damage, message
):
    (tmp_path / "metadata").write_bytes(damage((spark_resources / metadata_file).read_bytes()))
    with pytest.raises(CorruptFileError) as raised:
        find_stream_metadata(CheckpointStorage(str(tmp_path)))
    assert str(raised.value).startswith(message)


# --- exact messages for each kind of damage ---------------------------------------------


@pytest.mark.parametrize(
    ("parse", "data", "error_class", "message"),
    [
        (
            parse_offset_seq,
            b"v1",
            TruncatedFileError,
            "offsets/9: the file ends before the metadata line (line 2) (at byte 2)",
        ),
        (
            parse_offset_seq,
            b"v3\n{}",
            UnsupportedVersionError,
            "offsets/9: log version v3 is newer than the supported v2",
        ),
        (
            parse_offset_seq,
            b"v1\n{\n0",
            CorruptFileError,
            "offsets/9: line 2 (metadata): invalid JSON: Expecting property name enclosed in double quotes (at byte 4)",
        ),
        (
            parse_offset_seq,
            b'v1\n  {"batchWatermarkMs":1.5}',
            CorruptFileError,
            "offsets/9: line 2 (metadata): 'batchWatermarkMs' must be a long integer, found 1.5 (at byte 5)",
        ),
        (
            parse_offset_seq,
            b'v1\n{"batchTimestampMs":9223372036854775808}',
            CorruptFileError,
            "offsets/9: line 2 (metadata): 'batchTimestampMs' must be a long integer, "
            "found 9223372036854775808 (at byte 3)",
        ),
        (
            parse_offset_seq,
            b'v1\n{"conf":[]}',
            CorruptFileError,
            "offsets/9: line 2 (metadata): 'conf' must be a JSON object, found [] (at byte 3)",
        ),
        (
            parse_offset_seq,
            b'v1\n{"conf":{"spark.sql.shuffle.partitions":5}}',
            CorruptFileError,
            "offsets/9: line 2 (metadata): conf value of 'spark.sql.shuffle.partitions' must be a string (at byte 3)",
        ),
        (
            parse_offset_seq,
            b"v2\n\n0:1",
            CorruptFileError,
            "offsets/9: line 2: an offset log v2 file requires metadata (at byte 3)",
        ),
        (
            parse_offset_seq,
            b"v2\n{}\n0:1\n17",
            CorruptFileError,
            "offsets/9: line 4: expected 'sourceId:offset', found '17' (at byte 10)",
        ),
        (
            parse_offset_seq,
            b'v2\n{"sourceMetadataInfo":{"0":"rate"}}',
            CorruptFileError,
            "offsets/9: line 2 (metadata): sourceMetadataInfo entry '0' must be a JSON object, "
            "found 'rate' (at byte 3)",
        ),
        (parse_commit, b"", IncompleteLogFileError, "commits/7: Incomplete log file: the file is empty"),
        (parse_commit, b"v4\n{}", UnsupportedVersionError, "commits/7: log version v4 is newer than the supported v3"),
        (
            parse_commit,
            b"{}",
            CorruptFileError,
            "commits/7: Log file was malformed: failed to read correct log version from '{}' (at byte 0)",
        ),
        (
            parse_commit,
            b'v1\n{"nextBatchWatermarkMs":',
            CorruptFileError,
            "commits/7: line 2 (commit metadata): invalid JSON: Expecting value (at byte 27)",
        ),
        (
            parse_commit,
            b"v1\n\n",
            CorruptFileError,
            "commits/7: line 2 (commit metadata): invalid JSON: Expecting value (at byte 3)",
        ),
        (
            parse_commit,
            b'v1\n{"nextBatchWatermarkMs":"0"}',
            CorruptFileError,
            "commits/7: line 2 (commit metadata): 'nextBatchWatermarkMs' must be a long integer, found '0' (at byte 3)",
        ),
        (
            parse_commit,
            b'v2\n{"stateUniqueIds":{"0":["a"]}}',
            CorruptFileError,
            "commits/7: line 2 (commit metadata): stateUniqueIds of operator '0' is not a list of id lists (at byte 3)",
        ),
        (
            parse_commit,
            b'v2\n{"stateUniqueIds":{"op":[["a"]]}}',
            CorruptFileError,
            "commits/7: line 2 (commit metadata): "
            "stateUniqueIds of operator 'op' is not a list of id lists (at byte 3)",
        ),
        (
            parse_commit,
            b'v3\n{"sinkMetadataMap":{"s":1}}',
            CorruptFileError,
            "commits/7: line 2 (commit metadata): sinkMetadataMap entry 's' must be a JSON object, found 1 (at byte 3)",
        ),
    ],
)
def test_each_kind_of_damage_gives_its_exact_message(parse, data, error_class, message):
    source = message.partition(": ")[0]
    with pytest.raises(error_class) as raised:
        parse(data, source=source)
    assert str(raised.value) == message


# --- file-source and file-sink logs (CompactibleFileStreamLog) ----------------------------


def _log_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


SINK_FILES = _log_files(SPARK_TEST_RESOURCES / "file-sink-log-version-2.1.0") + _log_files(
    OUR_FIXTURES / "windowed_agg_file_sink" / "output" / "_spark_metadata"
)
SOURCE_FILES = _log_files(SPARK_TEST_RESOURCES / "file-source-log-version-2.1.0") + _log_files(
    OUR_FIXTURES / "file_source_dedup" / "checkpoint" / "sources" / "0"
)
CORPUS = [(parse_sink_log_file, path) for path in SINK_FILES] + [(parse_source_log_file, path) for path in SOURCE_FILES]


def test_the_corpus_holds_compaction_files_of_both_kinds():
    assert any(p.name.endswith(".compact") for p in SINK_FILES)
    assert any(p.name.endswith(".compact") for p in SOURCE_FILES)


@pytest.mark.parametrize(
    ("parse", "path"), CORPUS, ids=lambda v: v.parent.name + "/" + v.name if isinstance(v, Path) else v.__name__
)
def test_every_truncation_and_byte_flip_parses_or_raises_a_checkpoint_error(parse, path):
    data = path.read_bytes()
    source = f"{path.parent.name}/{path.name}"
    assert _parses_or_raises_our_error(parse, data, source) == "ok"
    assert _parses_or_raises_our_error(parse, b"", source) == "IncompleteLogFileError"
    for length in range(1, len(data)):
        _parses_or_raises_our_error(parse, data[:length], source)
    for position in range(len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 0x80
        _parses_or_raises_our_error(parse, bytes(flipped), source)
