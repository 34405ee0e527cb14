"""Spark SQL data types as stored in state schema files (``DataType.json`` / ``DataType.fromJson``).

A schema is ``StructType.json``::

    {"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}, ...]}

A field's ``type`` is a string for an atomic type (``"long"``, ``"timestamp"``,
``"decimal(10,2)"``, ``"interval day to second"``, ``"void"``...) or an object for the
complex ones: ``{"type":"struct","fields":[...]}``, ``{"type":"array","elementType":...,
"containsNull":...}``, ``{"type":"map","keyType":...,"valueType":...,"valueContainsNull":...}``
and ``{"type":"udt","class":...,"sqlType":...}``. Atomic names are kept as they are, so a type
added by a newer Spark still parses; the UnsafeRow decoder shows what it does not know as hex.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .logfile import JsonSite, parse_json_value

# DataType.fromJson: "decimal" alone is DecimalType.USER_DEFAULT, i.e. decimal(10,0).
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_DEFAULT_DECIMAL = (10, 0)
# Decimal.MAX_LONG_DIGITS: up to this precision UnsafeRow keeps the unscaled value in the slot.
MAX_LONG_DIGITS = 18
_MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True, slots=True)
class AtomicType:
    """A type without children, named as Spark's JSON names it (``long``, ``timestamp_ntz``...)."""

    name: str


@dataclass(frozen=True, slots=True)
class DecimalType:
    precision: int
    scale: int

    @property
    def name(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True, slots=True)
class ArrayType:
    element_type: DataType
    contains_null: bool


@dataclass(frozen=True, slots=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool


@dataclass(frozen=True, slots=True)
class UserDefinedType:
    """A UDT; rows hold its ``sql_type``, so decoding uses that."""

    class_name: str
    sql_type: DataType


@dataclass(frozen=True, slots=True)
class StructField:
    name: str
    data_type: DataType
    nullable: bool = True
    # Arbitrary JSON (e.g. {"spark.watermarkDelayMs": 2000}); left out of the hash.
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class StructType:
    fields: tuple[StructField, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


DataType = AtomicType | DecimalType | ArrayType | MapType | UserDefinedType | StructType


def parse_struct_type(text: str, *, source: str, offset: int | None = None, what: str = "schema") -> StructType:
    """Parse ``StructType.json`` text (a key or value schema).

    ``offset`` (where the text is in the file) and ``what`` only go into messages. Raises
    CorruptFileError when the text is not JSON or not a struct type.
    """
    site = JsonSite(source, what, offset)
    data_type = data_type_from_json(parse_json_value(text, site), site)
    if not isinstance(data_type, StructType):
        raise site.error(f"expected a struct type, found {_describe(data_type)}")
    return data_type


def data_type_from_json(value: Any, site: JsonSite) -> DataType:
    """Turn a decoded JSON value into a DataType, as ``DataType.parseDataType`` does."""
    if isinstance(value, str):
        return _atomic_type(value)
    if not isinstance(value, dict):
        raise site.error(f"a data type must be a string or an object, found {type(value).__name__}")
    kind = value.get("type")
    parser = _COMPLEX_TYPES.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise site.error(f"unknown data type object with type {str(kind)[:40]!r}")
    return parser(value, site)


def _atomic_type(name: str) -> AtomicType | DecimalType:
    if name == "decimal":
        return DecimalType(*_DEFAULT_DECIMAL)
    match = _DECIMAL.fullmatch(name)
    if match and 0 < int(match.group(1)) <= _MAX_DECIMAL_PRECISION:
        return DecimalType(int(match.group(1)), int(match.group(2)))
    return AtomicType(name)


def _struct_type(obj: dict[str, Any], site: JsonSite) -> StructType:
    fields = _require(obj, "fields", list, site)
    return StructType(tuple(_struct_field(item, site) for item in fields))


def _struct_field(obj: Any, site: JsonSite) -> StructField:
    if not isinstance(obj, dict):
        raise site.error(f"a struct field must be an object, found {type(obj).__name__}")
    name = _require(obj, "name", str, site)
    if "type" not in obj:
        raise site.error(f"struct field {name[:40]!r} has no 'type'")
    return StructField(
        name=name,
        data_type=data_type_from_json(obj["type"], site),
        # Spark 4 reads a field without "nullable" as nullable and without "metadata" as empty.
        nullable=_optional(obj, "nullable", bool, True, site),
        metadata=_optional(obj, "metadata", dict, {}, site),
    )


def _array_type(obj: dict[str, Any], site: JsonSite) -> ArrayType:
    return ArrayType(
        element_type=data_type_from_json(_require(obj, "elementType", (str, dict), site), site),
        contains_null=_optional(obj, "containsNull", bool, True, site),
    )


def _map_type(obj: dict[str, Any], site: JsonSite) -> MapType:
    return MapType(
        key_type=data_type_from_json(_require(obj, "keyType", (str, dict), site), site),
        value_type=data_type_from_json(_require(obj, "valueType", (str, dict), site), site),
        value_contains_null=_optional(obj, "valueContainsNull", bool, True, site),
    )


def _user_defined_type(obj: dict[str, Any], site: JsonSite) -> UserDefinedType:
    # Python UDTs carry "pyClass" and no JVM "class"; either names the type for display.
    class_name = obj.get("class") or obj.get("pyClass") or "?"
    sql_type = data_type_from_json(_require(obj, "sqlType", (str, dict), site), site)
    return UserDefinedType(class_name=str(class_name), sql_type=sql_type)


_COMPLEX_TYPES = {
    "struct": _struct_type,
    "array": _array_type,
    "map": _map_type,
    "udt": _user_defined_type,
}


def _require(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], site: JsonSite) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise site.error(f"{key!r} is missing or not of the expected kind")
    return value


def _optional(obj: dict[str, Any], key: str, kind: type, default: Any, site: JsonSite) -> Any:
    value = obj.get(key, default)
    if not isinstance(value, kind):
        raise site.error(f"{key!r} must be a {kind.__name__}, found {type(value).__name__}")
    return value


def _describe(data_type: DataType) -> str:
    return getattr(data_type, "name", type(data_type).__name__)


def simple_string(data_type: DataType) -> str:
    """Render a type the way Spark's ``simpleString`` does, e.g. ``struct<k:string,n:bigint>``."""
    if isinstance(data_type, StructType):
        inner = ",".join(f"{f.name}:{simple_string(f.data_type)}" for f in data_type.fields)
        return f"struct<{inner}>"
    if isinstance(data_type, ArrayType):
        return f"array<{simple_string(data_type.element_type)}>"
    if isinstance(data_type, MapType):
        return f"map<{simple_string(data_type.key_type)},{simple_string(data_type.value_type)}>"
    if isinstance(data_type, UserDefinedType):
        return simple_string(data_type.sql_type)
    return _SIMPLE_NAMES.get(data_type.name, data_type.name)


# Spark's simpleString differs from the JSON name for these.
_SIMPLE_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
