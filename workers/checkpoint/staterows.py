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
without cutting anything. Stretches where sizes change from record to record (variable-width
keys) are read record by record (statefiles.scan_records). The first record of every run or
scan gets every check of statefiles.iter_state_records, so damaged files raise its errors.
Whatever the path, the result equals replaying iter_state_records into a dict, as loadMap does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import countOf

from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefiles import find_record_run, iter_run_keys, scan_records
from .stateinventory import HdfsStateFile, StateStoreDir, files_for_version, parse_hdfs_state_files
from .storage import CheckpointStorage

REMOVED = -1
# Runs shorter than this are read record by record (a bulk step costs about as much as eight
# records), SCAN_BYTES of records at a time before looking for a run again.
MIN_BULK_RECORDS = 8
SCAN_BYTES = 1 << 16


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
    them as REMOVED. A run of equal-sized records (all puts of one value size, or all removals)
    is applied at once; stretches without long runs record by record.
    """
    pos = 0
    while (run := find_record_run(raw, pos, source=source, row_checksum=row_checksum)) is not None:
        if run.count < MIN_BULK_RECORDS:
            end = scan_records(
                raw, pos, changes, row_checksum=row_checksum, forget_removals=not keep_removals, max_bytes=SCAN_BYTES
            )
            if end > pos:
                pos = end
                continue
        keys = iter_run_keys(raw, run, row_checksum=row_checksum)
        if not run.is_removal:
            changes.update(zip(keys, repeat(run.value_row_size(row_checksum))))
        elif keep_removals:
            changes.update(zip(keys, repeat(REMOVED)))
        else:
            deque(map(changes.pop, keys, repeat(None)), maxlen=0)
        pos = run.end


def count_snapshot(raw: bytes, source: str, changes: dict[bytes, int], *, row_checksum: bool = False) -> StateSize:
    """Size the records of a snapshot whose keys are not in ``changes``.

    With ``changes`` empty no key is cut out of a run: n equal-sized records count at once.
    Spark writes a snapshot from its map, so each key is in it once.
    """
    total = StateSize(0, 0, 0)
    pos = 0
    while (run := find_record_run(raw, pos, source=source, row_checksum=row_checksum, removals_allowed=False)):
        if run.count < MIN_BULK_RECORDS:
            scanned: dict[bytes, int] = {}
            end = scan_records(raw, pos, scanned, row_checksum=row_checksum, removals_allowed=False, max_bytes=SCAN_BYTES)
            if end > pos:
                total = total + _size_records(scanned, changes)
                pos = end
                continue
        live = run.count
        if changes:
            live -= countOf(map(changes.__contains__, iter_run_keys(raw, run, row_checksum=row_checksum)), True)
        total = total + StateSize(live, live * run.key_size, live * run.value_row_size(row_checksum))
        pos = run.end
    return total


def _size_records(scanned: dict[bytes, int], changes: dict[bytes, int]) -> StateSize:
    """Size the scanned snapshot records whose keys are not in ``changes``."""
    if changes:
        scanned = {key: size for key, size in scanned.items() if key not in changes}
    return StateSize(len(scanned), sum(map(len, scanned)), sum(scanned.values()))
