"""State schema files: the key and value schemas of a stateful operator's state stores.

SchemaHelper writes them with a Java DataOutputStream (big-endian integers). ``utf(s)`` is
``writeUTF``: an unsigned 16-bit byte length, then modified UTF-8 (NUL as ``C0 80``,
characters beyond U+FFFF as two 3-byte surrogates). ``chunked(s)`` is an int32 count, then
that many ``utf`` pieces of at most 65535 Java chars, concatenated by the reader::

    header   utf("v1" | "v2" | "v3")
    v1       utf(key schema JSON) utf(value schema JSON)
    v2       chunked(key schema JSON) chunked(value schema JSON)
    v3       int32 number of column families, then for each:
             utf(name) int16 key schema id chunked(key schema JSON)
             int16 value schema id chunked(value schema JSON)
             chunked(key encoder spec JSON)
             chunked(user key encoder schema JSON, or "{    }" when there is none)

Where (``<store>`` only for stores not named ``default``, e.g. the four stores of a join):

    state/<op>/0[/<store>]/_metadata/schema         v1 (early 3.x), v2 (later 3.x, 4.x)
    state/<op>/_stateSchema/<store>/<batch>_<uuid>   v3 (transformWithState, Spark 4.0+)

Schema JSON is ``StructType.json`` (see sparktypes.py). The v3 layout, with the two schema ids,
is the one of the Spark 4.3.0 jar (SchemaV3Writer / SchemaV3Reader).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import CorruptFileError, TruncatedFileError, UnsupportedVersionError
from .layout import parse_batch_id
from .logdir import list_batch_ids
from .logfile import JsonSite, get_object, get_required_long, get_required_str, parse_json_object, parse_log_file
from .sparktypes import StructType, parse_struct_type
from .stateinventory import DEFAULT_STORE_NAME

if TYPE_CHECKING:
    # Annotations only: the readers need just the methods of CheckpointStorage.
    from .storage.checkpointstorage import CheckpointStorage

# SchemaReader.createSchemaReader validates the version against 3 (Spark 4.x; 3.x reads up to 2).
STATE_SCHEMA_MAX_VERSION = 3
DEFAULT_COL_FAMILY_NAME = "default"  # StateStore.DEFAULT_COL_FAMILY_NAME
# SchemaV3Writer writes this in place of an absent user key encoder schema.
_NO_USER_KEY_SCHEMA = "{    }"
_VERSION = re.compile(r"v([0-9]{1,10})")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")
# Chunked text starts after the int32 chunk count and the first piece's length (for messages).
_CHUNKED_TEXT_START = _INT.size + _USHORT.size


@dataclass(frozen=True, slots=True)
class StateStoreColFamilySchema:
    """The schemas of one column family (Spark's StateStoreColFamilySchema).

    v1 and v2 files hold one family named ``default``; its schema ids are 0 and its encoder
    spec and user key schema are None. ``key_state_encoder_spec`` is the JSON object Spark
    wrote, e.g. ``{"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}``.
    """

    col_family_name: str
    key_schema: StructType
    value_schema: StructType
    key_schema_id: int = 0
    value_schema_id: int = 0
    key_state_encoder_spec: dict[str, Any] | None = field(default=None, hash=False)
    user_key_encoder_schema: StructType | None = None


@dataclass(frozen=True, slots=True)
class StateSchemaFile:
    """A parsed schema file: its format version and its column families, in file order."""

    version: int
    col_families: tuple[StateStoreColFamilySchema, ...]

    def find_col_family(self, name: str) -> StateStoreColFamilySchema | None:
        """Return the column family called ``name``, or None."""
        return next((family for family in self.col_families if family.col_family_name == name), None)


def parse_state_schema_file(data: bytes, *, source: str) -> StateSchemaFile:
    """Parse a state schema file of any version Spark 2.x-4.x writes.

    Raises TruncatedFileError when it ends early, CorruptFileError for bad strings or schema
    JSON (with the byte offset), and UnsupportedVersionError above v3.
    """
    reader = _DataInput(data, source)
    version = _parse_version(reader)
    if version == 1:
        families = (_default_family(reader, chunked=False),)
    elif version == 2:
        families = (_default_family(reader, chunked=True),)
    else:
        families = _v3_families(reader)
    return StateSchemaFile(version, families)


def _parse_version(reader: _DataInput) -> int:
    text = reader.read_utf("version")
    match = _VERSION.fullmatch(text.strip())
    version = int(match.group(1)) if match else 0
    if version <= 0:
        raise CorruptFileError(reader.source, f"expected a version like 'v2', found {text[:20]!r}", offset=0)
    if version > STATE_SCHEMA_MAX_VERSION:
        raise UnsupportedVersionError(reader.source, found=version, supported=STATE_SCHEMA_MAX_VERSION)
    return version


def _default_family(reader: _DataInput, *, chunked: bool) -> StateStoreColFamilySchema:
    """Read the key then the value schema of a v1 or v2 file (one family, ``default``)."""
    key_schema = reader.read_schema("key schema", chunked=chunked)
    value_schema = reader.read_schema("value schema", chunked=chunked)
    return StateStoreColFamilySchema(DEFAULT_COL_FAMILY_NAME, key_schema, value_schema)


def _v3_families(reader: _DataInput) -> tuple[StateStoreColFamilySchema, ...]:
    # Each family takes at least 20 bytes (a name, two ids, four chunk counts).
    count = reader.read_count("number of column families", min_item_bytes=20)
    return tuple(_v3_family(reader) for _ in range(count))


def _v3_family(reader: _DataInput) -> StateStoreColFamilySchema:
    name = reader.read_utf("column family name")
    key_schema_id = reader.read_short("key schema id")
    key_schema = reader.read_schema(f"key schema of {name!r}", chunked=True)
    value_schema_id = reader.read_short("value schema id")
    value_schema = reader.read_schema(f"value schema of {name!r}", chunked=True)
    spec_offset = reader.pos + _CHUNKED_TEXT_START
    spec = reader.read_chunked_utf(f"key encoder spec of {name!r}")
    user_key_offset = reader.pos + _CHUNKED_TEXT_START
    user_key_json = reader.read_chunked_utf(f"user key encoder schema of {name!r}")
    return StateStoreColFamilySchema(
        col_family_name=name,
        key_schema=key_schema,
        value_schema=value_schema,
        key_schema_id=key_schema_id,
        value_schema_id=value_schema_id,
        key_state_encoder_spec=parse_json_object(spec, JsonSite(reader.source, "key encoder spec", spec_offset)),
        user_key_encoder_schema=_user_key_schema(user_key_json, reader.source, user_key_offset),
    )


def _user_key_schema(text: str, source: str, offset: int) -> StructType | None:
    # SchemaV3Reader wraps this in Try(...).toOption: anything that is not a schema means "none".
    if text == _NO_USER_KEY_SCHEMA:
        return None
    try:
        return parse_struct_type(text, source=source, offset=offset, what="user key encoder schema")
    except CorruptFileError:
        return None


class _DataInput:
    """The reads of java.io.DataInputStream that SchemaHelper uses, bounded by the data."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source, self.pos = data, source, 0

    def take(self, size: int, what: str) -> bytes:
        if size > len(self.data) - self.pos:
            raise TruncatedFileError(
                self.source,
                f"{what}: needs {size} bytes, only {len(self.data) - self.pos} remain",
                offset=self.pos,
            )
        start, self.pos = self.pos, self.pos + size
        return self.data[start : self.pos]

    def read_short(self, what: str) -> int:
        return _SHORT.unpack(self.take(2, what))[0]

    def read_count(self, what: str, *, min_item_bytes: int) -> int:
        """Read an int32 count, refusing one the remaining bytes cannot hold."""
        at = self.pos
        count = _INT.unpack(self.take(4, what))[0]
        if count < 0:
            raise CorruptFileError(self.source, f"{what}: negative count {count}", offset=at)
        if count * min_item_bytes > len(self.data) - self.pos:
            raise TruncatedFileError(
                self.source, f"{what}: {count} announced, only {len(self.data) - self.pos} bytes remain", offset=at
            )
        return count

    def read_utf(self, what: str) -> str:
        """Read one ``writeUTF`` string (lone surrogates are kept, see read_chunked_utf)."""
        length = _USHORT.unpack(self.take(2, what))[0]
        at = self.pos
        return decode_modified_utf8(self.take(length, what), source=self.source, offset=at)

    def read_chunked_utf(self, what: str) -> str:
        """Read an int32 count of ``writeUTF`` pieces and join them."""
        count = self.read_count(f"{what} (chunk count)", min_item_bytes=2)
        text = "".join(self.read_utf(what) for _ in range(count))
        # A character beyond U+FFFF may be split between two pieces: pair surrogates only now.
        return _join_surrogates(text)

    def read_schema(self, what: str, *, chunked: bool) -> StructType:
        """Read a schema JSON written by ``writeUTF`` (v1) or in chunks (v2, v3)."""
        text_at = self.pos + (_CHUNKED_TEXT_START if chunked else _USHORT.size)
        text = self.read_chunked_utf(what) if chunked else _join_surrogates(self.read_utf(what))
        return parse_struct_type(text, source=self.source, offset=text_at, what=what)


def decode_modified_utf8(raw: bytes, *, source: str, offset: int = 0) -> str:
    """Decode Java's modified UTF-8 (``DataInput.readUTF``) without pairing surrogates.

    Raises CorruptFileError at the first byte Java's reader would reject.
    """
    if b"\xc0\x80" in raw:
        raw = raw.replace(b"\xc0\x80", b"\x00")  # Java's two-byte NUL
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise CorruptFileError(source, "malformed modified UTF-8", offset=offset + exc.start) from None
    if any(ord(char) > 0xFFFF for char in text):
        # Modified UTF-8 has no 4-byte sequences; Java's readUTF rejects them.
        raise CorruptFileError(source, "malformed modified UTF-8: a 4-byte sequence", offset=offset)
    return text


def _join_surrogates(text: str) -> str:
    """Turn surrogate pairs into the characters they encode; leave lone surrogates alone."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# Operator metadata (Spark 4.0+): OperatorStateMetadataV1Writer / OperatorStateMetadataV2Writer.
# UTF-8 text, a version line then one JSON object (json4s):
#   v1  state/<op>/_metadata/metadata
#       {"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},
#        "stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}
#   v2  state/<op>/_metadata/v2/<batchId> (transformWithState): each store also lists
#       "stateSchemaFilePaths":[<URIs of v3 schema files>], plus "operatorPropertiesJson":"<JSON>"

OPERATOR_METADATA_MAX_VERSION = 2


@dataclass(frozen=True, slots=True)
class OperatorInfo:
    """Spark's OperatorInfoV1: the operator id and its name (``stateStoreSave``, ``dedupe``...)."""

    operator_id: int
    operator_name: str


@dataclass(frozen=True, slots=True)
class StateStoreMetadata:
    """Spark's StateStoreMetadataV1/V2; ``state_schema_file_paths`` is empty for v1."""

    store_name: str
    num_cols_prefix_key: int
    num_partitions: int
    state_schema_file_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OperatorStateMetadata:
    """Spark's OperatorStateMetadataV1/V2; ``operator_properties`` is v2's decoded properties JSON."""

    version: int
    operator_info: OperatorInfo
    state_store_info: tuple[StateStoreMetadata, ...]
    operator_properties: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def store_names(self) -> tuple[str, ...]:
        return tuple(store.store_name for store in self.state_store_info)


def parse_operator_state_metadata(data: bytes, *, source: str) -> OperatorStateMetadata:
    """Parse ``state/<op>/_metadata/metadata`` (v1) or ``state/<op>/_metadata/v2/<batch>`` (v2).

    Raises CorruptFileError for a damaged file and UnsupportedVersionError above v2.
    """
    log = parse_log_file(data, source=source, max_version=OPERATOR_METADATA_MAX_VERSION)
    site = JsonSite(source, "operator metadata", log.offset_of(0))
    document = parse_json_object("\n".join(log.lines), site)
    info = _require_object(document, "operatorInfo", site)
    stores = document.get("stateStoreInfo")
    if not isinstance(stores, list):
        raise site.error("'stateStoreInfo' must be a list")
    return OperatorStateMetadata(
        version=log.version,
        operator_info=OperatorInfo(
            operator_id=get_required_long(info, "operatorId", site),
            operator_name=get_required_str(info, "operatorName", site),
        ),
        state_store_info=tuple(_state_store_metadata(store, site) for store in stores),
        operator_properties=_operator_properties(document, site) if log.version >= 2 else None,
    )


def _state_store_metadata(store: Any, site: JsonSite) -> StateStoreMetadata:
    if not isinstance(store, dict):
        raise site.error("a 'stateStoreInfo' entry must be an object")
    return StateStoreMetadata(
        store_name=get_required_str(store, "storeName", site),
        num_cols_prefix_key=get_required_long(store, "numColsPrefixKey", site),
        num_partitions=get_required_long(store, "numPartitions", site),
        state_schema_file_paths=_schema_file_paths(store, site),
    )


def _schema_file_paths(store: dict[str, Any], site: JsonSite) -> tuple[str, ...]:
    # Released 4.x jars write the list; a 4.0.0 pre-release wrote one "stateSchemaFilePath".
    paths = store.get("stateSchemaFilePaths")
    if paths is None and isinstance(store.get("stateSchemaFilePath"), str):
        paths = [store["stateSchemaFilePath"]]
    if paths is None:
        return ()
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
        raise site.error("'stateSchemaFilePaths' must be a list of strings")
    return tuple(paths)


def _operator_properties(document: dict[str, Any], site: JsonSite) -> dict[str, Any]:
    text = get_required_str(document, "operatorPropertiesJson", site)
    return parse_json_object(text, JsonSite(site.source, "operatorPropertiesJson", site.offset))


def _require_object(obj: dict[str, Any], key: str, site: JsonSite) -> dict[str, Any]:
    value = get_object(obj, key, site)
    if value is None:
        raise site.error(f"missing field {key!r}")
    return value


# ---------------------------------------------------------------------------------------------
# Reading through storage.


@dataclass(frozen=True, slots=True)
class StoreSchema:
    """The schema file of one state store: where it is and what it says."""

    store_name: str
    path: str
    schema_file: StateSchemaFile

    @property
    def key_schema(self) -> StructType:
        """The key schema of the ``default`` column family (the only one before v3)."""
        return self._default_family().key_schema

    @property
    def value_schema(self) -> StructType:
        return self._default_family().value_schema

    def _default_family(self) -> StateStoreColFamilySchema:
        family = self.schema_file.find_col_family(DEFAULT_COL_FAMILY_NAME)
        return family or self.schema_file.col_families[0]


def find_operator_state_metadata(storage: CheckpointStorage, operator_id: int) -> OperatorStateMetadata | None:
    """Read the operator metadata: the newest v2 file, else the v1 file; None when there is none.

    Spark 3.x and earlier write no operator metadata.
    """
    base = f"state/{operator_id}/_metadata"
    batch_ids = list_batch_ids(storage, f"{base}/v2")
    relpath = f"{base}/v2/{batch_ids[-1]}" if batch_ids else f"{base}/metadata"
    data = storage.find_bytes(relpath)
    return None if data is None else parse_operator_state_metadata(data, source=relpath)


def find_store_schema(
    storage: CheckpointStorage, operator_id: int, store_name: str = DEFAULT_STORE_NAME
) -> StoreSchema | None:
    """Read the schema of one store: the v1/v2 file in partition 0, else the newest v3 file.

    Returns None when Spark wrote no schema (before 3.1, or before the first batch ended).
    """
    store_dir = f"state/{operator_id}/0" + ("" if store_name == DEFAULT_STORE_NAME else f"/{store_name}")
    relpath = f"{store_dir}/_metadata/schema"
    data = storage.find_bytes(relpath)
    if data is None:
        relpath = _newest_v3_schema_path(storage, operator_id, store_name)
        data = None if relpath is None else storage.read_bytes(relpath)
    if data is None:
        return None
    return StoreSchema(store_name, relpath, parse_state_schema_file(data, source=relpath))


def _newest_v3_schema_path(storage: CheckpointStorage, operator_id: int, store_name: str) -> str | None:
    """The ``<batchId>_<uuid>`` file of the highest batch in ``state/<op>/_stateSchema/<store>``."""
    directory = f"state/{operator_id}/_stateSchema/{store_name}"
    batches = {}
    for info in storage.list_dir(directory):
        batch_id = parse_batch_id(info.name.partition("_")[0])
        if not info.is_dir and batch_id is not None and not info.name.endswith(".crc"):
            batches[batch_id] = info.name
    return f"{directory}/{batches[max(batches)]}" if batches else None
