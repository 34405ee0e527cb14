"""Small explicit factories: defaults filled with setdefault, deterministic values."""


def make_checkpoint(**overrides):
    from dashboards.models import Checkpoint

    overrides.setdefault("name", "orders")
    overrides.setdefault("sync_interval_seconds", 30)
    return Checkpoint.objects.create(**overrides)
