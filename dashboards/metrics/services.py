"""Families of the services around the checkpoints: the Celery broker, celery beat, event-log tailing.

None of these carries checkpoint labels. The broker is asked with a short timeout; when it does
not answer, ``ckptweb_broker_up`` is 0 and the queue length is absent, and the scrape still works.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Max
from django_celery_beat.models import PeriodicTask
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from dashboards.metrics.broker import find_queue_lengths, task_queue_names
from dashboards.metrics.families import PREFIX, seconds
from dashboards.models import EventLogDirectory

BROKER_TIMEOUT_SECONDS = 1.0


def broker_families() -> Iterator:
    lengths = find_queue_lengths(task_queue_names(), timeout_seconds=BROKER_TIMEOUT_SECONDS)
    up = GaugeMetricFamily(PREFIX + "broker_up", "1 if the Celery broker answered this scrape within 1 s, else 0.")
    up.add_metric([], 0 if lengths is None else 1)
    messages = GaugeMetricFamily(
        PREFIX + "broker_queue_messages",
        "Task messages waiting in each Celery queue (absent when the broker is down).",
        labels=["queue"],
    )
    for queue, length in (lengths or {}).items():
        messages.add_metric([queue], length)
    yield from (up, messages)


def beat_families() -> Iterator:
    """When celery beat last sent a scheduled task, as its database scheduler recorded it."""
    last = PeriodicTask.objects.aggregate(last=Max("last_run_at"))["last"]
    family = GaugeMetricFamily(
        PREFIX + "beat_last_run_timestamp_seconds",
        "Newest last_run_at of celery beat's periodic tasks (Unix seconds). "
        "Beat writes it every few minutes, not on every send.",
    )
    if last is not None:
        family.add_metric([], seconds(last))
    yield family


def event_log_families() -> Iterator:
    """Per registered event-log directory (a handful, named by the admin)."""
    labels = ["directory"]
    tailed = GaugeMetricFamily(
        PREFIX + "event_log_last_tail_timestamp_seconds",
        "When the directory was last tailed (Unix seconds).",
        labels=labels,
    )
    events = CounterMetricFamily(
        PREFIX + "event_log_progress_events_read",
        "Progress events read from the directory's event logs.",
        labels=labels,
    )
    errors = GaugeMetricFamily(
        PREFIX + "event_log_errors", "Event logs of the directory whose last tail failed.", labels=labels
    )
    for directory in EventLogDirectory.objects.order_by("name").values(
        "name", "last_tailed_at", "progress_events_read", "errors"
    ):
        if directory["last_tailed_at"] is not None:
            tailed.add_metric([directory["name"]], seconds(directory["last_tailed_at"]))
        events.add_metric([directory["name"]], directory["progress_events_read"])
        errors.add_metric([directory["name"]], len(directory["errors"]))
    yield from (tailed, events, errors)
