"""The health model's families: each checkpoint's status and every condition that holds.

One query (CheckpointQuerySet.status_list_rows, the list page's: plain rows, no model instances,
its SQL compiled once per process: status_rows.status_list_rows) and
dashboards.health.query_status.assess at scrape time, so a graph, an alert and the pages say the
same. Each family has one sample per checkpoint and state, 1 or 0, as kube-state-metrics does for
a pod's phase: a state that stops holding drops to 0 instead of vanishing, so alerts resolve.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.utils import timezone

from dashboards.health.query_status import State, Thresholds, assess
from dashboards.metrics.families import CheckpointLabels, add, gauge, seconds
from dashboards.models.status_facts import status_facts_of
from dashboards.models.status_rows import status_list_rows


def status_families(labels: CheckpointLabels) -> Iterator:
    status = gauge(
        "checkpoint_status",
        "1 for the checkpoint's health status (the first condition that holds), 0 for the others.",
        ("state",),
    )
    condition = gauge(
        "checkpoint_condition",
        "1 for every health condition that holds (the status and what the list shows as 'also').",
        ("state",),
    )
    since = gauge(
        "checkpoint_status_since_timestamp_seconds",
        "Since when the status holds (Unix seconds), where the model knows.",
    )
    now, thresholds = timezone.now(), Thresholds.from_settings(settings)
    for row in status_list_rows():
        assessed = assess(status_facts_of(row), now=now, thresholds=thresholds)
        holding = {held.state for held in assessed.conditions}
        for state in State:
            add(status, labels, row["id"], int(state is assessed.state), state.slug)
            add(condition, labels, row["id"], int(state in holding), state.slug)
        add(since, labels, row["id"], seconds(assessed.since))
    yield from (status, condition, since)
