"""The checkpoint's ``metadata`` file: the query id.

Layout: one JSON object ``{"id":"<query uuid>"}``, UTF-8, no trailing newline, written once
when the query first starts (StreamMetadata, in ``...streaming.runtime`` from Spark 4.1 and in
StreamExecution.scala before). Spark 2.1 wrote it pretty-printed over several lines, so the
whole file is parsed as one JSON document. Unknown fields are ignored, as json4s does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CorruptFileError
from .logfile import JsonSite, decode_text, parse_json_object


@dataclass(frozen=True, slots=True)
class StreamMetadata:
    """Spark's StreamMetadata: the id that stays the same across restarts of a query."""

    id: str


def parse_stream_metadata(data: bytes, *, source: str) -> StreamMetadata:
    """Parse a ``metadata`` file.

    Raises CorruptFileError when it is empty, not UTF-8, not a JSON object, or has no string id.
    """
    if not data:
        raise CorruptFileError(source, "the metadata file is empty")
    text = decode_text(data, source=source)
    document = parse_json_object(text, JsonSite(source, "metadata", offset=0))
    query_id = document.get("id")
    if not isinstance(query_id, str) or not query_id:
        raise CorruptFileError(source, "metadata: expected a non-empty string field 'id'")
    return StreamMetadata(id=query_id)
