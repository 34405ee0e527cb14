"""The Celery broker, as /metrics sees it: how many task messages wait in each queue.

The one place the web process opens a broker connection for reading. It asks the transport
Celery is configured with (Redis, or the embedded filesystem transport) through kombu, with a
short timeout, and answers None instead of raising when the broker cannot be reached.
"""

from __future__ import annotations

import logging

from django.conf import settings
from kombu import Connection
from kombu.exceptions import KombuError

logger = logging.getLogger(__name__)

DEFAULT_QUEUE = "celery"


def task_queue_names() -> list[str]:
    """Every queue the workers consume (settings.CELERY_TASK_QUEUES), the default one first."""
    default = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", DEFAULT_QUEUE)
    declared = [queue.name for queue in getattr(settings, "CELERY_TASK_QUEUES", [])]
    return list(dict.fromkeys([default, *declared]))


def find_queue_lengths(queues: list[str], *, timeout_seconds: float) -> dict[str, int] | None:
    """Return the messages waiting in each queue, or None when the broker does not answer in time."""
    connection = _fail_fast_connection(timeout_seconds)
    try:
        with connection:
            return _message_counts(connection, queues, timeout_seconds=timeout_seconds)
    except (KombuError, *connection.connection_errors, *connection.channel_errors, OSError) as exc:
        logger.warning("broker %s did not answer for /metrics: %s", connection.as_uri(), exc)
        return None


def _message_counts(connection: Connection, queues: list[str], *, timeout_seconds: float) -> dict[str, int]:
    connection.ensure_connection(max_retries=0, timeout=timeout_seconds)
    # A non-passive declare never fails on a queue nobody has used yet (an empty Redis
    # list does not exist); on kombu's virtual transports it creates nothing on the broker.
    channel = connection.default_channel
    return {queue: channel.queue_declare(queue=queue, passive=False).message_count for queue in queues}


def _fail_fast_connection(timeout_seconds: float) -> Connection:
    """A connection to the configured broker that gives up after ``timeout_seconds``, without retries."""
    options = {
        **getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
        # Redis: fail fast instead of kombu's retry loop; other transports ignore these keys.
        "socket_connect_timeout": timeout_seconds,
        "socket_timeout": timeout_seconds,
        "max_retries": 0,
    }
    return Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout_seconds, transport_options=options)
