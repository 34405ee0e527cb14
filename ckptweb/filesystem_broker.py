"""The embedded default's Celery broker: kombu's filesystem transport with atomic messages.

kombu's filesystem transport (5.7) creates a message file, then writes it; a consumer that lists
the folder between the two reads an empty or half-written file, and ``json.loads`` raises inside
the worker's event loop: ``Unrecoverable error: JSONDecodeError``, and the worker exits. Its
exchange tables (the routing the web process and beat read on every send) have the same window
when they are first created. This transport closes both windows:

* a message is written under a hidden name (``.<name>.tmp``, which no queue matches) and renamed
  to its ``<time>_<uuid>.<queue>.msg`` name only once complete, so a consumer never sees a partial
  message: ``rename`` within one folder is atomic on POSIX filesystems;
* a consumer claims a message by renaming it out of the queue folder before reading it, so two
  consumers never both take it; a message that is not JSON (left by the stock transport, or
  damaged on disk) is moved aside to ``rejected/`` with an error naming the file, and the
  consumer goes on to the next;
* an exchange table is rewritten whole under a lock file and renamed into place, so a reader
  sees the old table or the new one, never an empty file.

Every folder must be on one filesystem (settings derive them all from CKPTWEB_BROKER_DIR).
Redis stays the broker for anything beyond one machine. The transport has a URL scheme of its own,
``ckptwebfs://``, registered with kombu by ``register_scheme()`` (ckptweb/celery.py calls it), so
that the broker URL alone says which transport every connection uses.
"""

from __future__ import annotations

import fcntl
import logging
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from time import monotonic_ns

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

REJECTED_FOLDER = "rejected"
SCHEME = "ckptwebfs"


def register_scheme() -> None:
    """Let kombu open ``ckptwebfs://`` URLs with this transport (idempotent)."""
    TRANSPORT_ALIASES.setdefault(SCHEME, f"{__name__}:Transport")


class Channel(filesystem.Channel):
    """kombu's filesystem channel with atomic writes of messages and exchange tables."""

    def _put(self, queue, payload, **kwargs) -> None:
        # Zero-padded so that the names sort in the order they were sent (the consumer reads them
        # sorted); CLOCK_MONOTONIC is one clock for every process on the machine.
        name = f"{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        try:
            write_atomically(Path(self.data_folder_out), name, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"cannot add message {name!r} to {self.data_folder_out}") from exc

    def _get(self, queue):
        suffix = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != suffix:
                continue
            claimed = self._claim(name)
            if claimed is None:
                continue  # another consumer took it first
            payload = self._read_claimed(claimed)
            if payload is not None:
                return payload
        raise virtual.Empty()

    def _claim(self, name: str) -> Path | None:
        """Move a message out of the queue folder; None when it is already gone."""
        claimed = Path(self.processed_folder) / name
        try:
            os.rename(Path(self.data_folder_in) / name, claimed)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ChannelError(f"cannot take message {name!r} from {self.data_folder_in}: {exc}") from exc
        return claimed

    def _read_claimed(self, claimed: Path):
        """The message in a claimed file, which is then deleted (or kept when store_processed)."""
        try:
            body = claimed.read_bytes()
        except OSError as exc:
            raise ChannelError(f"cannot read message {claimed}: {exc}") from exc
        try:
            payload = loads(body.decode())
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            self._reject(claimed, f"not a JSON message ({len(body)} bytes): {exc}")
            return None
        if not self.store_processed:
            claimed.unlink(missing_ok=True)
        return payload

    def _reject(self, claimed: Path, reason: str) -> None:
        rejected = Path(self.processed_folder).parent / REJECTED_FOLDER
        rejected.mkdir(exist_ok=True)
        os.replace(claimed, rejected / claimed.name)
        logger.error("broker message %s skipped and moved to %s: %s", claimed.name, rejected, reason)

    def get_table(self, exchange):
        file = self._exchange_file(exchange)
        try:
            return _parse_table(file.read_bytes(), file)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"cannot open {file}") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue) -> None:
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_for_update(exchange) as table:
            if binding not in table:
                table.insert(0, binding)

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs) -> None:
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_for_update(exchange) as table:
            while binding in table:
                table.remove(binding)

    @contextmanager
    def _table_for_update(self, exchange):
        """Yield the exchange's table as a list to change; it is written back whole, atomically."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        try:
            with _locked(file.with_name(f".{file.name}.lock")):
                table = self.get_table(exchange)
                before = list(table)
                yield table
                if table != before:
                    write_atomically(file.parent, file.name, dumps(table).encode())
        except OSError as exc:
            raise ChannelError(f"cannot update {file}: {exc}") from exc


class Transport(filesystem.Transport):
    """The filesystem transport, with the channel above.

    kombu keeps the declared exchanges and bindings of a virtual transport in memory, in one state
    per transport class; here one per control folder, so that a process talking to two embedded
    brokers (the tests do) does not skip declaring a binding in the second because it declared it
    in the first.
    """

    Channel = Channel
    states_by_control_folder: dict[str, virtual.BrokerState] = {}

    def __init__(self, client, **kwargs) -> None:
        super().__init__(client, **kwargs)
        folder = str(client.transport_options.get("control_folder", "control"))
        self.state = self.states_by_control_folder.setdefault(folder, virtual.BrokerState())


def write_atomically(folder: Path, name: str, body: bytes) -> None:
    """Write ``folder/name`` so that no reader of the folder sees it before it is complete."""
    hidden = folder / f".{name}.tmp"
    try:
        with open(hidden, "wb") as file:
            file.write(body)
        os.replace(hidden, folder / name)
    except BaseException:
        hidden.unlink(missing_ok=True)
        raise


def _parse_table(body: bytes, file: Path) -> list:
    try:
        return [filesystem.exchange_queue_t(*row) for row in loads(body.decode())]
    except (ValueError, TypeError) as exc:
        # An empty table left by the stock transport's create-then-write: the bindings are
        # declared again by every worker that starts, so it is rebuilt rather than fatal.
        logger.error("broker exchange table %s is not a JSON list of bindings (%s); read as empty", file, exc)
        return []


@contextmanager
def _locked(lock_file: Path):
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
