"""The status facts as the pages read them, compiled once per thread (dashboards/models/precompiled.py).

STATUS_LIST_ROWS: the list's and /metrics' rows (CheckpointQuerySet.status_list_rows).
STATUS_FACTS_OF_ONE, PROGRESS_OWNER_OF_ONE: the annotations of one checkpoint (with_status_facts,
with_progress_owner), which annotated_checkpoint puts on its instance.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS
from django.db.models import QuerySet

from dashboards.models.core import Checkpoint, CheckpointQuerySet
from dashboards.models.precompiled import PrecompiledValues
from dashboards.models.queries import StreamingQuery

STATUS_LIST_ROWS = PrecompiledValues(lambda: Checkpoint.objects.status_list_rows(), takes_argument=False)


# One checkpoint's row is its own columns, its query's (what select_related("query") would fetch)
# and the annotations: one compiled statement, where fetching the instance cost a query of its own
# and the ORM's building of it on every page, panel and chart request.
CHECKPOINT_COLUMNS = [field.attname for field in Checkpoint._meta.concrete_fields]
QUERY_COLUMNS = [field.attname for field in StreamingQuery._meta.concrete_fields]
QUERY_PREFIX = "query__"


def _annotations_of_one(annotate: Callable[[CheckpointQuerySet], CheckpointQuerySet]) -> Callable[[int], QuerySet]:
    """A builder of the values() of the checkpoint of one id, its query and every annotation ``annotate`` adds."""

    def build(checkpoint_id: int) -> QuerySet:
        annotated = annotate(Checkpoint.objects.filter(pk=checkpoint_id))
        query_columns = [QUERY_PREFIX + name for name in QUERY_COLUMNS]
        return annotated.values(*CHECKPOINT_COLUMNS, *query_columns, *annotated.query.annotations)

    return build


STATUS_FACTS_OF_ONE = PrecompiledValues(_annotations_of_one(CheckpointQuerySet.with_status_facts))
PROGRESS_OWNER_OF_ONE = PrecompiledValues(_annotations_of_one(CheckpointQuerySet.with_progress_owner))


def annotated_checkpoint(checkpoint_id: int, annotations: PrecompiledValues) -> Checkpoint | None:
    """The checkpoint (with its query) carrying the annotations of ``annotations``, as if fetched
    from the annotated queryset with select_related("query"); None when there is none of that id."""
    rows = annotations.rows(checkpoint_id)
    if not rows:
        return None
    row = rows[0]
    checkpoint = Checkpoint.from_db(
        DEFAULT_DB_ALIAS, CHECKPOINT_COLUMNS, [row.pop(name) for name in CHECKPOINT_COLUMNS]
    )
    query = [row.pop(QUERY_PREFIX + name) for name in QUERY_COLUMNS]
    checkpoint.query = (
        None if checkpoint.query_id is None else StreamingQuery.from_db(DEFAULT_DB_ALIAS, QUERY_COLUMNS, query)
    )
    for name, value in row.items():  # the annotations
        setattr(checkpoint, name, value)
    return checkpoint


def status_list_rows() -> list[dict]:
    """CheckpointQuerySet.status_list_rows's rows, compiled once."""
    return STATUS_LIST_ROWS.rows()
