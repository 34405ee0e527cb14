from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Registered so that Celery's autodiscover finds workers.tasks."""

    name = "workers"
