"""Sending Celery tasks from a view: a broker that does not answer must not turn into a 500.

What the task is for is stored first (a maintenance run, or nothing for a sync that beat sends
anyway); the message goes out once the transaction commits. When the broker cannot be reached
the user is told so, and celery beat's periodic tasks pick the work up once it is back
(resume-interrupted-maintenance re-sends lost plan and run tasks; syncs are periodic).
"""
from __future__ import annotations

import logging

from celery import Task
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest
from kombu.exceptions import KombuError, OperationalError

logger = logging.getLogger(__name__)

BROKER_ERRORS = (OperationalError, KombuError, OSError)


def enqueue_on_commit(request: HttpRequest, task: Task, *args, what: str) -> None:
    """Send ``task(*args)`` after the current transaction commits; warn the user if the broker is down."""

    def send() -> None:
        try:
            task.apply_async(args=args)
        except BROKER_ERRORS as exc:
            logger.warning("task %s%r not sent: the broker did not answer: %s", task.name, args, exc)
            messages.warning(
                request,
                f"{what} is recorded, but the task broker did not answer ({type(exc).__name__}): "
                "it will be sent again automatically once the broker is back.",
            )

    transaction.on_commit(send)
