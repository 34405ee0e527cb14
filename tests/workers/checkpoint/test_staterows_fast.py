"""The run-based readers of staterows give what replaying statefiles.iter_state_records gives.

The reference is Spark's loadMap semantics written the slow way: every record of
iter_state_records applied to a dict in file order. It is compared with apply_delta and
count_snapshot on every Spark-written state file of the fixtures, on crafted files whose runs
start, end and break where the fast paths change strategy, and on damaged copies of those.
"""

from __future__ import annotations

import struct

import pytest

from state_corpus import case_id, state_file_cases
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import KEYS_PER_UNPACK, find_record_run, iter_state_records
from workers.checkpoint.staterows import (
    MIN_BULK_RECORDS,
    REMOVED,
    SCAN_BYTES,
    StateSize,
    apply_delta,
    count_snapshot,
    live_size,
)

CASES = state_file_cases()


def _replayed(raw: bytes, changes: dict[bytes, int], *, row_checksum: bool, keep_removals: bool) -> dict[bytes, int]:
    """The slow reference: each record of iter_state_records applied in order."""
    for record in iter_state_records(raw, source="f", row_checksum=row_checksum):
        if not record.is_removal:
            changes[record.key] = len(record.value)
        elif keep_removals:
            changes[record.key] = REMOVED
        else:
            changes.pop(record.key, None)
    return changes


def _snapshot_size(raw: bytes, changes: dict[bytes, int], *, row_checksum: bool) -> StateSize:
    records = [
        r
        for r in iter_state_records(raw, source="f", row_checksum=row_checksum, removals_allowed=False)
        if r.key not in changes
    ]
    return StateSize(len(records), sum(len(r.key) for r in records), sum(len(r.value) for r in records))


def _fast(raw: bytes, changes: dict[bytes, int], *, row_checksum: bool, keep_removals: bool) -> dict[bytes, int]:
    apply_delta(raw, "f", changes, row_checksum=row_checksum, keep_removals=keep_removals)
    return changes


def _outcome(read, *args, **kwargs):
    """The result, or the error's type and message (which holds the offset)."""
    try:
        return read(*args, **kwargs)
    except CheckpointError as exc:
        return type(exc).__name__, str(exc)


def _raw(case) -> bytes:
    return decompress_state_file(case.path.read_bytes(), source=case.source, codec=case.codec)


@pytest.mark.parametrize("keep_removals", [True, False], ids=["kept", "forgotten"])
@pytest.mark.parametrize("case", [c for c in CASES if not c.is_snapshot], ids=case_id)
def test_every_fixture_delta_applies_like_its_records_one_by_one(case, keep_removals):
    raw = _raw(case)
    # Start from a state that already holds some of the delta's keys, with other sizes.
    before = {r.key: 8 for r in iter_state_records(raw, source="f", row_checksum=case.row_checksum)}
    before = dict(list(before.items())[::2])
    expected = _replayed(raw, dict(before), row_checksum=case.row_checksum, keep_removals=keep_removals)
    assert _fast(raw, dict(before), row_checksum=case.row_checksum, keep_removals=keep_removals) == expected


@pytest.mark.parametrize("case", [c for c in CASES if c.is_snapshot], ids=case_id)
def test_every_fixture_snapshot_counts_like_its_records_one_by_one(case):
    raw = _raw(case)
    keys = [r.key for r in iter_state_records(raw, source="f", row_checksum=case.row_checksum, removals_allowed=False)]
    for changes in ({}, dict.fromkeys(keys[::3], REMOVED), {b"not a key of the file": 8}):
        expected = _snapshot_size(raw, changes, row_checksum=case.row_checksum)
        assert count_snapshot(raw, "f", changes, row_checksum=case.row_checksum) == expected


# --- crafted contents ----------------------------------------------------------------------------


def _record(key: bytes, value: bytes | None, *, checksum: bool = False) -> bytes:
    if checksum:
        key, value = (key, b"CSUM" + value) if value is not None else (b"csum" + key, None)
    value_part = struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return struct.pack(">i", len(key)) + key + value_part


def _key(number: int, size: int) -> bytes:
    return number.to_bytes(8, "big") * (size // 8) + b"k" * (size % 8)


def _content(layout: list[tuple[str, int, int, int]], *, checksum: bool = False, unique: bool = False) -> bytes:
    """Records from (kind, count, key size, value size) runs; kind "put" or "del", keys numbered
    from 0 in every run, so later runs put and remove the keys of earlier ones (``unique``:
    numbered on across runs, as in a snapshot, which Spark writes from its map)."""
    records, first = [], 0
    for kind, count, key_size, value_size in layout:
        for number in range(first, first + count):
            value = None if kind == "del" else bytes([number % 251]) * value_size
            records.append(_record(_key(number, key_size), value, checksum=checksum))
        first += count if unique else 0
    return b"".join(records) + struct.pack(">i", -1)


LONG = KEYS_PER_UNPACK * 2 + 3
LAYOUTS = {
    "one long run of puts": [("put", LONG, 40, 16)],
    "puts then removals of the same keys": [("put", LONG, 40, 16), ("del", LONG - 9, 40, 0)],
    "runs just below, at and above the bulk threshold": [
        ("put", MIN_BULK_RECORDS - 1, 40, 16),
        ("put", MIN_BULK_RECORDS, 48, 16),
        ("put", MIN_BULK_RECORDS + 1, 40, 24),
        ("del", MIN_BULK_RECORDS, 48, 0),
    ],
    "runs of exactly one and two unpack chunks": [
        ("put", KEYS_PER_UNPACK, 40, 16),
        ("put", 2 * KEYS_PER_UNPACK, 48, 8),
        ("del", KEYS_PER_UNPACK, 40, 0),
    ],
    "sizes changing at every record": [
        (kind, 1, size, value)
        for _ in range(30)
        for kind, size, value in (("put", 40, 16), ("put", 48, 16), ("del", 40, 0), ("put", 40, 24), ("put", 32, 0))
    ],
    "a key put, removed and put again with another value size": [
        ("put", 20, 40, 16),
        ("del", 20, 40, 0),
        ("put", 20, 40, 32),
        ("del", 5, 40, 0),
        ("put", 3, 40, 8),
    ],
    "values of 4 stray bytes past whole words (Spark before 2.3)": [("put", 40, 24, 20), ("put", 3, 24, 12)],
    "empty keys and values": [("put", 12, 0, 0), ("put", 12, 8, 0), ("del", 12, 0, 0)],
    "an irregular stretch longer than one scan": [
        ("put", 1, size, 16) for _ in range(SCAN_BYTES // 100) for size in (40, 48)
    ]
    + [("del", 1, 40, 0), ("put", LONG, 40, 16)],
    "a long run after an irregular stretch": [
        ("put", 1, 40, 16),
        ("put", 1, 48, 16),
        ("put", 3, 56, 16),
        ("put", LONG, 40, 16),
        ("del", 2, 40, 0),
    ],
}


@pytest.mark.parametrize("checksum", [False, True], ids=["plain", "row checksums"])
@pytest.mark.parametrize("keep_removals", [True, False], ids=["kept", "forgotten"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_crafted_deltas_apply_like_their_records_one_by_one(name, keep_removals, checksum):
    raw = _content(LAYOUTS[name], checksum=checksum)
    before = {_key(number, 40): 8 for number in range(0, 200, 3)}
    expected = _replayed(raw, dict(before), row_checksum=checksum, keep_removals=keep_removals)
    assert _fast(raw, dict(before), row_checksum=checksum, keep_removals=keep_removals) == expected


@pytest.mark.parametrize("checksum", [False, True], ids=["plain", "row checksums"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_crafted_snapshots_count_like_their_records_one_by_one(name, checksum):
    puts = [(kind, count, key_size, value_size) for kind, count, key_size, value_size in LAYOUTS[name] if kind == "put"]
    raw = _content(puts, checksum=checksum, unique=True)
    for changes in ({}, {_key(number, 40): REMOVED for number in range(0, 200, 3)}):
        assert count_snapshot(raw, "f", changes, row_checksum=checksum) == _snapshot_size(
            raw, changes, row_checksum=checksum
        )


def test_a_long_run_of_fixed_width_records_is_found_as_one_run():
    raw = _content([("put", LONG, 40, 16), ("del", 7, 40, 0)])
    run = find_record_run(raw, 0, source="f")
    assert (run.count, run.key_size, run.value_size, run.end) == (LONG, 40, 16, LONG * (8 + 40 + 16))


def test_live_size_counts_only_keys_that_are_not_removed():
    changes = {b"a" * 8: 16, b"b" * 16: REMOVED, b"c" * 24: 8}
    assert live_size(changes) == StateSize(2, 32, 24)


# --- damaged crafted contents --------------------------------------------------------------------

DAMAGE_LAYOUT = [("put", 70, 40, 16), ("put", 2, 48, 16), ("del", 30, 40, 0), ("put", 9, 40, 16)]


def _size_field_offsets(raw: bytes) -> list[int]:
    """Every byte of every size field (key size, value size, end marker) of a content."""
    offsets, pos = [], 0
    for record in iter_state_records(raw, source="f"):
        key_size = len(record.key)
        offsets.extend(range(pos, pos + 4))
        offsets.extend(range(pos + 4 + key_size, pos + 8 + key_size))
        pos += 8 + key_size + (len(record.value) if record.value is not None else 0)
    return offsets + list(range(pos, pos + 4))


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF], ids=lambda mask: f"xor{mask:#04x}")
def test_a_damaged_size_field_gives_the_record_reader_s_outcome(mask):
    raw = _content(DAMAGE_LAYOUT)
    for position in _size_field_offsets(raw):
        damaged = bytearray(raw)
        damaged[position] ^= mask
        damaged = bytes(damaged)
        expected = _outcome(_replayed, damaged, {}, row_checksum=False, keep_removals=True)
        assert _outcome(_fast, damaged, {}, row_checksum=False, keep_removals=True) == expected, position
        expected_count = _outcome(_snapshot_size, damaged, {}, row_checksum=False)
        assert _outcome(count_snapshot, damaged, "f", {}) == expected_count, position


def test_every_truncation_gives_the_record_reader_s_error_and_offset():
    raw = _content(DAMAGE_LAYOUT)
    for length in range(len(raw)):
        expected = _outcome(_replayed, raw[:length], {}, row_checksum=False, keep_removals=True)
        assert expected[0] == "TruncatedFileError"
        assert _outcome(_fast, raw[:length], {}, row_checksum=False, keep_removals=True) == expected, length
