"""Prometheus /metrics: a custom collector over the store (dashboards.models), never storage.

docs/metrics.md lists every family. ``metrics`` is the view; ``REGISTRY`` holds the collector.
"""

from .collector import REGISTRY, CkptwebCollector, build_registry
from .views import metrics

__all__ = ["REGISTRY", "CkptwebCollector", "build_registry", "metrics"]
