"""The /metrics collector: every family, from a fixed number of database queries per scrape.

Queries per scrape, whatever the number of batches, runs or partitions: 1 checkpoints (with
correlated subqueries), 2 last sync runs, 3 sync totals, 4 newest progress, 5 its state
operators, 6 state stores, 7 compactible logs, 8 inventory, 9 findings, 10 maintenance runs,
11 beat, 12 event-log directories, 13 the health model's figures (status.py, the list's
query), 14 the newest progress' source lags (lag.py). The broker is asked once, with a
timeout. Nothing reads checkpoint storage.

A family group is one function ``(rows, labels) -> Iterator[Metric]`` (or fewer arguments) with
its own fixed queries, called from ``collect`` (maintenance.py is the smallest example).
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from prometheus_client.registry import Collector, CollectorRegistry

from dashboards.metrics.checkpoints import checkpoint_families, checkpoint_labels, read_checkpoints
from dashboards.metrics.health import (
    finding_families,
    inventory_families,
    metadata_log_families,
    state_store_families,
    state_variable_families,
)
from dashboards.metrics.lag import source_lag_families
from dashboards.metrics.maintenance import maintenance_families
from dashboards.metrics.progress import progress_families
from dashboards.metrics.services import beat_families, broker_families, event_log_families
from dashboards.metrics.status import status_families
from dashboards.metrics.syncs import sync_families


class CkptwebCollector(Collector):
    """Reads the store on every scrape; keeps no state between scrapes."""

    def collect(self) -> Iterator:
        per_operator = settings.METRICS_PER_OPERATOR
        rows = read_checkpoints()
        labels = checkpoint_labels(rows)
        yield from checkpoint_families(rows, labels)
        yield from status_families(labels)
        yield from sync_families(rows, labels)
        yield from progress_families(rows, labels, per_operator=per_operator)
        yield from source_lag_families(rows, labels)
        yield from state_store_families(labels, per_operator=per_operator)
        yield from state_variable_families(labels)
        yield from metadata_log_families(labels)
        yield from inventory_families(labels)
        yield from finding_families(labels)
        yield from maintenance_families(labels)
        yield from beat_families()
        yield from event_log_families()
        yield from broker_families()


def build_registry() -> CollectorRegistry:
    """A registry holding only the ckptweb collector (no process or platform collectors).

    auto_describe stays off, so registering does not run a scrape (and no query at import).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CkptwebCollector())
    return registry


REGISTRY = build_registry()
