"""Avro records as Spark's state store writes them (avrorow.py), from bytes written out by hand
after the Avro specification and spark-avro's toAvroTypeWithDefaults (every record field a
union of null and its type); the real rows are in test_statevariables.py and the Spark test."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from workers.checkpoint.avrorow import decimal_bytes, decode_avro_record
from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.sparktypes import ArrayType, AtomicType, DecimalType, MapType, StructField, StructType

SCHEMA = StructType(
    (
        StructField("n", AtomicType("integer")),
        StructField("f", AtomicType("float")),
        StructField("d", DecimalType(5, 2)),
        StructField("day", AtomicType("date")),
        StructField("xs", ArrayType(AtomicType("integer"), False)),
        StructField("ys", ArrayType(AtomicType("integer"), False)),
        StructField("m", MapType(AtomicType("string"), AtomicType("long"), True)),
        StructField("inner", StructType((StructField("x", AtomicType("long")),))),
        StructField("ok", AtomicType("boolean")),
        StructField("s", AtomicType("string")),
        StructField("nothing", AtomicType("void")),
    )
)
RECORD = bytes.fromhex(
    "02 01"  # n: branch 1, zigzag -1
    "02 0000c03f"  # f: 1.5, little-endian
    "02 ffff85"  # d: -123 in the 3 bytes of precision 5, so -1.23
    "02 f0a802"  # day: 19000
    "02 04 02 04 00"  # xs: a block of 2 items (1, 2), then the end
    "02 03 04 02 04 00"  # ys: a block of -2 items with its byte size 2, then the end
    "02 02 02 61 0a 00"  # m: one entry "a" -> 5
    "00"  # inner: null
    "02 01"  # ok: true
    "02 06 68c3a9"  # s: 3 bytes of UTF-8
)


def test_a_record_of_every_kind_of_field_decodes():
    assert decode_avro_record(RECORD, SCHEMA, source="f") == {
        "n": -1,
        "f": 1.5,
        "d": Decimal("-1.23"),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=19000),
        "xs": [1, 2],
        "ys": [1, 2],
        "m": [("a", 5)],
        "inner": None,
        "ok": True,
        "s": "hé",
        "nothing": None,
    }


def test_decimal_sizes_are_sparks_min_bytes_for_precision():
    # 2**15 < 10**5 <= 2**23; 10**18 < 2**63; 10**38 < 2**127.
    assert [decimal_bytes(p) for p in (1, 2, 5, 18, 38)] == [1, 1, 3, 8, 16]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (RECORD[:-2], "field 's': 3 bytes announced, 1 left"),
        (bytes.fromhex("04"), "field 'n': union branch 2"),
        (bytes.fromhex("02 ffffffffffffffffffff01"), "field 'n': a number longer than 10 bytes"),
        (RECORD + b"\x00", "1 bytes left after the record"),
    ],
)
def test_bad_bytes_name_the_file_and_field(data, reason):
    with pytest.raises(CorruptFileError, match=reason) as caught:
        decode_avro_record(data, SCHEMA, source="state/0/1/4.changelog")
    assert caught.value.path == "state/0/1/4.changelog"
