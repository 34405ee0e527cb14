"""The status facts as the pages read them, compiled once per thread (dashboards/models/precompiled.py).

STATUS_LIST_ROWS: the list's and /metrics' rows (CheckpointQuerySet.status_list_rows).
STATUS_FACTS_OF_ONE, PROGRESS_OWNER_OF_ONE: the annotations of one checkpoint (with_status_facts,
with_progress_owner), which annotated_checkpoint puts on its instance.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from dashboards.models.core import Checkpoint, CheckpointQuerySet
from dashboards.models.precompiled import PrecompiledValues

STATUS_LIST_ROWS = PrecompiledValues(lambda: Checkpoint.objects.status_list_rows(), takes_argument=False)


def _annotations_of_one(annotate: Callable[[CheckpointQuerySet], CheckpointQuerySet]) -> Callable[[int], QuerySet]:
    """A builder of the values() of every annotation ``annotate`` adds, for the checkpoint of one id."""

    def build(checkpoint_id: int) -> QuerySet:
        annotated = annotate(Checkpoint.objects.filter(pk=checkpoint_id))
        return annotated.values(*annotated.query.annotations)

    return build


STATUS_FACTS_OF_ONE = PrecompiledValues(_annotations_of_one(CheckpointQuerySet.with_status_facts))
PROGRESS_OWNER_OF_ONE = PrecompiledValues(_annotations_of_one(CheckpointQuerySet.with_progress_owner))


def annotated_checkpoint(checkpoint_id: int, annotations: PrecompiledValues) -> Checkpoint | None:
    """The checkpoint (with its query) carrying the annotations of ``annotations``, as if fetched
    from the annotated queryset; None when there is none of that id."""
    checkpoint = Checkpoint.objects.select_related("query").filter(pk=checkpoint_id).first()
    rows = annotations.rows(checkpoint_id) if checkpoint is not None else []
    if not rows:  # none, or removed between the two reads
        return None
    for name, value in rows[0].items():
        setattr(checkpoint, name, value)
    return checkpoint


def status_list_rows() -> list[dict]:
    """CheckpointQuerySet.status_list_rows's rows, compiled once."""
    return STATUS_LIST_ROWS.rows()
