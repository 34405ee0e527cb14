"""The Celery app: configured from Django settings (CELERY_* names), tasks found in workers.tasks."""

import os

from celery import Celery

from .filesystem_broker import register_scheme

register_scheme()  # the embedded default's broker URL, ckptwebfs://
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")

app = Celery("ckptweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
