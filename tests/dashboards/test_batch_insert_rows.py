"""BatchQuerySet.insert_rows (the sync's executemany path) stores what Django's bulk_create stores."""

from __future__ import annotations

import pytest

from dashboards.models import Batch
from factories import make_checkpoint

pytestmark = pytest.mark.django_db

SHARED_CONF = {"spark.sql.shuffle.partitions": "200", "spark.sql.streaming.stateStore.providerClass": "x"}


def _rows(checkpoint_id: int) -> list[dict]:
    """Rows that exercise the adapter: a conf repeated, then changed and back, JSON nulls and Unicode."""
    confs = [SHARED_CONF, dict(SHARED_CONF), {"spark.sql.shuffle.partitions": "8"}, SHARED_CONF, {}]
    rows = []
    for batch_id, conf in enumerate(confs):
        row = {
            "checkpoint_id": checkpoint_id,
            "batch_id": batch_id,
            "offset_log_version": 1 + batch_id % 2,
            "timestamp_ms": 1_700_000_000_000 + batch_id,
            "watermark_ms": batch_id * 1000,
            "conf": conf,
            "sources": [f'{{"topic":{{"0":{batch_id}}}}}', None, "\u00e9t\u00e9"],
            "source_ids": None if batch_id % 2 == 0 else ["0", "1", "2"],
        }
        if batch_id < 3:
            row.update(is_committed=True, commit_log_version=1, next_batch_watermark_ms=batch_id, commit_metadata=None)
        if batch_id == 1:
            row["commit_metadata"] = {"stateUniqueIds": {"0": ["a", "b"]}}
        rows.append(row)
    return rows


_COMPARED = [
    "batch_id",
    "offset_log_version",
    "timestamp_ms",
    "watermark_ms",
    "conf",
    "sources",
    "source_ids",
    "is_committed",
    "commit_log_version",
    "next_batch_watermark_ms",
    "commit_metadata",
]


def _stored(checkpoint) -> list[tuple]:
    return list(Batch.objects.filter(checkpoint=checkpoint).order_by("batch_id").values_list(*_COMPARED))


def test_insert_rows_stores_the_same_values_as_bulk_create():
    ours, django = make_checkpoint(name="ours", url="/a"), make_checkpoint(name="django", url="/b")

    inserted = Batch.objects.insert_rows(_rows(ours.pk), batch_size=2)
    Batch.objects.bulk_create(Batch(**row) for row in _rows(django.pk))

    assert inserted == 5
    assert _stored(ours) == _stored(django)
    assert [row[4] for row in _stored(ours)] == [
        SHARED_CONF,
        SHARED_CONF,
        {"spark.sql.shuffle.partitions": "8"},
        SHARED_CONF,
        {},
    ]


def test_insert_rows_fills_the_columns_a_row_leaves_out_with_the_field_defaults():
    checkpoint = make_checkpoint(url="/c")
    row = {key: value for key, value in _rows(checkpoint.pk)[4].items()}

    Batch.objects.insert_rows([row])

    batch = Batch.objects.get(checkpoint=checkpoint)
    assert (batch.is_committed, batch.commit_log_version, batch.commit_metadata) == (False, None, None)
    assert batch.synced_at is not None
