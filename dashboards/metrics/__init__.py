"""Prometheus /metrics: a custom collector over the store (dashboards.models), never storage.

docs/metrics.md lists every family. ``metrics`` is the view; ``REGISTRY`` holds the collector.
"""

from dashboards.metrics.collector import REGISTRY, CkptwebCollector, build_registry
from dashboards.metrics.views import metrics

__all__ = ["REGISTRY", "CkptwebCollector", "build_registry", "metrics"]
