"""POST /api/ingest/progress/: the progress PySpark reported for a fixture query, sent as the listener sends it."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from dashboards.models import BatchProgress, StateOperatorMetrics
from fixture_paths import OUR_FIXTURES
from runtime_expectations import assert_drawn_as_reported

pytestmark = pytest.mark.django_db

URL = "/api/ingest/progress/"
REPORT = json.loads((OUR_FIXTURES / "windowed_agg_file_sink" / "spark-report.json").read_text())
PROGRESS = REPORT["progress"]


def _post(client, body, token: str | None):
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    return client.post(URL, json.dumps(body), content_type="application/json", **headers)


def test_every_progress_of_a_run_is_stored_once_per_batch(client, pipeline_token):
    statuses = [_post(client, {"progress": progress}, pipeline_token).status_code for progress in PROGRESS]

    assert statuses == [201] * len(PROGRESS)
    rows = BatchProgress.objects.for_query(BatchProgress.objects.first().query_id)
    assert [row.batch_id for row in rows] == [progress["batchId"] for progress in PROGRESS]
    assert str(rows[0].query.query_id) == REPORT["query_id"]
    assert rows[0].query.name == "windowed_agg_file_sink"


def test_stored_figures_are_those_spark_reported(client, pipeline_token):
    last = PROGRESS[-1]
    _post(client, {"progress": last}, pipeline_token)

    row = BatchProgress.objects.get(batch_id=last["batchId"])
    assert (row.num_input_rows, row.batch_duration_ms, row.duration_ms) == (
        last["numInputRows"],
        last["batchDuration"],
        last["durationMs"],
    )
    assert row.watermark == datetime.fromisoformat(last["eventTime"]["watermark"])
    assert str(row.run.run_id) == last["runId"]
    [operator] = StateOperatorMetrics.objects.filter(progress=row)
    reported = last["stateOperators"][0]
    assert (operator.operator_name, operator.num_rows_total, operator.memory_used_bytes) == (
        reported["operatorName"],
        reported["numRowsTotal"],
        reported["memoryUsedBytes"],
    )
    assert operator.custom_metrics == reported["customMetrics"]
    hits, misses = (
        reported["customMetrics"]["loadedMapCacheHitCount"],
        reported["customMetrics"]["loadedMapCacheMissCount"],
    )
    assert operator.cache_hit_ratio == hits / (hits + misses)


def test_a_resent_batch_replaces_the_earlier_report(client, pipeline_token):
    first = _post(client, {"progress": PROGRESS[0]}, pipeline_token)
    again = _post(client, {"progress": PROGRESS[0]}, pipeline_token)

    assert (first.status_code, first.json()["created"], again.status_code, again.json()["created"]) == (
        201,
        True,
        200,
        False,
    )
    assert BatchProgress.objects.count() == 1
    assert StateOperatorMetrics.objects.count() == len(PROGRESS[0]["stateOperators"])


def test_anonymous_and_wrong_tokens_get_401(client, pipeline_token):
    assert _post(client, {"progress": PROGRESS[0]}, None).status_code == 401
    assert _post(client, {"progress": PROGRESS[0]}, "not-a-token").status_code == 401
    assert not BatchProgress.objects.exists()


def test_a_user_without_the_ingest_permission_gets_403(client, django_user_model):
    token = Token.objects.create(user=django_user_model.objects.create_user("reader")).key
    assert _post(client, {"progress": PROGRESS[0]}, token).status_code == 403


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "send exactly one of 'progress' and 'idle'"),
        ({"progress": {**PROGRESS[0], "batchId": "seven"}}, "batchId"),
        ({"progress": {key: value for key, value in PROGRESS[0].items() if key != "id"}}, "id"),
        # Found by the schema test: a query id that is no UUID was a 500 when the row was stored.
        ({"progress": {**PROGRESS[0], "id": "orders-query"}}, "'id' is not a UUID: 'orders-query'"),
        (
            {"idle": {"id": PROGRESS[0]["id"], "runId": "run-2", "timestamp": "2031-01-02T03:04:05Z"}},
            "'runId' is not a UUID",
        ),
        ({"progress": {**PROGRESS[0], "timestamp": "0001-01-01T00:00:00+01:00"}}, "outside years 1-9999 in UTC"),
    ],
    ids=[
        "no progress",
        "batch id not a number",
        "no query id",
        "query id not a uuid",
        "run id not a uuid",
        "before year 1",
    ],
)
def test_a_malformed_progress_is_refused_with_the_reason(client, pipeline_token, body, reason):
    response = _post(client, body, pipeline_token)
    assert response.status_code == 400
    assert reason in response.json()["error"]
    assert not BatchProgress.objects.exists()


def test_names_of_any_length_and_offsets_of_any_size_are_stored(client, pipeline_token):
    # Found by the schema test on PostgreSQL: a state operator name over 100 characters and a
    # UTC offset over 15 hours were 500s (the column's length, the database's offset range).
    operator = {**PROGRESS[0]["stateOperators"][0], "operatorName": "o" * 300}
    progress = {
        **PROGRESS[0],
        "name": "q" * 400,
        "timestamp": "2026-11-22T22:49:00+22:49",
        "stateOperators": [operator],
    }

    response = _post(client, {"progress": progress}, pipeline_token)

    assert response.status_code == 201
    row = BatchProgress.objects.get()
    assert (row.query.name, row.state_operators.get().operator_name) == ("q" * 400, "o" * 300)
    assert row.timestamp.isoformat() == "2026-11-22T00:00:00+00:00"


def test_a_body_that_is_not_json_is_refused(client, pipeline_token):
    response = client.post(
        URL,
        "progress=1",
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=f"Token {pipeline_token}",
    )
    assert response.status_code == 415


def test_query_page_charts_the_reported_progress(client, pipeline_token, copy_checkpoint, viewer_user):
    from django.urls import reverse

    from factories import make_checkpoint
    from workers.sync import sync_checkpoint

    checkpoint = make_checkpoint(url=str(copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink") / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    for progress in PROGRESS:
        _post(client, {"progress": progress}, pipeline_token)
    client.force_login(viewer_user)

    assert 'id="runtime-state-memory"' in client.get(checkpoint.get_absolute_url()).content.decode()
    figures = client.get(reverse("dashboards:runtime-charts", args=[checkpoint.pk])).json()
    assert_drawn_as_reported(figures, PROGRESS)


def test_batch_page_shows_the_progress_spark_reported_for_it(client, pipeline_token, copy_checkpoint, viewer_user):
    from factories import make_checkpoint
    from workers.sync import sync_checkpoint

    checkpoint = make_checkpoint(url=str(copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink") / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    last = PROGRESS[-1]
    _post(client, {"progress": last}, pipeline_token)
    client.force_login(viewer_user)

    page = client.get(f"{checkpoint.get_absolute_url()}batches/{last['batchId']}/").content.decode()

    operators = page[page.index('id="batch-state-operators"') :]
    reported = last["stateOperators"][0]
    assert f"<td>{reported['numRowsTotal']}</td>" in operators
    assert f"loadedMapCacheHitCount={reported['customMetrics']['loadedMapCacheHitCount']}" in operators
    assert f"<td>{last['durationMs']['addBatch']} ms</td>" in page[page.index('id="batch-durations"') :]


def test_a_pipeline_beyond_the_ingest_rate_gets_429_and_others_go_on(
    client, pipeline_token, django_user_model, monkeypatch
):
    from django.core.cache import cache
    from rest_framework.throttling import ScopedRateThrottle

    cache.clear()
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"ingest": "3/min"})
    other = django_user_model.objects.create_user("other-pipeline")
    other.user_permissions.add(Permission.objects.get(codename="ingest_progress"))
    other_token = Token.objects.create(user=other).key

    statuses = [_post(client, {"progress": progress}, pipeline_token).status_code for progress in PROGRESS[:4]]
    refused = _post(client, {"progress": PROGRESS[4]}, pipeline_token)

    assert statuses == [201, 201, 201, 429] and refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert BatchProgress.objects.count() == 3
    assert _post(client, {"progress": PROGRESS[4]}, other_token).status_code == 201


def test_an_idle_event_marks_the_run_alive_after_its_last_progress(client, pipeline_token):
    from dashboards.models import QueryRun

    _post(client, {"progress": PROGRESS[-1]}, pipeline_token)
    idle = {"id": PROGRESS[-1]["id"], "runId": PROGRESS[-1]["runId"], "timestamp": "2031-01-02T03:04:05.678Z"}

    response = _post(client, {"idle": idle}, pipeline_token)

    assert response.status_code == 200
    run = QueryRun.objects.get(run_id=PROGRESS[-1]["runId"])
    assert run.last_idle_at.isoformat() == "2031-01-02T03:04:05.678000+00:00"
    assert run.last_batch_id == PROGRESS[-1]["batchId"]


def test_an_idle_event_without_a_run_id_is_refused_with_the_reason(client, pipeline_token):
    response = _post(
        client, {"idle": {"id": PROGRESS[0]["id"], "timestamp": "2031-01-02T03:04:05.678Z"}}, pipeline_token
    )

    assert response.status_code == 400
    assert response.json()["error"].startswith("request body: idle")
    assert "runId" in response.json()["error"]
