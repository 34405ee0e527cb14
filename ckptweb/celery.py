"""The Celery app: configured from Django settings (CELERY_* names), tasks found in workers.tasks."""

import os

from celery import Celery
from celery.signals import task_prerun

from .filesystem_broker import register_scheme

register_scheme()  # the embedded default's broker URL, ckptwebfs://
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")

app = Celery("ckptweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
def forget_logged_queries(**_) -> None:
    """Empty Django's query log, as Django does at the start of each request (request_started).

    With DEBUG on (the demo's default) every query is logged on its connection, up to 9,000; a
    worker serves no requests, so without this each pool child kept its last 9,000 queries for
    good: about 8 MB each, a sync being 25 queries of 9 KB of SQL (issue 28).
    """
    from django.db import reset_queries

    reset_queries()
