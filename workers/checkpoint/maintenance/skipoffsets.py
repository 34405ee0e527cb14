"""The offsets a skip reads and rewrites: Kafka offsets JSON, file source logs, the offset log lines.

Kafka (KafkaSourceOffset, JsonUtils.partitionOffsets): ``{"<topic>":{"<partition>":<offset>,...},...}``,
partition numbers as JSON strings, offsets longs; Spark sorts the partitions but stores them in
hash maps, so the order on disk is arbitrary and a rewrite keeps the file's own order.
File source (FileStreamSourceOffset): ``{"logOffset":<L>}``, or a bare number in Spark 2.1-era
files; ``L`` is a batch id of the source's own log ``sources/<i>/``, whose entries are
``{"path":…,"timestamp":…,"batchId":…}`` lines after ``v1``.

Pure except for the reads through the storage edge; nothing here decides what a plan does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ..compactible import FileEntry, parse_source_log_file
from ..errors import CheckpointError
from ..metadatalog import log_batch_files
from ..offsets import SERIALIZED_VOID_OFFSET, offset_as_json
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import plural

# Reading more log files than this to count a skipped range's files is not worth a plan's time.
MAX_LOG_FILES_COUNTED = 50


class SkipRefused(Exception):
    """A source skip the checkpoint does not allow; the message says why, for the plan."""


def kafka_offsets(offset: str | None) -> dict[str, dict[str, int]] | None:
    """The topic -> partition -> offset map of a Kafka source offset, or None when it is not one."""
    value = offset_as_json(offset)
    if not isinstance(value, dict) or not value:
        return None
    for partitions in value.values():
        if not isinstance(partitions, dict) or not all(
            key.isdigit() and isinstance(number, int) and not isinstance(number, bool)
            for key, number in partitions.items()
        ):
            return None
    return value


def kafka_json(offsets: Mapping[str, Mapping[str, int]]) -> str:
    """Serialize as json4s does (compact, no spaces); keys keep the order given."""
    return json.dumps(offsets, separators=(",", ":"), ensure_ascii=False)


def split_topic_partition(name: str) -> tuple[str, str]:
    """``"<topic>-<p>"`` -> (topic, p): topics may contain '-', the partition is after the last one."""
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        raise SkipRefused(f"{name!r} is not a Kafka topic-partition ('<topic>-<partition number>')")
    return topic, str(int(number))


def kafka_skip_offsets(
    start: str | None, end: str | None, partition: str, to_offset: int
) -> tuple[dict[str, dict[str, int]], int]:
    """The offsets of a batch that reads only ``partition`` from its start to ``to_offset``, and the
    number of offsets skipped. ``start`` is the source's offset in the batch before, ``end`` in this
    batch. Every other partition ends where it starts (partitions new in ``end`` are left out: the
    next batch reads them from their earliest offset, as this batch would have)."""
    before, after = kafka_offsets(start), kafka_offsets(end)
    if before is None or after is None:
        raise SkipRefused("the source's offsets in this batch and the one before are not Kafka offsets JSON")
    topic, number = split_topic_partition(partition)
    first = before.get(topic, {}).get(number)
    if first is None:
        raise SkipRefused(
            f"{partition} has no offset in the batch before (a partition new in this batch starts at its "
            "earliest offset, which the checkpoint does not record)"
        )
    if to_offset <= first:
        raise SkipRefused(
            f"to_offset {to_offset} is not after {partition}'s start {first}: a skip only moves a start forward"
        )
    rewritten = {t: {p: before[t][p] for p in parts if p in before.get(t, {})} for t, parts in after.items()}
    rewritten = {t: parts for t, parts in rewritten.items() if parts}
    rewritten.setdefault(topic, {})[number] = to_offset
    return rewritten, to_offset - first


def file_log_offset(offset: str | None) -> int | None:
    """``L`` of a file source offset (``{"logOffset":L}`` or a bare number), else None."""
    value = offset_as_json(offset)
    if isinstance(value, dict) and set(value) == {"logOffset"}:
        value = value["logOffset"]
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def source_log_file(storage: CheckpointStorage, source: int, log_batch: int) -> tuple[str, int] | None:
    """The path and size of batch ``log_batch`` of ``sources/<source>/`` (``L`` or ``L.compact``)."""
    directory = f"sources/{source}"
    info = log_batch_files(storage.list_dir(directory)).get(log_batch)
    return (f"{directory}/{info.name}", info.size) if info is not None else None


def read_log_batch_entries(storage: CheckpointStorage, source: int, log_batch: int) -> tuple[FileEntry, ...]:
    """The entries logged for ``log_batch`` (a compaction file also repeats earlier batches': left out)."""
    found = source_log_file(storage, source, log_batch)
    if found is None:
        raise SkipRefused(f"sources/{source}/{log_batch} does not exist")
    entries = parse_source_log_file(storage.read_bytes(found[0]), source=found[0])
    return tuple(e for e in entries if e.batch_id == log_batch)


def describe_source_range(storage: CheckpointStorage, source: int, start: str | None, end: str | None) -> str:
    """Say what a batch reads from one source between offsets ``start`` (exclusive) and ``end``."""
    kafka_end, kafka_start = kafka_offsets(end), kafka_offsets(start) or {}
    if kafka_end is not None:
        return _describe_kafka(kafka_start, kafka_end)
    first, last = file_log_offset(start), file_log_offset(end)
    if last is not None:
        return _describe_files(storage, source, -1 if first is None else first, last)
    return f"offsets after {start or SERIALIZED_VOID_OFFSET} up to {end or SERIALIZED_VOID_OFFSET}"


def _describe_kafka(start: Mapping[str, Mapping[str, int]], end: Mapping[str, Mapping[str, int]]) -> str:
    ranges, total, unknown = [], 0, []
    for topic, partitions in end.items():
        for number, stop in partitions.items():
            begin = start.get(topic, {}).get(number)
            if begin is None:
                unknown.append(f"{topic}-{number}")
                continue
            total += max(stop - begin, 0)
            ranges.append(f"{topic}-{number} [{begin}, {stop})")
    text = f"Kafka offsets {', '.join(ranges) or 'none'}: up to {plural(total, 'record')}"
    if unknown:
        text += f"; from the earliest offset of {', '.join(unknown)} (new partitions)"
    return text + " (fewer where offsets are transaction markers or were compacted away)"


def _describe_files(storage: CheckpointStorage, source: int, first: int, last: int) -> str:
    batches = range(first + 1, last + 1)
    if len(batches) > MAX_LOG_FILES_COUNTED:
        return f"the files of sources/{source} log batches {first + 1} to {last}"
    try:
        names = [entry.path for b in batches for entry in read_log_batch_entries(storage, source, b)]
    except (CheckpointError, SkipRefused) as exc:
        return f"the files of sources/{source} log batches {first + 1} to {last} (not readable: {exc})"
    shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    return f"{plural(len(names), 'file')} of sources/{source} (log batch {first + 1}–{last}): {shown}"


def rewrite_offset_lines(data: bytes, lines: Mapping[int, str], *, source: str) -> bytes:
    """``offsets/N`` with the lines of the sources in ``lines`` (index -> offset text) replaced.

    Only v1 files (one line per source after the metadata line); the other bytes stay as written.
    """
    parts = data.split(b"\n")
    if parts[0].strip() != b"v1":
        raise SkipRefused(f"{source} is not an offset log v1 file; only v1 offsets are rewritten")
    for index, text in lines.items():
        if index + 2 >= len(parts):
            raise SkipRefused(f"{source} has no line for source {index}")
        parts[index + 2] = text.encode("utf-8")
    return b"\n".join(parts)


def source_log_bytes(lines: Sequence[str]) -> bytes:
    """A FileStreamSourceLog file: ``v1`` and one JSON entry per line, no trailing newline."""
    return "\n".join(("v1", *lines)).encode("utf-8")


def source_log_lines(data: bytes, *, source: str) -> list[tuple[FileEntry, str]]:
    """Each entry of a source log file with its line exactly as written (escapes kept)."""
    entries = parse_source_log_file(data, source=source)
    lines = [line for line in data.decode("utf-8").split("\n")[1:] if line.strip()]
    if len(lines) != len(entries):
        raise SkipRefused(f"{source}: {len(lines)} entry lines but {len(entries)} entries")
    return list(zip(entries, lines, strict=True))


def with_batch_id(line: str, batch_id: int, *, source: str) -> str:
    """An entry line with its ``batchId`` (the last field FileEntry writes) set to ``batch_id``;
    the path keeps Spark's own escaping."""
    key = '"batchId":'
    at = line.rfind(key)
    end = line.rfind("}")
    if at < 0 or end < at:
        raise SkipRefused(f"{source}: an entry line without batchId: {line[:80]}")
    return f"{line[: at + len(key)]}{batch_id}{line[end:]}"


def same_file(logged: str, named: str) -> bool:
    """Whether a logged path (a URI such as ``file:///in/a.json``) is the file a request names
    (the URI, or the path without its ``file:`` scheme)."""
    return logged == named or _without_file_scheme(logged) == _without_file_scheme(named)


def _without_file_scheme(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path
