"""UnsafeRow decoding of the keys and values PySpark 4.3.0 wrote into the fixtures' state files.

Decoded rows are checked against what the same queries wrote elsewhere: the deduplication's
input files, the windowed aggregation's and the join's file-sink output. Every other type
(decimals, arrays, maps, dates, intervals...) is checked against Spark's own state reader in
tests/spark/test_state_keys_vs_spark.py.
"""

from __future__ import annotations

import datetime
import json
import struct
from functools import cache
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.sparktypes import AtomicType, StructField, StructType
from workers.checkpoint.statefiles import StateRecord, parse_state_file
from workers.checkpoint.stateschema import parse_state_schema_file
from workers.checkpoint.unsaferow import decode_unsafe_row

UTC = datetime.UTC


@cache
def _schemas(store_dir: Path) -> tuple[StructType, StructType]:
    """The key and value schema Spark wrote for the store in ``store_dir``."""
    data = (_partition0(store_dir) / "_metadata/schema").read_bytes()
    family = parse_state_schema_file(data, source="schema").col_families[0]
    return family.key_schema, family.value_schema


def _partition0(store_dir: Path) -> Path:
    """The same store in partition 0, where Spark keeps the schema file."""
    if store_dir.name.isdigit():
        return store_dir.parent / "0"
    return store_dir.parent.parent / "0" / store_dir.name


def _records(fixture: str, store: str = "") -> list[tuple[Path, StateRecord]]:
    """Every record of every state file of a store, all partitions, in file order."""
    found = []
    pattern = f"[0-9]*/{store}/*.*" if store else "[0-9]*/*.*"
    for path in sorted((OUR_FIXTURES / fixture / "checkpoint/state/0").glob(pattern)):
        if path.suffix in (".delta", ".snapshot"):
            records = parse_state_file(path.read_bytes(), source=str(path), codec="lz4")
            found.extend((path, record) for record in records)
    return found


def _decoded_puts(fixture: str, store: str = "") -> list[tuple[dict, dict]]:
    rows = []
    for path, record in _records(fixture, store):
        key_schema, value_schema = _schemas(path.parent)
        if record.value is not None:
            rows.append(
                (
                    decode_unsafe_row(record.key, key_schema, source=str(path)),
                    decode_unsafe_row(record.value, value_schema, source=str(path)),
                )
            )
    return rows


def _utc(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _json_lines(directory: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob("*.json")) for line in path.read_text().splitlines()]


def test_dedup_keys_are_the_ids_and_event_times_of_the_input_files():
    inputs = {(row["id"], _utc(row["event_time"])) for row in _json_lines(OUR_FIXTURES / "file_source_dedup/input")}

    rows = _decoded_puts("file_source_dedup")

    assert rows, "the fixture has state rows"
    assert {(key["id"], key["event_time"]) for key, _ in rows} <= inputs
    assert all(value == {"__dummy__": None} for _, value in rows)


def test_window_keys_decode_to_the_counts_the_file_sink_emitted():
    emitted = {
        (_utc(row["window"]["start"]), _utc(row["window"]["end"]), row["key"]): row["count"]
        for row in _json_lines(OUR_FIXTURES / "windowed_agg_file_sink/output")
    }
    last_count = {}
    for key, value in _decoded_puts("windowed_agg_file_sink"):
        window = key["window"]
        assert window["end"] - window["start"] == datetime.timedelta(seconds=5)
        last_count[(window["start"], window["end"], key["key"])] = value["count"]

    in_both = set(emitted) & set(last_count)
    assert in_both, "some emitted windows are still in the retained state files"
    assert {window: last_count[window] for window in in_both} == {window: emitted[window] for window in in_both}


def test_join_value_rows_match_their_key_and_the_joined_output():
    output = _json_lines(OUR_FIXTURES / "stream_stream_join/output")
    for side in ("left", "right"):
        joined = {(row[f"{side}_id"], row[f"{side}_key"], _utc(row[f"{side}_time"])) for row in output}
        rows = _decoded_puts("stream_stream_join", f"{side}-keyWithIndexToValue")
        assert all(key["field0"] == value[f"{side}_key"] for key, value in rows)
        matched = {(v[f"{side}_id"], v[f"{side}_key"], v[f"{side}_time"]) for _, v in rows if v["matched"]}
        assert matched and matched <= joined


def test_join_counts_are_longs_keyed_by_the_join_key():
    rows = _decoded_puts("stream_stream_join", "left-keyToNumValues")

    assert rows and all(set(key) == {"field0"} and value["value"] >= 1 for key, value in rows)


def _window_row() -> tuple[bytes, StructType]:
    """A real 56-byte window key: null bits, window slot, key slot, nested window row, "kN"."""
    path, record = next(
        (p, r) for p, r in _records("windowed_agg_file_sink") if p.suffix == ".snapshot" and r.value is not None
    )
    return record.key, _schemas(path.parent)[0]


def test_every_truncation_of_a_real_key_row_raises_corrupt_file_error():
    row, schema = _window_row()

    for size in range(len(row)):
        with pytest.raises(CorruptFileError) as caught:
            decode_unsafe_row(row[:size], schema, source="state/0/0/9.snapshot", what="key row")
        assert str(caught.value).startswith("state/0/0/9.snapshot: key row")


def _with_word(row: bytes, at: int, word: int) -> bytes:
    return row[:at] + struct.pack("<Q", word) + row[at + 8 :]


def test_a_slot_pointing_past_the_row_is_reported_at_the_slot():
    row, schema = _window_row()
    damaged = _with_word(row, 16, (len(row) << 32) | 4)  # the "key" string slot

    with pytest.raises(CorruptFileError) as caught:
        decode_unsafe_row(damaged, schema, source="state/0/0/9.snapshot", offset=1000, what="key row")

    assert caught.value.offset == 1016
    assert "field 'key'" in str(caught.value) and "outside" in str(caught.value)


def test_a_slot_pointing_into_the_fixed_part_is_refused():
    row, schema = _window_row()

    with pytest.raises(CorruptFileError, match="field 'window'"):
        decode_unsafe_row(_with_word(row, 8, (8 << 32) | 24), schema, source="s")


def test_a_null_field_must_have_a_zeroed_slot():
    row, schema = _window_row()
    damaged = _with_word(row, 0, 0b10)  # "key" marked null, its slot still points at "kN"

    with pytest.raises(CorruptFileError, match="null field with a non-zero slot"):
        decode_unsafe_row(damaged, schema, source="s")


def test_a_null_field_with_a_zeroed_slot_decodes_to_none():
    row, schema = _window_row()
    damaged = _with_word(_with_word(row, 0, 0b10), 16, 0)

    assert decode_unsafe_row(damaged, schema, source="s")["key"] is None


def test_non_zero_padding_of_a_narrow_slot_is_refused():
    path, record = next((p, r) for p, r in _records("stream_stream_join", "left-keyWithIndexToValue") if r.value)
    value_schema = _schemas(path.parent)[1]
    matched_slot = 8 + 8 * value_schema.names.index("matched")
    damaged = record.value[: matched_slot + 1] + b"\x01" + record.value[matched_slot + 2 :]

    with pytest.raises(CorruptFileError, match="non-zero padding") as caught:
        decode_unsafe_row(damaged, value_schema, source="s")
    assert caught.value.offset == matched_slot


def test_a_type_this_reader_does_not_know_is_shown_as_the_hex_of_its_slot():
    row, schema = _window_row()
    unknown = StructType((schema.fields[0], StructField("key", AtomicType("geometry(4326)"))))

    decoded = decode_unsafe_row(row, unknown, source="s")

    assert decoded["key"] == row[16:24].hex()
    assert decoded["window"] == decode_unsafe_row(row, schema, source="s")["window"]


def test_a_schema_with_more_fields_than_the_row_holds_is_refused():
    row, schema = _window_row()
    wider = StructType(schema.fields + tuple(StructField(f"x{i}", AtomicType("long")) for i in range(8)))

    with pytest.raises(CorruptFileError, match="56 bytes cannot hold 10 fields"):
        decode_unsafe_row(row, wider, source="s")
