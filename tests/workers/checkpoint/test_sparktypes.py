"""Spark's DataType JSON (as state schema files hold it) parsed into sparktypes dataclasses.

The JSON texts are what PySpark 4.3.0 wrote into the fixtures' ``_metadata/schema`` files and
what ``StructType.json`` produces for the other shapes; tests/spark/test_state_keys_vs_spark.py
checks a schema with every shape against Spark itself.
"""

from __future__ import annotations

import pytest

from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.sparktypes import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    UserDefinedType,
    parse_struct_type,
    simple_string,
)

# The key schema of tests/fixtures/windowed_agg_file_sink (groupBy(window(...), "key")).
WINDOW_KEY_JSON = (
    '{"type":"struct","fields":[{"name":"window","type":{"type":"struct","fields":['
    '{"name":"start","type":"timestamp","nullable":true,"metadata":{}},'
    '{"name":"end","type":"timestamp","nullable":true,"metadata":{}}]},"nullable":true,'
    '"metadata":{"spark.timeWindow":true,"spark.watermarkDelayMs":2000}},'
    '{"name":"key","type":"string","nullable":true,"metadata":{}}]}'
)


def _single_field(type_json: str) -> str:
    return f'{{"type":"struct","fields":[{{"name":"f","type":{type_json},"nullable":true,"metadata":{{}}}}]}}'


def test_window_key_schema_parses_to_a_nested_struct_with_its_metadata():
    schema = parse_struct_type(WINDOW_KEY_JSON, source="state/0/0/_metadata/schema")

    window = StructType((StructField("start", AtomicType("timestamp")), StructField("end", AtomicType("timestamp"))))
    window_metadata = {"spark.timeWindow": True, "spark.watermarkDelayMs": 2000}
    assert schema == StructType(
        (StructField("window", window, metadata=window_metadata), StructField("key", AtomicType("string")))
    )
    assert schema.names == ("window", "key")


@pytest.mark.parametrize(
    ("type_json", "expected"),
    [
        ('"decimal(38,18)"', DecimalType(38, 18)),
        ('"decimal( 7 , -2 )"', DecimalType(7, -2)),
        ('"decimal"', DecimalType(10, 0)),
        ('"timestamp_ntz"', AtomicType("timestamp_ntz")),
        ('"interval day to second"', AtomicType("interval day to second")),
        ('"void"', AtomicType("void")),
        ('"geometry(4326)"', AtomicType("geometry(4326)")),
        (
            '{"type":"array","elementType":"integer","containsNull":false}',
            ArrayType(AtomicType("integer"), contains_null=False),
        ),
        (
            '{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long",'
            '"containsNull":true},"valueContainsNull":true}',
            MapType(AtomicType("string"), ArrayType(AtomicType("long"), True), value_contains_null=True),
        ),
        (
            '{"type":"udt","class":"org.apache.spark.ml.linalg.VectorUDT","pyClass":"pyspark.ml.linalg.VectorUDT",'
            '"sqlType":{"type":"array","elementType":"double","containsNull":false}}',
            UserDefinedType("org.apache.spark.ml.linalg.VectorUDT", ArrayType(AtomicType("double"), False)),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_each_data_type_form_parses_to_its_dataclass(type_json, expected):
    schema = parse_struct_type(_single_field(type_json), source="schema")

    assert schema.fields[0].data_type == expected


def test_a_field_without_nullable_or_metadata_gets_sparks_defaults():
    schema = parse_struct_type('{"type":"struct","fields":[{"name":"a","type":"long"}]}', source="schema")

    assert schema.fields[0] == StructField("a", AtomicType("long"), nullable=True, metadata={})


def test_simple_string_uses_sparks_short_names():
    schema = parse_struct_type(
        _single_field('{"type":"map","keyType":"integer","valueType":"decimal(20,2)","valueContainsNull":true}'),
        source="schema",
    )

    assert simple_string(schema) == "struct<f:map<int,decimal(20,2)>>"
    assert simple_string(parse_struct_type(WINDOW_KEY_JSON, source="s")) == (
        "struct<window:struct<start:timestamp,end:timestamp>,key:string>"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"type":"struct","fields":[', "invalid JSON"),
        ('"long"', "expected a struct type"),
        ('{"type":"struct"}', "'fields' is missing"),
        ('{"type":"struct","fields":[{"type":"long"}]}', "'name' is missing"),
        ('{"type":"struct","fields":[{"name":"a"}]}', "has no 'type'"),
        ('{"type":"struct","fields":[{"name":"a","type":7}]}', "must be a string or an object"),
        ('{"type":"struct","fields":[{"name":"a","type":{"type":"set"}}]}', "unknown data type object"),
        ('{"type":"struct","fields":[{"name":"a","type":"long","nullable":"yes"}]}', "'nullable' must be a bool"),
        ('{"type":"struct","fields":["a"]}', "a struct field must be an object"),
    ],
)
def test_malformed_schema_json_raises_corrupt_file_error_naming_the_file(text, reason):
    with pytest.raises(CorruptFileError) as caught:
        parse_struct_type(text, source="state/3/0/_metadata/schema", offset=10)

    assert str(caught.value).startswith("state/3/0/_metadata/schema: schema: ")
    assert reason in str(caught.value)
