"""What the state maintenance actions (snapshot, cleanup) plan from: listings and the committed range.

One listing per directory of ``offsets/``, ``commits/`` and the ``state/`` tree (with sizes and
modification times), plus the state settings Spark pins in the newest offsets file. From these:

* the newest state version a committed batch wrote: batch N writes version N + 1, and a version
  written by a batch without a commit may be rewritten when Spark runs that batch again;
* the oldest batch still in ``offsets/``: a restart rolled back that far (or the ``statestore``
  reader at that batch) loads its state, so every version from there on must stay loadable.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ..fileinfo import FileInfo
from ..inventory import TreeListing, list_tree
from ..layout import OFFSETS_DIR, parse_batch_id
from ..stateinventory import STATE_DIR, HdfsStateFile, StateStoreDir, list_state_store_dirs
from ..statesummary import StateConf, latest_state_conf
from ..storage.checkpointstorage import CheckpointStorage
from .plan import Precondition, precondition
from .planning import list_batch_logs

# What a state action's plan says when it finds no store to act on.
NO_STATE_STORE = "nothing to do: no state store (the query keeps no state, or the chosen stores do not exist)"


@dataclass(frozen=True, slots=True)
class StateListings:
    """The listings a state maintenance plan needs, taken once."""

    offsets: tuple[FileInfo, ...]
    commits: tuple[FileInfo, ...]
    state: TreeListing

    @property
    def offset_ids(self) -> list[int]:
        return _batch_ids(self.offsets)

    @property
    def commit_ids(self) -> list[int]:
        return _batch_ids(self.commits)

    @property
    def stores(self) -> list[StateStoreDir]:
        return list_state_store_dirs(self.state)  # type: ignore[arg-type]

    def entries(self, store: StateStoreDir) -> dict[str, FileInfo]:
        """The files of a store directory by name, with their modification times."""
        return {info.name: info for info in self.state.list_dir(store.path) if not info.is_dir}


def list_state_listings(storage: CheckpointStorage) -> StateListings:
    """List ``offsets/``, ``commits/`` and every directory below ``state/`` (one LIST each)."""
    return StateListings(*list_batch_logs(storage), list_tree(storage, STATE_DIR))


def read_state_conf(storage: CheckpointStorage, offset_ids: Sequence[int] | None = None) -> StateConf:
    """The codec and row-checksum setting from the newest readable offsets file (Spark's defaults if none).

    ``offset_ids`` saves listing ``offsets/`` again.
    """
    if offset_ids is None:
        offset_ids = _batch_ids(storage.list_dir(OFFSETS_DIR))
    return latest_state_conf(storage, offset_ids)


def _batch_ids(entries: Sequence[FileInfo]) -> list[int]:
    ids = (parse_batch_id(info.name) for info in entries if not info.is_dir)
    return sorted(batch_id for batch_id in ids if batch_id is not None)


def committed_state_version(commit_ids: Sequence[int]) -> int | None:
    """The newest state version a committed batch wrote (latest commit + 1), None without commits."""
    return commit_ids[-1] + 1 if commit_ids else None


def select_stores(
    stores: Sequence[StateStoreDir], paths: Collection[str] | None
) -> tuple[list[StateStoreDir], list[str]]:
    """The stores whose paths (``state/<op>/<part>[/<store>]``) are in ``paths`` (all when None),
    and the requested paths that name no store."""
    if paths is None:
        return list(stores), []
    wanted = set(paths)
    chosen = [store for store in stores if store.path in wanted]
    return chosen, sorted(wanted - {store.path for store in chosen})


def survey_stores(
    stores: Sequence[StateStoreDir], paths: Collection[str] | None, survey: Callable[[StateStoreDir], None]
) -> tuple[list[StateStoreDir], list[str]]:
    """Choose the stores ``paths`` names (``select_stores``) and hand each to ``survey``, the action's
    own look at a store; the chosen stores and the requested paths that name no store."""
    chosen, unknown = select_stores(stores, paths)
    for store in chosen:
        survey(store)
    return chosen, unknown


def stores_parameter(paths: Collection[str] | None) -> list[str] | None:
    """The requested store paths as a plan's parameters record them (sorted; None: every store)."""
    return sorted(paths) if paths is not None else None


def stores_exist(unknown: Sequence[str]) -> Precondition:
    """ "stores-exist": every store path the request names is a state store of the checkpoint."""
    detail = f"no such state store: {', '.join(unknown)}" if unknown else "every requested store exists"
    return precondition("stores-exist", not unknown, detail)


def version_committed(
    committed: int | None, *, none_committed: str, final: str, problem: str | None = None
) -> Precondition:
    """ "version-committed": a batch is committed, so the state versions up to ``committed`` are final.

    The detail is "no batch is committed: " and ``none_committed`` without one, ``problem`` when the
    action found one with the version its request names, else "batch N is committed: " and ``final``.
    """
    if committed is None:
        return precondition("version-committed", False, f"no batch is committed: {none_committed}")
    if problem is not None:
        return precondition("version-committed", False, problem)
    return precondition("version-committed", True, f"batch {committed - 1} is committed: {final}")


def providers_supported(name: str, refused: Sequence[str], why: str, fine: str) -> Precondition:
    """``name``: every chosen store's provider (and format) is one the action handles.

    ``refused`` are the paths of the stores it does not handle; the detail is then ``why`` followed
    by them in parentheses, else ``fine``.
    """
    if refused:
        return precondition(name, False, f"{why} ({', '.join(refused)})")
    return precondition(name, True, fine)


def loadable_versions(state_files: Sequence[HdfsStateFile]) -> set[int]:
    """The versions that files_for_version can rebuild completely, as loadMap would.

    One pass: a version loads if it has a snapshot, or its delta and the version before load
    (version 0 is the empty state).
    """
    by_version = {f.version: f for f in state_files}
    loadable, previous_loads = set(), True
    for version in range(1, max(by_version, default=0) + 1):
        found = by_version.get(version)
        previous_loads = found is not None and (found.is_snapshot or previous_loads)
        if previous_loads:
            loadable.add(version)
    return loadable
