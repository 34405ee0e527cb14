"""Every file-source and file-sink log file, truncated or with a byte flipped, gives only our errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint import CheckpointError, parse_sink_log_file, parse_source_log_file


def _log_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


SINK_FILES = _log_files(SPARK_TEST_RESOURCES / "file-sink-log-version-2.1.0") + _log_files(
    OUR_FIXTURES / "windowed_agg_file_sink" / "output" / "_spark_metadata"
)
SOURCE_FILES = _log_files(SPARK_TEST_RESOURCES / "file-source-log-version-2.1.0") + _log_files(
    OUR_FIXTURES / "file_source_dedup" / "checkpoint" / "sources" / "0"
)
CORPUS = [(parse_sink_log_file, path) for path in SINK_FILES] + [(parse_source_log_file, path) for path in SOURCE_FILES]


def _outcome(parse, data: bytes, source: str) -> str:
    try:
        parse(data, source=source)
    except CheckpointError as exc:
        assert str(exc).startswith(f"{source}: "), str(exc)
        return type(exc).__name__
    return "ok"


def test_the_corpus_holds_compaction_files_of_both_kinds():
    assert any(p.name.endswith(".compact") for p in SINK_FILES)
    assert any(p.name.endswith(".compact") for p in SOURCE_FILES)


@pytest.mark.parametrize(("parse", "path"), CORPUS, ids=lambda v: v.parent.name + "/" + v.name if isinstance(v, Path) else v.__name__)
def test_every_truncation_and_byte_flip_parses_or_raises_a_checkpoint_error(parse, path):
    data = path.read_bytes()
    source = f"{path.parent.name}/{path.name}"
    assert _outcome(parse, data, source) == "ok"
    assert _outcome(parse, b"", source) == "IncompleteLogFileError"
    for length in range(1, len(data)):
        _outcome(parse, data[:length], source)
    for position in range(len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 0x80
        _outcome(parse, bytes(flipped), source)
