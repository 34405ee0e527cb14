"""The status facts compiled once (dashboards/models/precompiled.py, status_rows.py) against the ORM's
own evaluation of the same querysets, on a spread of checkpoints whose every annotation differs:
a copy and its original, an archived one, open and resolved findings and issues, finished and
running syncs, an idle run, progress past a copy's head. Both legs run these (SQLite's converters
turn its text back into datetimes and UUIDs)."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta

import pytest
from django.db import connection, connections
from django.db.models.sql.compiler import SQLCompiler
from django.urls import reverse
from django.utils import timezone

from dashboards.models import BatchProgress, Checkpoint, Finding, QueryRun, StreamingQuery, SyncIssue, SyncRun
from dashboards.models.precompiled import ARGUMENT_SENTINEL, CompiledQuery, PrecompiledValues
from dashboards.models.status_rows import (
    PROGRESS_OWNER_OF_ONE,
    STATUS_FACTS_OF_ONE,
    annotated_checkpoint,
    status_list_rows,
)
from factories import make_checkpoint

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)
ERROR, WARNING = Finding.Severity.ERROR, Finding.Severity.WARNING


@pytest.fixture
def spread() -> list[Checkpoint]:
    query = StreamingQuery.objects.create(query_id=uuid.uuid5(uuid.NAMESPACE_DNS, "precompiled"), name="orders_q")
    BatchProgress.objects.bulk_create(
        BatchProgress(
            query=query, batch_id=batch, timestamp=NOW - timedelta(seconds=60 - batch), num_input_rows=batch * 10
        )
        for batch in range(12)
    )
    QueryRun.objects.create(query=query, run_id=uuid.uuid4(), last_batch_id=11, last_idle_at=NOW)
    original = _checkpoint("original", query, latest_batch_id=11)
    copy = _checkpoint("copy", query, latest_batch_id=5)
    alone = _checkpoint("alone", None, latest_batch_id=None)
    archived = _checkpoint("archived", None, latest_batch_id=3)
    Checkpoint.objects.filter(pk=archived.pk).update(archived_at=NOW)
    for code, severity, resolved in (("a", ERROR, None), ("b", WARNING, None), ("c", ERROR, NOW)):
        Finding.objects.create(checkpoint=copy, code=code, severity=severity, message="m", resolved_at=resolved)
    SyncIssue.objects.create(checkpoint=original, path="offsets/3", error_type="CorruptFile", reason="cut short")
    SyncRun.objects.create(checkpoint=original, started_at=NOW, finished_at=NOW, status=SyncRun.Status.PARTIAL)
    SyncRun.objects.create(checkpoint=original, started_at=NOW + timedelta(seconds=1))  # still running
    SyncRun.objects.create(checkpoint=copy, started_at=NOW, finished_at=NOW, status="failed", message="no such dir")
    return [original, copy, alone, archived]


def _checkpoint(name: str, query: StreamingQuery | None, *, latest_batch_id: int | None) -> Checkpoint:
    checkpoint = make_checkpoint(name=name, url=f"/nowhere/{name}", query=query)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        latest_batch_id=latest_batch_id, latest_committed_batch_id=latest_batch_id, last_synced_at=NOW
    )
    return checkpoint


def test_the_list_rows_equal_the_orm_rows(spread):
    expected = list(Checkpoint.objects.status_list_rows())

    rows = status_list_rows()

    assert rows == expected
    assert len(rows) == 3  # the archived one is not listed
    by_name = {row["name"]: row for row in rows}
    assert by_name["copy"]["copy_of_id"] == spread[0].pk and by_name["copy"]["finding_error_count"] == 1
    assert by_name["original"]["open_issue_count"] == 1 and by_name["original"]["last_sync_status"] == "partial"
    assert isinstance(by_name["original"]["query_uuid"], uuid.UUID)


def test_the_list_rows_datetimes_are_the_orm_s_to_their_time_zone(spread, monkeypatch):
    """On PostgreSQL they are read by psycopg's loader instead of Django's (read_timestamps_in_c); the
    cached pages' versions are digests of their repr, so the tzinfo must be the very same too."""
    django_loads = []
    if connection.vendor == "postgresql":
        from django.db.backends.postgresql.psycopg_any import BaseTzLoader

        load = BaseTzLoader.load
        monkeypatch.setattr(BaseTzLoader, "load", lambda self, data: django_loads.append(data) or load(self, data))

    rows = status_list_rows()

    assert django_loads == []  # no value went through Django's Python loader
    expected = list(Checkpoint.objects.status_list_rows())
    assert len(django_loads) > 0 or connection.vendor != "postgresql"  # the ORM's values() still do
    assert repr(rows) == repr(expected)
    assert any(isinstance(value, datetime) for value in rows[0].values())


def test_the_list_rows_follow_the_store_after_they_were_compiled(spread):
    status_list_rows()  # compiled now
    SyncIssue.objects.create(checkpoint=spread[2], path="", error_type="NotFound", reason="gone")
    Checkpoint.objects.filter(pk=spread[1].pk).update(name="renamed")

    rows = {row["id"]: row for row in status_list_rows()}

    assert rows[spread[2].pk]["open_issue_count"] == 1
    assert rows[spread[1].pk]["name"] == "renamed"
    assert list(rows.values()) == list(Checkpoint.objects.status_list_rows())


@pytest.mark.parametrize(
    ("annotations", "annotate"),
    [(STATUS_FACTS_OF_ONE, "with_status_facts"), (PROGRESS_OWNER_OF_ONE, "with_progress_owner")],
)
def test_one_checkpoint_carries_the_annotations_the_orm_gives_it(spread, annotations, annotate):
    names = list(getattr(Checkpoint.objects, annotate)().query.annotations)
    for checkpoint in spread:  # each in turn: the compiled SQL takes each id
        expected = getattr(Checkpoint.objects.select_related("query"), annotate)().get(pk=checkpoint.pk)

        got = annotated_checkpoint(checkpoint.pk, annotations)

        assert {name: getattr(got, name) for name in names} == {name: getattr(expected, name) for name in names}
        assert _fields(got) == _fields(expected)
        assert (got.query is None) == (expected.query is None)
        if expected.query is not None:
            assert _fields(got.query) == _fields(expected.query)
        assert not got._state.adding and got._state.db == "default"  # as fetched: a save() updates it


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_a_checkpoint_without_a_query_has_none(spread):
    lone = make_checkpoint(name="lone", url="/nowhere/lone")

    got = annotated_checkpoint(lone.pk, STATUS_FACTS_OF_ONE)

    assert got.query_id is None and got.query is None and _fields(got) == _fields(Checkpoint.objects.get(pk=lone.pk))


def test_the_status_facts_of_a_copy_are_the_copy_s(spread):
    copy = annotated_checkpoint(spread[1].pk, STATUS_FACTS_OF_ONE)

    assert (copy.copy_of_name, copy.copy_of_batch_id, copy.progress_ceiling) == ("original", 11, 5)
    assert (copy.finding_error_count, copy.finding_warning_count) == (1, 1)
    assert (copy.last_sync_status, copy.last_sync_message) == ("failed", "no such dir")


def test_no_checkpoint_of_that_id_is_none(spread):
    assert annotated_checkpoint(max(c.pk for c in spread) + 1, STATUS_FACTS_OF_ONE) is None


def test_the_sql_is_compiled_once_per_thread(spread, monkeypatch):
    compiled = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(1) or as_sql(self, *a, **k))
    precompiled = PrecompiledValues(lambda: Checkpoint.objects.status_list_rows(), takes_argument=False)

    first = precompiled.rows()
    compiled_in_this_thread = len(compiled)  # the statement and its subqueries, each an as_sql
    second = precompiled.rows()
    compiled_after_the_second = len(compiled)
    other_thread = threading.Thread(target=_compile_in_this_thread, args=(precompiled,))
    other_thread.start()
    other_thread.join()

    assert compiled_in_this_thread >= 1
    assert compiled_after_the_second == compiled_in_this_thread
    assert len(compiled) > compiled_in_this_thread  # the other thread compiled its own
    assert precompiled._compiled_for("default").compiler.connection is connections["default"]
    assert first == second == list(Checkpoint.objects.status_list_rows())


def _compile_in_this_thread(precompiled: PrecompiledValues) -> None:
    try:
        precompiled._compiled_for("default")
    finally:
        connections.close_all()  # this thread's own connection, if compiling opened one


def test_an_argument_that_is_not_in_the_compiled_sql_once_is_refused():
    no_argument = Checkpoint.objects.filter(name="x").values("pk")
    twice = Checkpoint.objects.filter(pk=ARGUMENT_SENTINEL, latest_batch_id=ARGUMENT_SENTINEL).values("pk")

    for queryset in (no_argument, twice):
        with pytest.raises(ValueError, match="the argument appears"):
            CompiledQuery(queryset, takes_argument=True)


def test_the_query_page_and_its_health_panel_show_a_copy_as_a_copy(viewer_client, spread):
    for name in ("dashboards:checkpoint-detail", "dashboards:checkpoint-health-panel"):
        response = viewer_client.get(reverse(name, args=[spread[1].pk]))

        assert response.status_code == 200
        assert "this is a copy of it taken at batch 5" in response.content.decode()
    missing = reverse("dashboards:checkpoint-detail", args=[max(c.pk for c in spread) + 1])
    assert viewer_client.get(missing).status_code == 404
