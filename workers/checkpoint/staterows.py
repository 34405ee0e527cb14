"""Rows and bytes of an HDFS-backed state store at a version, without a JVM.

Spark loads version V as the latest snapshot at or below V plus every later delta up to V
(HDFSBackedStateStoreProvider.loadMap; the files come from stateinventory.files_for_version).
Here the files are read one at a time and only sizes are kept where possible:

1. the deltas, oldest first, fill ``changes``: key -> the value's size, or REMOVED;
2. the snapshot comes last: a record whose key is in ``changes`` is overridden by a later
   delta, every other record counts as it is. With no later delta, the snapshot is counted
   without materialising a single key.

So memory holds the keys touched since the snapshot, never the snapshot's keys. Files are read
as runs of records with equal sizes (statefiles.find_record_run): a run's keys are cut by
struct and applied with one dict call, and a snapshot run untouched by deltas counts as n rows
without cutting anything. Where sizes change from record to record (string keys), records are
read as value runs (statefiles.match_value_run): records that share a value size (or are all
removals) whatever their key sizes, found and cut by regular expressions and applied with one
dict call as well. The first record of every run gets every check of
statefiles.iter_state_records, so damaged files raise its errors. Whatever the path, the result
equals replaying iter_state_records into a dict, as loadMap does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, filterfalse, repeat
from operator import countOf

from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefiles import (
    RecordRun,
    count_value_run,
    cut_value_run_keys,
    find_record_run,
    iter_run_keys,
    match_value_run,
    peek_key_size,
    record_stride,
    scan_records,
)
from .stateinventory import HdfsStateFile, StateStoreDir, files_for_version, parse_hdfs_state_files
from .storage.checkpointstorage import CheckpointStorage

REMOVED = -1
# Runs of equal sizes shorter than this are read as value runs instead, up to SCAN_BYTES of
# records at a time before looking for a run of equal sizes again.
MIN_BULK_RECORDS = 8
SCAN_BYTES = 1 << 16
# Value runs (one value size, any key size) shorter than this many records are read record by
# record instead: a regular-expression step costs about as much as that.
MIN_VALUE_RUN_RECORDS = 16
# A value run's patterns have one alternative per key size: at most this many.
MAX_VALUE_RUN_KEY_SIZES = 64


@dataclass(frozen=True, slots=True)
class StateSize:
    """Rows of a state store version and the UnsafeRow bytes of their keys and values.

    Value bytes are what Spark's UnsafeRow points to: without the row checksum, and floored to
    a multiple of 8 as the reader does.
    """

    rows: int
    key_bytes: int
    value_bytes: int

    def __add__(self, other: StateSize) -> StateSize:
        return StateSize(self.rows + other.rows, self.key_bytes + other.key_bytes, self.value_bytes + other.value_bytes)


def read_state_size(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None = "lz4",
    row_checksum: bool = False,
    max_bytes: int = MAX_STATE_FILE_BYTES,
) -> StateSize:
    """Return the size of ``store``'s state at ``version`` (0: the empty state before batch 0).

    Raises MissingFileError when a needed file is missing, and the errors of the codec and
    record readers for damaged files.
    """
    if version == 0:
        return StateSize(0, 0, 0)
    state_files, _ = parse_hdfs_state_files(store.files)
    chain = files_for_version(state_files, version, source=store.path)

    def load(state_file: HdfsStateFile) -> tuple[str, bytes]:
        source = f"{store.path}/{state_file.name}"
        data = storage.read_bytes(source, max_bytes=max_bytes)
        return source, decompress_state_file(data, source=source, codec=codec, max_bytes=max_bytes)

    return measure_state(chain, load, row_checksum=row_checksum)


def measure_state(
    chain: Sequence[HdfsStateFile],
    load: Callable[[HdfsStateFile], tuple[str, bytes]],
    *,
    row_checksum: bool = False,
) -> StateSize:
    """Replay the ``chain`` (snapshot first, as files_for_version gives it) and size the result.

    ``load`` returns a file's source name and decompressed content; it is called once per file,
    deltas first and the snapshot last, so one file's content is in memory at a time.
    """
    has_snapshot = bool(chain) and chain[0].is_snapshot
    deltas = chain[1:] if has_snapshot else chain
    changes: dict[bytes, int] = {}
    for delta in deltas:
        source, raw = load(delta)
        apply_delta(raw, source, changes, row_checksum=row_checksum, keep_removals=has_snapshot)
    total = live_size(changes)
    if has_snapshot:
        source, raw = load(chain[0])
        total = total + count_snapshot(raw, source, changes, row_checksum=row_checksum)
    return total


def live_size(changes: dict[bytes, int]) -> StateSize:
    """Size the keys of ``changes`` that are not REMOVED (C-level loops: no per-key bytecode)."""
    values = changes.values()
    if REMOVED not in values:
        return StateSize(len(changes), sum(map(len, changes)), sum(values))
    is_live = list(map(REMOVED.__ne__, values))
    return StateSize(countOf(is_live, True), sum(map(len, compress(changes, is_live))), sum(compress(values, is_live)))


def apply_delta(
    raw: bytes, source: str, changes: dict[bytes, int], *, row_checksum: bool = False, keep_removals: bool = True
) -> None:
    """Record every put (key -> floored value size) and removal of a delta in ``changes``, in order.

    ``keep_removals=False`` (no snapshot underneath) forgets removed keys instead of keeping
    them as REMOVED. A run of records of one kind (puts of one value size, or removals) is
    applied at once; stretches without long runs record by record.
    """
    pos, key_sizes = 0, set()
    while (run := find_record_run(raw, pos, source=source, row_checksum=row_checksum)) is not None:
        taken = _run_keys(raw, run, key_sizes, row_checksum=row_checksum)
        if taken is None:
            pos = _scan_changes(raw, pos, changes, row_checksum=row_checksum, keep_removals=keep_removals)
            continue
        keys, pos = taken
        _apply_run(changes, run, keys, row_checksum=row_checksum, keep_removals=keep_removals)


def _scan_changes(raw: bytes, pos: int, changes: dict[bytes, int], *, row_checksum: bool, keep_removals: bool) -> int:
    """Record the records from ``pos`` one by one (up to SCAN_BYTES) in ``changes``; return where they end.

    scan_records always reads the first record: find_record_run has checked it.
    """
    return scan_records(
        raw, pos, changes, row_checksum=row_checksum, forget_removals=not keep_removals, max_bytes=SCAN_BYTES
    )


def _run_keys(
    raw: bytes, run: RecordRun, key_sizes: set[int], *, row_checksum: bool
) -> tuple[Iterable[bytes], int] | None:
    """The keys taken at once from where ``run`` starts, and where they end: the run's own when it is
    long, else those of the value run it starts; None when neither (the records are read one by one)."""
    if run.count >= MIN_BULK_RECORDS:
        return iter_run_keys(raw, run, row_checksum=row_checksum), run.end
    end = find_value_run(raw, run, key_sizes, row_checksum=row_checksum)
    if end is None:
        return None
    return cut_value_run_keys(raw, run.start, end, frozenset(key_sizes), run.value_size, row_checksum=row_checksum), end


def _apply_run(
    changes: dict[bytes, int], run: RecordRun, keys: Iterable[bytes], *, row_checksum: bool, keep_removals: bool
) -> None:
    """Record the ``keys`` of a run of puts (their value size) or of removals in ``changes``."""
    if not run.is_removal:
        changes.update(zip(keys, repeat(run.value_row_size(row_checksum))))
    elif keep_removals:
        changes.update(zip(keys, repeat(REMOVED)))
    else:
        deque(map(changes.pop, keys, repeat(None)), maxlen=0)


def count_snapshot(raw: bytes, source: str, changes: dict[bytes, int], *, row_checksum: bool = False) -> StateSize:
    """Size the records of a snapshot whose keys are not in ``changes``.

    With ``changes`` empty no key is cut out of a run: n records count at once.
    Spark writes a snapshot from its map, so each key is in it once.
    """
    total = StateSize(0, 0, 0)
    pos, key_sizes = 0, set()
    while run := find_record_run(raw, pos, source=source, row_checksum=row_checksum, removals_allowed=False):
        sized = _size_run(raw, run, key_sizes, changes, row_checksum=row_checksum)
        size, pos = sized or _size_scanned(raw, pos, changes, row_checksum=row_checksum)
        total = total + size
    return total


def _size_scanned(raw: bytes, pos: int, changes: dict[bytes, int], *, row_checksum: bool) -> tuple[StateSize, int]:
    """The size of the snapshot records from ``pos``, read one by one (up to SCAN_BYTES), whose keys are
    not in ``changes``, and where they end.

    scan_records always reads the first record: find_record_run has checked it.
    """
    scanned: dict[bytes, int] = {}
    end = scan_records(raw, pos, scanned, row_checksum=row_checksum, removals_allowed=False, max_bytes=SCAN_BYTES)
    return _size_records(scanned, changes), end


def _size_run(
    raw: bytes, run: RecordRun, key_sizes: set[int], changes: dict[bytes, int], *, row_checksum: bool
) -> tuple[StateSize, int] | None:
    """The size of the snapshot records taken at once from where ``run`` starts (those whose keys are not
    in ``changes``), and where they end: the run when it is long, else the value run it starts; None
    when neither (the records are read one by one)."""
    if run.count >= MIN_BULK_RECORDS:
        return _size_bulk_run(raw, run, changes, row_checksum=row_checksum), run.end
    end = find_value_run(raw, run, key_sizes, row_checksum=row_checksum)
    if end is None:
        return None
    return _size_value_run(raw, run, end, frozenset(key_sizes), changes, row_checksum=row_checksum), end


def _size_bulk_run(raw: bytes, run: RecordRun, changes: dict[bytes, int], *, row_checksum: bool) -> StateSize:
    """The size of the records of a long run of a snapshot whose keys are not in ``changes``."""
    live = run.count
    if changes:
        live -= countOf(map(changes.__contains__, iter_run_keys(raw, run, row_checksum=row_checksum)), True)
    return StateSize(live, live * run.key_size, live * run.value_row_size(row_checksum))


def find_value_run(raw: bytes, run: RecordRun, key_sizes: set[int], *, row_checksum: bool = False) -> int | None:
    """Return where the value run that starts with ``run`` ends, or None if it is too short.

    A value run is the records with run's value size (or removals), whatever their key sizes,
    within SCAN_BYTES: statefiles.match_value_run finds it for the key sizes in ``key_sizes``
    (the caller's set of key sizes seen in the file), which grows as new ones are met. Runs of
    fewer than MIN_VALUE_RUN_RECORDS records, and files with more than MAX_VALUE_RUN_KEY_SIZES
    key sizes, are read record by record.
    """
    key_sizes.add(run.key_size)
    if len(key_sizes) > MAX_VALUE_RUN_KEY_SIZES:
        return None
    endpos, end = min(len(raw), run.start + SCAN_BYTES), run.start
    while True:
        end = match_value_run(raw, end, endpos, frozenset(key_sizes), run.value_size, row_checksum=row_checksum)
        key_size = peek_key_size(raw, end, endpos, run.value_size)
        if key_size is None or key_size in key_sizes or len(key_sizes) == MAX_VALUE_RUN_KEY_SIZES:
            break
        key_sizes.add(key_size)
    return end if end - run.start >= MIN_VALUE_RUN_RECORDS * run.stride else None


def _size_value_run(
    raw: bytes, run: RecordRun, end: int, key_sizes: frozenset[int], changes: dict[bytes, int], *, row_checksum: bool
) -> StateSize:
    """Size the records of a snapshot's value run whose keys are not in ``changes``: with no
    changes, without cutting a key (key bytes are what the records hold besides the rest)."""
    value_size = run.value_row_size(row_checksum)
    if not changes:
        count = count_value_run(raw, run.start, end, key_sizes, run.value_size, row_checksum=row_checksum)
        return StateSize(count, end - run.start - count * record_stride(0, run.value_size), count * value_size)
    keys = cut_value_run_keys(raw, run.start, end, key_sizes, run.value_size, row_checksum=row_checksum)
    live = list(filterfalse(changes.__contains__, keys))
    return StateSize(len(live), sum(map(len, live)), len(live) * value_size)


def _size_records(scanned: dict[bytes, int], changes: dict[bytes, int]) -> StateSize:
    """Size the scanned snapshot records whose keys are not in ``changes``."""
    if changes:
        scanned = {key: size for key, size in scanned.items() if key not in changes}
    return StateSize(len(scanned), sum(map(len, scanned)), sum(scanned.values()))
