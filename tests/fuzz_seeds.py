"""Real Spark-written inputs for every pure parser, the seeds the fuzz tests mutate.

Each seed is what the parser receives in production: a whole log file, a compressed state
file, the decompressed content of one, one UnsafeRow, one progress document.
"""

from __future__ import annotations

import io
import json
import zipfile
from functools import cache
from pathlib import Path

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from state_corpus import state_file_cases
from workers.checkpoint.rocksdbzip import ZIP_METADATA_ENTRY
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import iter_state_records
from workers.checkpoint.stateschema import parse_state_schema_file

FIXTURE_ROOTS = (OUR_FIXTURES, SPARK_TEST_RESOURCES)
# The aggregation whose key and value schemas decode the UnsafeRow seeds.
UNSAFE_ROW_STORE = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint" / "state" / "0" / "0"
EVENT_LOGS = OUR_FIXTURES / "event_logs"


def _visible_files(pattern: str) -> list[Path]:
    """Files matching ``pattern`` under both fixture trees, without Hadoop's .crc side files."""
    found = []
    for root in FIXTURE_ROOTS:
        found += [p for p in sorted(root.glob(pattern)) if p.is_file() and not p.name.startswith(".")]
    return found


def _contents(paths: list[Path]) -> tuple[bytes, ...]:
    contents = tuple(path.read_bytes() for path in paths)
    assert contents, "no seed files found: the fixtures moved?"
    return contents


@cache
def offset_logs() -> tuple[bytes, ...]:
    return _contents(_visible_files("**/offsets/[0-9]*"))


@cache
def commit_logs() -> tuple[bytes, ...]:
    return _contents(_visible_files("**/commits/[0-9]*"))


@cache
def stream_metadata() -> tuple[bytes, ...]:
    return _contents(_visible_files("*/checkpoint/metadata") + _visible_files("*/metadata"))


@cache
def sink_logs() -> tuple[bytes, ...]:
    return _contents(_visible_files("**/_spark_metadata/[0-9]*") + _visible_files("file-sink-log-version-2.1.0/*"))


@cache
def source_logs() -> tuple[bytes, ...]:
    return _contents(
        _visible_files("**/checkpoint/sources/*/[0-9]*") + _visible_files("file-source-log-version-2.1.0/*")
    )


@cache
def state_schemas() -> tuple[bytes, ...]:
    return _contents(
        _visible_files("**/state/*/*/_metadata/schema") + _visible_files("**/state/*/*/*/_metadata/schema")
    )


@cache
def operator_metadata() -> tuple[bytes, ...]:
    return _contents(_visible_files("**/state/*/_metadata/metadata"))


def _state_files(codec: str) -> list[Path]:
    return [case.path for case in state_file_cases() if case.codec == codec]


@cache
def lz4_state_files() -> tuple[bytes, ...]:
    return _contents(_state_files("lz4"))


@cache
def zstd_state_files() -> tuple[bytes, ...]:
    return _contents(_state_files("zstd"))


@cache
def decompressed_state_files(*, snapshots: bool) -> tuple[bytes, ...]:
    """The record framing itself: decompressed deltas (or snapshots) without row checksums."""
    cases = [case for case in state_file_cases() if not case.row_checksum and case.is_snapshot == snapshots]
    return tuple(decompress_state_file(c.path.read_bytes(), source=c.source, codec=c.codec) for c in cases)


@cache
def rocksdb_changelogs() -> tuple[bytes, ...]:
    """Decompressed changelogs of the RocksDB fixture (its codec is lz4)."""
    paths = sorted(OUR_FIXTURES.glob("rocksdb_*/checkpoint/state/**/*.changelog"))
    return tuple(decompress_state_file(p.read_bytes(), source=p.name, codec="lz4") for p in paths)


@cache
def rocksdb_zips() -> tuple[bytes, ...]:
    return _contents(sorted(OUR_FIXTURES.glob("rocksdb_*/checkpoint/state/**/*.zip")))


@cache
def rocksdb_zip_metadata() -> tuple[bytes, ...]:
    """The ``metadata`` entry of each zip (RocksDBCheckpointMetadata), without the zip around it."""

    def entry(data: bytes) -> bytes:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.read(ZIP_METADATA_ENTRY)

    return tuple(entry(data) for data in rocksdb_zips())


@cache
def unsafe_row_schemas():
    """(key schema, value schema) of the windowed aggregation's store."""
    family = parse_state_schema_file(
        (UNSAFE_ROW_STORE / "_metadata" / "schema").read_bytes(), source="schema"
    ).col_families[0]
    return family.key_schema, family.value_schema


@cache
def unsafe_rows() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """(key rows, value rows) of every put in the aggregation store's files."""
    keys, values = [], []
    for path in sorted(UNSAFE_ROW_STORE.glob("*.delta")) + sorted(UNSAFE_ROW_STORE.glob("*.snapshot")):
        raw = decompress_state_file(path.read_bytes(), source=path.name, codec="lz4")
        for record in iter_state_records(raw, source=path.name):
            keys.append(record.key)
            if record.value is not None:
                values.append(record.value)
    assert keys and values
    return tuple(keys), tuple(values)


@cache
def progress_documents() -> tuple[bytes, ...]:
    """Every StreamingQueryProgress PySpark recorded for the fixtures, as its JSON bytes."""
    reports = sorted(OUR_FIXTURES.glob("*/spark-report.json")) + sorted(EVENT_LOGS.glob("*-report.json"))
    documents = [json.dumps(p).encode() for path in reports for p in json.loads(path.read_text())["progress"]]
    return tuple(documents)


@cache
def plain_event_logs() -> tuple[bytes, ...]:
    return _contents(sorted((EVENT_LOGS / "plain").iterdir()))


@cache
def zstd_event_logs() -> tuple[bytes, ...]:
    return _contents(sorted(EVENT_LOGS.glob("rolling_zstd/eventlog_v2_*/events_*.zstd")))
