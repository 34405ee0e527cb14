"""Metadata-log files: a version line such as ``v1``, then one document per line.

Spark writes ``offsets/N``, ``commits/N``, ``sources/<i>/N`` and ``_spark_metadata/N`` this way
(HDFSMetadataLog and its subclasses OffsetSeqLog, CommitLog, FileStreamSourceLog,
FileStreamSinkLog). Layout::

    v<version>\\n<line 2>\\n<line 3>...

UTF-8 text split on ``\\n``, normally without a trailing newline (Spark 2.x wrote one). Spark
reads it with Scala's ``getLines()``, so this reader tolerates ``\\r\\n`` and one trailing
newline too. The version line is checked like MetadataVersionUtil.validateVersion: ``v``
followed by a positive Java int; an empty file is Spark's "Incomplete log file". Each kind of
log gives the remaining lines their meaning; the JSON helpers here are shared by all of them.
"""

from __future__ import annotations

import json
import re
import reprlib
from dataclasses import dataclass
from typing import Any, AnyStr

from .errors import CorruptFileError, IncompleteLogFileError, UnsupportedVersionError

# Spark parses the digits as a Java int; anything longer is malformed, not "too new".
_VERSION_LINE = re.compile(r"v([0-9]{1,10})")
_MAX_JAVA_INT = 2**31 - 1
_MIN_JAVA_LONG, _MAX_JAVA_LONG = -(2**63), 2**63 - 1
_MAX_INT_DIGITS = 100


@dataclass(frozen=True, slots=True)
class LogFile:
    """A metadata-log file split into its version and the lines after the version line.

    ``line_offsets[i]`` is the byte offset in the file where ``lines[i]`` starts (line i + 2).
    """

    version: int
    lines: tuple[str, ...]
    line_offsets: tuple[int, ...] = ()

    def offset_of(self, index: int) -> int | None:
        """Return the byte offset of ``lines[index]``, if known."""
        return self.line_offsets[index] if index < len(self.line_offsets) else None


def parse_log_file(data: bytes, *, source: str, max_version: int) -> LogFile:
    """Split a metadata-log file into its version and remaining lines.

    Raises IncompleteLogFileError for an empty file, CorruptFileError when it is not UTF-8 or
    has no valid version line, and UnsupportedVersionError for a version above max_version.
    """
    if not data:
        raise IncompleteLogFileError(source)
    if data.isascii():
        # Spark's usual logs: one decode, and a character offset is the byte offset.
        pieces = _split_lines(data.decode("ascii"))
        lines = tuple(piece for _, piece in pieces)
    else:
        pieces = _split_lines(data)
        lines = tuple(decode_text(piece, source=source, offset=start) for start, piece in pieces)
    version = _parse_version(lines[0], source=source, max_version=max_version)
    return LogFile(version, lines[1:], tuple(start for start, _ in pieces[1:]))


def _split_lines(data: AnyStr) -> list[tuple[int, AnyStr]]:
    """Split on "\\n" like Scala's getLines: one trailing newline ends the last line.

    Offsets count the items of ``data``: bytes, or the characters of ASCII text.
    """
    newline, carriage_return = ("\n", "\r") if isinstance(data, str) else (b"\n", b"\r")
    pieces = data.split(newline)
    if len(pieces) > 1 and not pieces[-1]:
        pieces.pop()
    result, start = [], 0
    for piece in pieces:
        result.append((start, piece[:-1] if piece.endswith(carriage_return) else piece))
        start += len(piece) + 1
    return result


def _parse_version(header: str, *, source: str, max_version: int) -> int:
    text = header.strip()
    match = _VERSION_LINE.fullmatch(text)
    version = int(match.group(1)) if match else 0
    if not 0 < version <= _MAX_JAVA_INT:
        raise CorruptFileError(
            source,
            f"Log file was malformed: failed to read correct log version from {text[:20]!r}",
            offset=0,
        )
    if version > max_version:
        raise UnsupportedVersionError(source, found=version, supported=max_version)
    return version


def decode_text(data: bytes, *, source: str, offset: int = 0) -> str:
    """Decode UTF-8, raising CorruptFileError at the first bad byte (``offset`` = start of data)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptFileError(source, "not UTF-8 text", offset=offset + exc.start) from None


@dataclass(frozen=True, slots=True)
class JsonSite:
    """Where a JSON document sits, for messages: the file, a label such as "line 2 (metadata)",
    and the byte offset of the document in the file when known."""

    source: str
    what: str
    offset: int | None = None

    def error(self, reason: str, *, offset: int | None = None) -> CorruptFileError:
        """Build the CorruptFileError for a problem in this document."""
        where = self.offset if offset is None else offset
        return CorruptFileError(self.source, f"{self.what}: {reason}", offset=where)


def parse_json_value(text: str, site: JsonSite) -> Any:
    """Decode one JSON document; raise CorruptFileError naming the site and the byte position.

    NaN and Infinity are refused: Spark's JSON writers never produce them.
    """
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise site.error(f"invalid JSON: {exc.msg}", offset=_byte_offset(site, text, exc.pos)) from None
    except (ValueError, RecursionError) as exc:
        # ValueError: a refused constant or an absurdly long integer; RecursionError: absurdly
        # deep nesting. Neither is JSON that Spark writes.
        raise site.error(f"invalid JSON: {exc}") from None


def _byte_offset(site: JsonSite, text: str, position: int) -> int | None:
    """Turn a character position in ``text`` into a byte offset in the file."""
    if site.offset is None:
        return None
    return site.offset + len(text[:position].encode("utf-8", "surrogatepass"))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_int(digits: str) -> int:
    # Spark's numbers are Java longs (19 digits); refusing absurd lengths early also keeps
    # Python's int-conversion limit and its advice about sys.set_int_max_str_digits out of messages.
    if len(digits) > _MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(digits)


# One decoder for every document: json.loads with options builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


def parse_json_object(text: str, site: JsonSite) -> dict[str, Any]:
    """Decode a JSON document that must be an object."""
    value = parse_json_value(text, site)
    if not isinstance(value, dict):
        raise site.error(f"expected a JSON object, found {_preview(value)}")
    return value


def get_long(obj: dict[str, Any], key: str, site: JsonSite) -> int:
    """Return a Java-long field of a JSON object, 0 when absent or null (json4s case-class default)."""
    value = obj.get(key)
    if value is None:
        return 0
    is_long = isinstance(value, int) and not isinstance(value, bool) and _MIN_JAVA_LONG <= value <= _MAX_JAVA_LONG
    if not is_long:
        raise site.error(f"{key!r} must be a long integer, found {_preview(value)}")
    return value


def require_field(obj: dict[str, Any], key: str, site: JsonSite) -> Any:
    """Return a field Spark always writes; a missing or null one means the document is damaged."""
    if obj.get(key) is None:
        raise site.error(f"missing field {key!r}")
    return obj[key]


def get_required_long(obj: dict[str, Any], key: str, site: JsonSite) -> int:
    require_field(obj, key, site)
    return get_long(obj, key, site)


def get_optional_long(obj: dict[str, Any], key: str, site: JsonSite) -> int | None:
    """Return a Java-long field, None when absent or null (an Option[Long])."""
    return None if obj.get(key) is None else get_long(obj, key, site)


def get_str(obj: dict[str, Any], key: str, site: JsonSite) -> str | None:
    """Return a string field, None when absent or null."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise site.error(f"{key!r} must be a string, found {_preview(value)}")
    return value


def get_required_str(obj: dict[str, Any], key: str, site: JsonSite) -> str:
    require_field(obj, key, site)
    return get_str(obj, key, site)  # type: ignore[return-value]


def get_required_bool(obj: dict[str, Any], key: str, site: JsonSite) -> bool:
    value = require_field(obj, key, site)
    if not isinstance(value, bool):
        raise site.error(f"{key!r} must be true or false, found {_preview(value)}")
    return value


def get_object(obj: dict[str, Any], key: str, site: JsonSite) -> dict[str, Any] | None:
    """Return an object-valued field of a JSON object, None when absent or null."""
    value = obj.get(key)
    if value is not None and not isinstance(value, dict):
        raise site.error(f"{key!r} must be a JSON object, found {_preview(value)}")
    return value


def get_object_map(obj: dict[str, Any], key: str, site: JsonSite) -> dict[str, dict[str, Any]]:
    """Return a field that maps names to JSON objects, {} when absent or null (a Scala Map default)."""
    entries = get_object(obj, key, site) or {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise site.error(f"{key} entry {name[:40]!r} must be a JSON object, found {_preview(entry)}")
    return entries


def _preview(value: Any) -> str:
    """Show a short piece of an unexpected JSON value in an error message."""
    # reprlib bounds both length and depth, so a huge or deep value cannot blow up the message.
    return reprlib.repr(value)
