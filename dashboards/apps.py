from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    name = "dashboards"
    verbose_name = "Checkpoint dashboards"

    def ready(self) -> None:
        from dashboards import audit  # noqa: F401  (connects the failed-login receiver)
        from dashboards.permission_cache import connect_receivers

        connect_receivers()
