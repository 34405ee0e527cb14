"""Sending Celery tasks from the web process: a broker that does not answer must not turn into a 500.

What the task is for is stored first (a maintenance run, a state sample; nothing for a sync that
beat sends anyway); the message goes out once the transaction commits. When the broker cannot be
reached the send is logged and, from a view, the user is told what happens next.

This is the web side's one way to queue work: a task is named (dashboards.task_names) and looked
up in the Celery app's registry, so the web process never imports workers.tasks, and a test that
runs tasks eagerly, or replaces a task's ``apply_async``, sees every send.
"""

from __future__ import annotations

import logging

from celery import Task
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest
from kombu.exceptions import KombuError, OperationalError

from ckptweb.celery import app

logger = logging.getLogger(__name__)

BROKER_ERRORS = (OperationalError, KombuError, OSError)
# What the user reads after "the task broker did not answer", by who sends the work again.
RESENT_BY_BEAT = "it will be sent again automatically once the broker is back."
PERIODIC_SYNC = "the periodic sync runs once the broker is back."
ASK_AGAIN = "ask again once the broker is back."


def _registered_task(task_name: str) -> Task:
    """The task registered as ``task_name``, after Celery's autodiscovery has run in this process.

    autodiscover_tasks() only imports workers.tasks when the app loads its default modules, which a
    worker does at start and the web process does here, on its first send.
    """
    if task_name not in app.tasks:
        app.loader.import_default_modules()
    return app.tasks[task_name]


def send_task(task_name: str, *args) -> Exception | None:
    """Send the task registered as ``task_name`` with ``args`` now; return the broker's error instead of
    raising it (logged). An unknown name raises KeyError: a programming error, not an outage."""
    task = _registered_task(task_name)
    try:
        task.apply_async(args=args)
    except BROKER_ERRORS as exc:
        logger.warning("task %s%r not sent: the broker did not answer: %s", task_name, args, exc)
        return exc
    return None


def enqueue_on_commit(request: HttpRequest, task_name: str, *args, what: str, afterwards: str = RESENT_BY_BEAT) -> None:
    """Send task ``task_name`` with ``args`` after the current transaction commits; warn the user if the
    broker is down."""

    def send() -> None:
        error = send_task(task_name, *args)
        if error is not None:
            messages.warning(
                request,
                f"{what} is recorded, but the task broker did not answer ({type(error).__name__}): {afterwards}",
            )

    transaction.on_commit(send)
