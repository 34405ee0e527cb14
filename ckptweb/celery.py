"""The Celery app: configured from Django settings (CELERY_* names), tasks found in workers.tasks."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")

app = Celery("ckptweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
