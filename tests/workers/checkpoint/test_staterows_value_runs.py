"""Value runs (statefiles.match_value_run / cut_value_run_keys) read records as the record reader does.

Value runs are the regular-expression path of staterows for records whose key sizes keep
changing. The reference is statefiles.iter_state_records, and, for the replay, each record
applied to a dict in file order (the helpers of test_staterows_fast). Sizes are chosen so that
their size fields hold bytes that mean something to a regular expression ("(", "*", ".", "\\",
newline) and low bytes that two sizes share (8 and 264).
"""

from __future__ import annotations

import struct

import pytest

from tests.workers.checkpoint.test_staterows_fast import (
    _outcome,
    _record,
    _replayed,
    _snapshot_size,
)
from workers.checkpoint.statefiles import (
    count_value_run,
    cut_value_run_keys,
    find_record_run,
    iter_state_records,
    match_value_run,
)
from workers.checkpoint.staterows import (
    MAX_VALUE_RUN_KEY_SIZES,
    REMOVED,
    apply_delta,
    count_snapshot,
    find_value_run,
)

TRICKY_KEY_SIZES = (0, 8, 10, 40, 42, 46, 92, 264)


def _key(number: int, size: int) -> bytes:
    """A key of ``size`` bytes that holds size-field look-alikes, newlines and regex syntax."""
    pattern = struct.pack(">i", size) + b"\n(*.\\" + number.to_bytes(4, "big")
    return (pattern * (size // len(pattern) + 1))[:size]


def _content(records: list[bytes]) -> bytes:
    return b"".join(records) + struct.pack(">i", -1)


def _mixed_puts(count: int, value_size: int, *, first: int = 0, checksum: bool = False) -> list[bytes]:
    sizes = TRICKY_KEY_SIZES
    return [
        _record(_key(n, sizes[n % len(sizes)]), bytes([n % 251]) * value_size, checksum=checksum)
        for n in range(first, first + count)
    ]


def _mixed_removals(count: int, *, first: int = 0, checksum: bool = False) -> list[bytes]:
    sizes = TRICKY_KEY_SIZES
    return [_record(_key(n, sizes[n % len(sizes)]), None, checksum=checksum) for n in range(first, first + count)]


def test_a_value_run_takes_every_record_of_known_key_sizes_and_one_value_size():
    raw = _content(_mixed_puts(50, 16) + _mixed_puts(3, 24))
    run_end = len(b"".join(_mixed_puts(50, 16)))
    assert match_value_run(raw, 0, len(raw), frozenset(TRICKY_KEY_SIZES), 16) == run_end
    expected = [r.key for r in iter_state_records(raw, source="f")][:50]
    assert cut_value_run_keys(raw, 0, run_end, frozenset(TRICKY_KEY_SIZES), 16) == expected


def test_a_value_run_counts_its_records_without_cutting_keys():
    raw = _content(_mixed_puts(50, 16))
    assert count_value_run(raw, 0, len(raw) - 4, frozenset(TRICKY_KEY_SIZES), 16) == 50


def test_a_value_run_learns_the_key_sizes_it_meets_and_stops_at_another_value_size():
    records = _mixed_puts(40, 16) + _mixed_puts(20, 24)
    raw = _content(records)
    key_sizes: set[int] = set()
    end = find_value_run(raw, find_record_run(raw, 0, source="f"), key_sizes)
    assert end == len(b"".join(records[:40]))
    assert key_sizes == set(TRICKY_KEY_SIZES)


def test_a_value_run_stops_before_a_key_size_it_does_not_know():
    records = _mixed_puts(20, 16)
    raw = _content(records)
    known = frozenset(TRICKY_KEY_SIZES) - {46}
    first_46 = next(n for n in range(20) if TRICKY_KEY_SIZES[n % len(TRICKY_KEY_SIZES)] == 46)
    assert match_value_run(raw, 0, len(raw), known, 16) == len(b"".join(records[:first_46]))


def test_a_value_run_takes_only_whole_records_before_its_end_position():
    records = _mixed_puts(10, 16)
    raw = _content(records)
    whole = len(b"".join(records[:4]))
    assert match_value_run(raw, 0, whole + 5, frozenset(TRICKY_KEY_SIZES), 16) == whole


def test_a_removal_run_takes_any_negative_value_size():
    records = [_record(_key(n, 40), None) for n in range(3)]
    records[1] = records[1][:-4] + struct.pack(">i", -7)
    raw = _content(records)
    assert match_value_run(raw, 0, len(raw), frozenset({40}), -1) == len(raw) - 4
    assert cut_value_run_keys(raw, 0, len(raw) - 4, frozenset({40}), -1) == [_key(n, 40) for n in range(3)]


def test_removal_keys_lose_their_checksum_and_removal_keys_too_short_for_one_stop_the_run():
    raw = _content([_record(_key(n, 40), None, checksum=True) for n in range(3)] + [_record(b"abc", None)])
    end = match_value_run(raw, 0, len(raw), frozenset({44, 3}), -1, row_checksum=True)
    assert end == 3 * (8 + 44)
    assert cut_value_run_keys(raw, 0, end, frozenset({44, 3}), -1, row_checksum=True) == [_key(n, 40) for n in range(3)]


LAYOUTS = {
    "tricky key sizes, puts then removals": _mixed_puts(300, 16) + _mixed_removals(200),
    "value sizes from 8 to 264 bytes": [
        record for size in (8, 16, 264, 8, 520) for record in _mixed_puts(20, size, first=size)
    ]
    + _mixed_removals(40, first=8),
    "puts, removals and puts again of the same keys": (
        _mixed_puts(60, 16) + _mixed_removals(30) + _mixed_puts(10, 32) + _mixed_removals(5, first=8)
    ),
    "more key sizes than one pattern takes": [
        _record(_key(n, size), b"v" * 16) for n, size in enumerate(range(8, 8 * (MAX_VALUE_RUN_KEY_SIZES + 10), 8))
    ]
    + [_record(_key(n, size), None) for n, size in enumerate(range(8, 8 * (MAX_VALUE_RUN_KEY_SIZES + 10), 16))],
    "a value run longer than one scan step": _mixed_puts(4000, 16) + _mixed_removals(3000),
}


@pytest.mark.parametrize("keep_removals", [True, False], ids=["kept", "forgotten"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_deltas_of_varying_key_sizes_apply_like_their_records_one_by_one(name, keep_removals):
    raw = _content(LAYOUTS[name])
    before = {_key(n, TRICKY_KEY_SIZES[n % len(TRICKY_KEY_SIZES)]): 8 for n in range(0, 400, 3)}
    expected = _replayed(raw, dict(before), row_checksum=False, keep_removals=keep_removals)
    changes = dict(before)
    apply_delta(raw, "f", changes, keep_removals=keep_removals)
    assert changes == expected


@pytest.mark.parametrize("keep_removals", [True, False], ids=["kept", "forgotten"])
def test_deltas_of_varying_key_sizes_with_row_checksums_apply_like_their_records_one_by_one(keep_removals):
    raw = _content(
        _mixed_puts(200, 16, checksum=True)
        + _mixed_removals(100, first=8, checksum=True)
        + _mixed_puts(20, 8, checksum=True)
    )
    expected = _replayed(raw, {}, row_checksum=True, keep_removals=keep_removals)
    changes: dict[bytes, int] = {}
    apply_delta(raw, "f", changes, row_checksum=True, keep_removals=keep_removals)
    assert changes == expected


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_snapshots_of_varying_key_sizes_count_like_their_records_one_by_one(name):
    puts = [record for record in LAYOUTS[name] if record[-4:] != struct.pack(">i", -1)]
    keys = {r.key: None for r in iter_state_records(_content(puts), source="f")}
    raw = _content([_record(key, b"w" * 24) for key in keys])  # a snapshot holds each key once
    for changes in ({}, dict.fromkeys(list(keys)[::4], REMOVED)):
        assert count_snapshot(raw, "f", changes) == _snapshot_size(raw, changes, row_checksum=False)


def test_every_truncation_of_a_varying_delta_gives_the_record_reader_s_error_and_offset():
    raw = _content(_mixed_puts(12, 16) + _mixed_removals(6))

    def fast(content):
        changes: dict[bytes, int] = {}
        apply_delta(content, "f", changes)
        return changes

    for length in range(len(raw)):
        expected = _outcome(_replayed, raw[:length], {}, row_checksum=False, keep_removals=True)
        assert expected[0] == "TruncatedFileError"
        assert _outcome(fast, raw[:length]) == expected, length
