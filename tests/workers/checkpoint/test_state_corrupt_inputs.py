"""Every Spark-written state file, truncated and byte-flipped, gives only our typed errors.

Both readers are checked: the record reader (statefiles) and the counting walk of staterows.
A damaged file either still reads (a flip inside key bytes changes no framing) or raises a
CheckpointError whose message starts with the file's path; CorruptFileError carries an offset.
"""

from __future__ import annotations

import pytest

from state_corpus import case_id, state_file_cases
from workers.checkpoint.errors import CheckpointError, CorruptFileError
from workers.checkpoint.lz4block import HEADER
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import parse_state_file
from workers.checkpoint.staterows import apply_delta, count_snapshot

CASES = state_file_cases()


def _outcome(case, data: bytes) -> str:
    """Return "ok" or the error's class name; any non-CheckpointError fails the test."""
    try:
        parse_state_file(
            data,
            source=case.source,
            codec=case.codec,
            row_checksum=case.row_checksum,
            removals_allowed=not case.is_snapshot,
            max_bytes=1 << 20,
        )
        raw = decompress_state_file(data, source=case.source, codec=case.codec, max_bytes=1 << 20)
        if case.is_snapshot:
            count_snapshot(raw, case.source, {}, row_checksum=case.row_checksum)
        else:
            apply_delta(raw, case.source, {}, row_checksum=case.row_checksum)
    except CheckpointError as exc:
        assert str(exc).startswith(f"{case.source}: "), str(exc)
        if isinstance(exc, CorruptFileError):
            assert exc.offset is not None, str(exc)
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_truncation_of_a_state_file_raises_a_typed_error(case):
    data = case.path.read_bytes()
    outcomes = [_outcome(case, data[:length]) for length in range(len(data))]
    # Cutting off the end mark alone still leaves every record (LZ4: the end mark is optional
    # for lz4-java's reader); any shorter cut loses the -1 end marker or a block.
    tolerated = HEADER.size if case.codec == "lz4" else 0
    assert all(outcome != "ok" for outcome in outcomes[: len(data) - tolerated])
    assert _outcome(case, data) == "ok"


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF], ids=lambda mask: f"xor{mask:#04x}")
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_single_byte_flip_reads_or_raises_a_typed_error(case, mask):
    data = bytearray(case.path.read_bytes())
    for position in range(len(data)):
        flipped = data.copy()
        flipped[position] ^= mask
        _outcome(case, bytes(flipped))


def test_a_flipped_payload_byte_of_an_lz4_file_fails_its_checksum_or_its_decoding():
    case = next(c for c in CASES if c.codec == "lz4" and c.path.stat().st_size > 100)
    data = bytearray(case.path.read_bytes())
    data[HEADER.size + 5] ^= 0x01
    assert _outcome(case, bytes(data)) == "CorruptFileError"
