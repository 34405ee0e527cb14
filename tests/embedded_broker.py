"""An embedded broker (ckptweb/filesystem_broker.py) in a test's folder, and a publisher to run in
another process. No Django: spawned processes import this module."""

from __future__ import annotations

from pathlib import Path

from kombu import Connection

from ckptweb.filesystem_broker import register_scheme

register_scheme()  # spawned publishers set up no Django, so ckptweb/celery.py has not run
# Messages large enough that writing one takes many times longer than listing the folder, read by a
# consumer that polls without pause: kombu's stock filesystem transport fails this within the first
# few messages ("JSONDecodeError: Expecting value: line 1 column 1 (char 0)", as the demo's worker did).
PAYLOAD_BYTES = 512 * 1024
MESSAGES_PER_PUBLISHER = 60
# The time part of a message name that sorts before every message the transport sends: a test's
# damaged message is then the oldest in the queue, read before the good one sent after it.
OLDEST_NAME = "0" * 20


def broker_options(broker_dir: Path) -> dict:
    """The transport options of an embedded broker in ``broker_dir``, its folders made."""
    folders = {name: broker_dir / name for name in ("queue", "control", "processed")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "control_folder": str(folders["control"]),
        "processed_folder": str(folders["processed"]),
        "store_processed": False,
        "polling_interval": 0,
    }


def connect(broker_dir: Path) -> Connection:
    """A kombu connection to the embedded broker in ``broker_dir``."""
    return Connection("ckptwebfs://", transport_options=broker_options(broker_dir))


def publish(broker_dir: str, publisher: int) -> None:
    """Put MESSAGES_PER_PUBLISHER large messages on the queue "work" (run in a spawned process)."""
    with connect(Path(broker_dir)) as connection:
        queue = connection.SimpleQueue("work")
        for number in range(MESSAGES_PER_PUBLISHER):
            queue.put({"publisher": publisher, "number": number, "filler": "x" * PAYLOAD_BYTES})
        queue.close()
