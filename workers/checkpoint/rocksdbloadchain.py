"""Which files of a RocksDB store load version V: the zip, then the changelogs replayed on top.

Loading version V (RocksDB.load): format 1 takes the newest ``<s>.zip`` with s <= V (none: the
empty version 0) and replays changelogs s+1..V; format 2 takes ``V_<id>.zip`` if present, else
the newest zip named in the lineage of ``V_<id>.changelog`` and replays the lineage's changelogs.
A zip also needs every SST and log file its metadata lists.

Pure over a store's files, so the integrity check, the cleanup and the readers agree on one answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .commits import CommitMetadata
from .rocksdbchangelog import LineageItem
from .rocksdbfiles import RocksDBStoreFiles, RocksDBVersionFile


@dataclass(frozen=True, slots=True)
class RocksDBLoadChain:
    """The zip and changelogs that rebuild one version, in load order, and why it cannot load.

    ``snapshot`` None means the load starts from the empty version 0.
    """

    version: int
    unique_id: str | None
    snapshot: RocksDBVersionFile | None
    changelogs: tuple[RocksDBVersionFile, ...]
    problems: tuple[str, ...]

    @property
    def is_loadable(self) -> bool:
        return not self.problems


def resolve_load_chain(
    files: RocksDBStoreFiles, version: int, *, unique_id: str | None = None, lineage: Iterable[LineageItem] = ()
) -> RocksDBLoadChain:
    """Return the files RocksDB.load uses for ``version``, with what is missing among them.

    Format 1 (``unique_id`` None): the newest format-1 zip at or below ``version``, then every
    changelog after it. Format 2: ``<version>_<unique_id>.zip`` if present, else the newest zip
    named in ``lineage`` (read by the caller from ``<version>_<unique_id>.changelog``) and the
    changelogs after it; without such a zip the lineage must reach back to version 1.
    """
    if version < 0:
        raise ValueError(f"a state version is >= 0, not {version}")
    if unique_id is None:
        return _format1_chain(files, version)
    return _format2_chain(files, version, unique_id, tuple(lineage))


def _format1_chain(files: RocksDBStoreFiles, version: int) -> RocksDBLoadChain:
    zips = [f for f in files.zips if f.unique_id is None and f.version <= version]
    snapshot = zips[-1] if zips else None
    base = snapshot.version if snapshot else 0
    changelogs = tuple(f for f in files.changelogs if f.unique_id is None and base < f.version <= version)
    return RocksDBLoadChain(version, None, snapshot, changelogs, _missing_changelogs(base, version, changelogs))


def _missing_changelogs(base: int, version: int, changelogs: tuple[RocksDBVersionFile, ...]) -> tuple[str, ...]:
    """Name each run of versions in base+1..version without a changelog (walks the files, not the range)."""
    problems, expected = [], base + 1
    for present in [f.version for f in changelogs] + [version + 1]:
        if present > expected:
            first, last = expected, present - 1
            problems.append(
                f"missing changelog {first}.changelog"
                if first == last
                else f"missing changelogs {first}.changelog to {last}.changelog ({last - first + 1} files)"
            )
        expected = present + 1
    return tuple(problems)


def _format2_chain(
    files: RocksDBStoreFiles, version: int, unique_id: str, lineage: tuple[LineageItem, ...]
) -> RocksDBLoadChain:
    own_zip = files.find("zip", version, unique_id)
    if own_zip is not None or version == 0:
        return RocksDBLoadChain(version, unique_id, own_zip, (), ())
    name = f"{version}_{unique_id}"
    if files.find("changelog", version, unique_id) is None:
        problem = f"missing {name}.changelog (and there is no {name}.zip)"
        return RocksDBLoadChain(version, unique_id, None, (), (problem,))
    items = sorted({*lineage, LineageItem(version, unique_id)}, key=lambda item: item.version)
    zips = [z for item in items[:-1] if (z := files.find("zip", item.version, item.checkpoint_unique_id))]
    snapshot = zips[-1] if zips else None
    base = snapshot.version if snapshot else 0
    after = [item for item in items if item.version > base]
    changelogs, missing = _lineage_changelogs(files, after)
    problems = (*_lineage_gap(name, version, snapshot, after), *missing)
    return RocksDBLoadChain(version, unique_id, snapshot, changelogs, problems)


def _lineage_gap(
    name: str, version: int, snapshot: RocksDBVersionFile | None, after: list[LineageItem]
) -> tuple[str, ...]:
    """The problem when the lineage after the snapshot does not name every version up to ``version``."""
    base = snapshot.version if snapshot else 0
    if len(after) == version - base and all(item.version == base + 1 + n for n, item in enumerate(after)):
        return ()
    where = f"zip {snapshot.name}" if snapshot else "version 0 (the lineage names no zip that exists)"
    return (f"the lineage of {name}.changelog does not cover every version from {where} to {version}",)


def _lineage_changelogs(
    files: RocksDBStoreFiles, after: list[LineageItem]
) -> tuple[tuple[RocksDBVersionFile, ...], tuple[str, ...]]:
    """The changelogs the lineage names, in order, and one problem for each that is missing."""
    changelogs, problems = [], []
    for item in after:
        found = files.find("changelog", item.version, item.checkpoint_unique_id)
        if found is None:
            problems.append(f"missing {item.version}_{item.checkpoint_unique_id}.changelog")
        else:
            changelogs.append(found)
    return tuple(changelogs), tuple(problems)


def state_unique_ids_by_version(
    commits: Mapping[int, CommitMetadata], *, operator: int, partition: int, store_index: int = 0
) -> dict[int, str]:
    """Map state version -> unique id of one store from commit log entries keyed by batch id.

    Batch N commits version N + 1. ``store_index`` is the store's place in the commit log's
    per-partition list (0 for the default store). Format-1 commits give nothing.
    """
    ids = {}
    for batch_id, commit in commits.items():
        partitions = (commit.state_unique_ids or {}).get(operator) or []
        stores = partitions[partition] if partition < len(partitions) else []
        if store_index < len(stores) and stores[store_index]:
            ids[batch_id + 1] = stores[store_index]
    return ids
