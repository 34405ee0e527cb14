"""The read API (/api/v1/): authentication, keyset paging, the freshness envelope and catch-up syncs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from dashboards.models import (
    Batch,
    BatchProgress,
    Checkpoint,
    Finding,
    MaintenanceRun,
    StatePartition,
    SyncRun,
)
from factories import make_checkpoint
from fixture_paths import KILLED_MID_BATCH
from url_catalogue import all_url_names, reverse_with_ids
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

READ_API_URL_NAMES = {
    "api-checkpoint-list",
    "api-checkpoint-detail",
    "api-batch-list",
    "api-progress-list",
    "api-state-partition-list",
    "api-metadata-log-list",
    "api-finding-list",
    "api-maintenance-run-list",
}
SCHEMA_PATHS = {
    "/api/v1/checkpoints/",
    "/api/v1/checkpoints/{checkpoint_id}/",
    "/api/v1/checkpoints/{checkpoint_id}/batches/",
    "/api/v1/checkpoints/{checkpoint_id}/progress/",
    "/api/v1/checkpoints/{checkpoint_id}/state-partitions/",
    "/api/v1/checkpoints/{checkpoint_id}/metadata-logs/",
    "/api/v1/checkpoints/{checkpoint_id}/findings/",
    "/api/v1/checkpoints/{checkpoint_id}/maintenance-runs/",
}


@pytest.fixture
def token_headers(viewer_user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=viewer_user).key}"}


def make_batches(checkpoint: Checkpoint, batch_ids: list[int], *, committed_below: int) -> None:
    """Batch rows as a sync stores them, with the checkpoint's figures a sync would set."""
    Batch.objects.bulk_create(
        Batch(
            checkpoint=checkpoint,
            batch_id=batch_id,
            offset_log_version=1,
            timestamp_ms=1_000 * batch_id,
            watermark_ms=0,
            is_committed=batch_id < committed_below,
        )
        for batch_id in batch_ids
    )
    checkpoint.latest_batch_id = max(batch_ids)
    checkpoint.latest_committed_batch_id = max(batch_id for batch_id in batch_ids if batch_id < committed_below)
    checkpoint.save(update_fields=["latest_batch_id", "latest_committed_batch_id"])


@pytest.fixture
def with_batches() -> Checkpoint:
    checkpoint = make_checkpoint(name="orders", url="/nowhere/orders")
    make_batches(checkpoint, list(range(0, 50, 2)), committed_below=48)
    return checkpoint


def write_next_offsets_entry(checkpoint: Checkpoint) -> None:
    """Write offsets/7 as Spark would start batch 7: a copy of batch 6's entry (they carry no batch id)."""
    (Path(checkpoint.url) / "offsets" / "7").write_bytes(
        (KILLED_MID_BATCH / "checkpoint" / "offsets" / "6").read_bytes()
    )


def batch_ids_of(answer: dict) -> list[int]:
    return [row["batch_id"] for row in answer["results"]]


def test_every_read_endpoint_refuses_anonymous_callers_with_401(client, with_batches):
    names = {name for name in all_url_names() if name in READ_API_URL_NAMES}
    assert names == READ_API_URL_NAMES

    answers = {name: client.get(reverse_with_ids(name, with_batches.pk)) for name in sorted(names)}

    assert {name: (a.status_code, a["WWW-Authenticate"]) for name, a in answers.items()} == {
        name: (401, "Token") for name in names
    }


def test_every_read_endpoint_answers_a_token_with_the_latest_batch_and_signature(client, with_batches, token_headers):
    for name in sorted(READ_API_URL_NAMES - {"api-checkpoint-list"}):
        answer = client.get(reverse_with_ids(name, with_batches.pk), **token_headers)
        body = answer.json()
        assert answer.status_code == 200, name
        assert (body["latest_batch_id"], body["latest_committed_batch_id"], body["current"]) == (48, 46, True), name
        assert answer["X-Ckptweb-Latest-Batch"] == "48", name
        assert answer["X-Ckptweb-Signature"] == body["signature"] and len(body["signature"]) == 32, name


def test_a_signed_in_browser_session_may_read_too(viewer_client, with_batches):
    answer = viewer_client.get(reverse("api-checkpoint-list"))
    assert [row["name"] for row in answer.json()["results"]] == ["orders"]


def test_the_checkpoint_list_finds_a_checkpoint_by_its_url(client, with_batches, token_headers):
    make_checkpoint(name="payments", url="/nowhere/payments")
    answer = client.get(reverse("api-checkpoint-list"), {"url": "/nowhere/payments"}, **token_headers).json()
    assert [row["name"] for row in answer["results"]] == ["payments"]


def test_the_checkpoint_list_comes_in_pages_that_next_walks_once_each_in_id_order(client, with_batches, token_headers):
    for number in range(6):
        make_checkpoint(name=f"extra-{number}", url=f"/nowhere/extra-{number}")
    url, seen, pages = reverse("api-checkpoint-list") + "?limit=3", [], 0
    while url:
        answer = client.get(url, **token_headers).json()
        seen += [row["id"] for row in answer["results"]]
        url, pages = answer["next"], pages + 1

    assert seen == sorted(Checkpoint.objects.values_list("pk", flat=True)) and len(seen) == 7
    assert pages == 3


def test_the_checkpoint_list_makes_as_many_queries_for_120_checkpoints_as_for_one(client, with_batches, token_headers):
    url = reverse("api-checkpoint-list")
    client.get(url, **token_headers)
    with CaptureQueriesContext(connection) as one:
        assert len(client.get(url, **token_headers).json()["results"]) == 1
    Checkpoint.objects.bulk_create(Checkpoint(name=f"q{n:03d}", url=f"/nowhere/q{n:03d}") for n in range(120))
    with CaptureQueriesContext(connection) as many:
        answer = client.get(url, **token_headers).json()

    assert (len(answer["results"]), answer["next"].endswith(f"?after={answer['results'][-1]['id']}")) == (100, True)
    assert len(many) == len(one)


# An empty value was taken as no parameter (DRF's form convention), and a NUL in the URL reached
# PostgreSQL: both found by the schema test.
@pytest.mark.parametrize(
    "query", [{"limit": 1001}, {"limit": 0}, {"after": "x"}, {"after": ""}, {"url": ""}, {"url": "/a\x00b"}]
)
def test_bad_paging_parameters_of_the_checkpoint_list_are_refused_with_400(client, token_headers, query):
    assert client.get(reverse("api-checkpoint-list"), query, **token_headers).status_code == 400


def test_following_next_walks_every_batch_exactly_once_in_order(client, with_batches, token_headers):
    url, seen, pages = reverse("api-batch-list", args=[with_batches.pk]) + "?limit=7", [], 0
    while url:
        answer = client.get(url, **token_headers).json()
        seen += batch_ids_of(answer)
        url, pages = answer["next"], pages + 1

    assert seen == list(range(0, 50, 2))
    assert pages == 4  # 25 rows, 7 a page


def test_pages_are_read_by_key_never_by_offset(client, with_batches, token_headers):
    url = reverse("api-batch-list", args=[with_batches.pk])
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(url, {"after": 30, "limit": 3}, **token_headers).json()

    assert batch_ids_of(answer) == [32, 34, 36]
    batch_queries = [q["sql"] for q in queries.captured_queries if "dashboards_batch" in q["sql"]]
    # The SQL keyword, not the offset_log_version column.
    assert batch_queries and not any(re.search(r"\bOFFSET\s", sql, re.IGNORECASE) for sql in batch_queries)


def test_a_range_returns_the_batches_from_to_inclusive(client, with_batches, token_headers):
    answer = client.get(
        reverse("api-batch-list", args=[with_batches.pk]), {"from": 10, "to": 20}, **token_headers
    ).json()
    assert (batch_ids_of(answer), answer["next"]) == ([10, 12, 14, 16, 18, 20], None)


@pytest.mark.parametrize(
    "query",
    [
        {"limit": 1001},
        {"limit": 0},
        {"after": "x"},
        {"from": "ten"},
        {"known_latest_batch": -1},
        {"from": ""},
        {"to": ""},
        {"known_latest_batch": ""},
    ],
)
def test_bad_paging_parameters_are_refused_with_400(client, with_batches, token_headers, query):
    answer = client.get(reverse("api-batch-list", args=[with_batches.pk]), query, **token_headers)
    assert answer.status_code == 400
    assert list(answer.json()) == list(query)


def test_a_url_under_api_that_matches_no_route_is_a_json_404(client, token_headers):
    # Found by the schema test: a checkpoint id that is not a number got the HTML 404 page.
    answer = client.get("/api/v1/checkpoints/null/batches/", **token_headers)
    assert (answer.status_code, answer["Content-Type"], answer.json()) == (
        404,
        "application/json",
        {"detail": "Not found."},
    )


def test_an_unknown_checkpoint_is_404(client, token_headers):
    assert client.get(reverse("api-batch-list", args=[987654]), **token_headers).status_code == 404


def test_the_signature_changes_when_a_sync_stores_a_new_batch_and_not_when_it_finds_nothing(
    client, killed_synced, token_headers
):
    url = reverse("api-checkpoint-detail", args=[killed_synced.pk])
    before = client.get(url, **token_headers).json()["signature"]
    sync_checkpoint(killed_synced.pk, now=timezone.now() + timezone.timedelta(seconds=1))
    unchanged = client.get(url, **token_headers).json()["signature"]
    write_next_offsets_entry(killed_synced)
    sync_checkpoint(killed_synced.pk, now=timezone.now() + timezone.timedelta(seconds=2))
    after = client.get(url, **token_headers).json()

    assert unchanged == before
    assert after["signature"] != before and after["latest_batch_id"] == 7


def test_a_client_knowing_a_newer_batch_gets_current_false_and_one_catch_up_stores_it(
    client, killed_synced, token_headers, eager_celery, django_capture_on_commit_callbacks
):
    write_next_offsets_entry(killed_synced)
    runs_before = SyncRun.objects.filter(checkpoint=killed_synced).count()

    with django_capture_on_commit_callbacks(execute=True):
        answer = client.get(
            reverse("api-batch-list", args=[killed_synced.pk]), {"known_latest_batch": 7}, **token_headers
        ).json()

    assert (answer["current"], answer["latest_batch_id"]) == (False, 6)
    assert SyncRun.objects.filter(checkpoint=killed_synced).count() == runs_before + 1
    assert killed_synced.batches.filter(batch_id=7).exists()


def test_repeated_reports_of_a_newer_batch_queue_only_one_catch_up(
    client, killed_synced, token_headers, eager_celery, django_capture_on_commit_callbacks
):
    runs_before = SyncRun.objects.filter(checkpoint=killed_synced).count()
    url = reverse("api-checkpoint-detail", args=[killed_synced.pk])

    with django_capture_on_commit_callbacks(execute=True):
        answers = [client.get(url, {"known_latest_batch": 99}, **token_headers).json() for _ in range(3)]

    assert [answer["current"] for answer in answers] == [False, False, False]
    assert SyncRun.objects.filter(checkpoint=killed_synced).count() == runs_before + 1


def test_no_catch_up_is_queued_while_a_sync_holds_the_lease(
    client, killed_synced, token_headers, eager_celery, django_capture_on_commit_callbacks
):
    Checkpoint.objects.take_sync_lease(killed_synced.pk, owner="another worker", now=timezone.now(), seconds=60)
    runs_before = SyncRun.objects.filter(checkpoint=killed_synced).count()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = client.get(
            reverse("api-checkpoint-detail", args=[killed_synced.pk]), {"known_latest_batch": 99}, **token_headers
        ).json()

    assert (answer["current"], len(callbacks)) == (False, 0)
    assert SyncRun.objects.filter(checkpoint=killed_synced).count() == runs_before


def test_a_known_batch_the_server_has_is_current_and_queues_nothing(
    client, killed_synced, token_headers, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = client.get(
            reverse("api-checkpoint-detail", args=[killed_synced.pk]), {"known_latest_batch": 6}, **token_headers
        ).json()
    assert (answer["current"], len(callbacks)) == (True, 0)


def test_progress_pages_by_batch_id_give_what_spark_reported(client, killed_synced, token_headers):
    report = json.loads((KILLED_MID_BATCH / "spark-report.json").read_text())
    for event in report["progress"]:
        BatchProgress.objects.store(
            progress_from_dict(event, source="spark-report.json"), origin=BatchProgress.Origin.LISTENER
        )
    url, rows = reverse("api-progress-list", args=[killed_synced.pk]) + "?limit=2", []
    while url:
        answer = client.get(url, **token_headers).json()
        rows += answer["results"]
        url = answer["next"]

    expected = sorted((event["batchId"], event["numInputRows"], event["runId"]) for event in report["progress"])
    assert [(row["batch_id"], row["num_input_rows"], row["run_id"]) for row in rows] == expected


def test_open_findings_leave_out_resolved_ones(client, with_batches, token_headers):
    common = {"checkpoint": with_batches, "severity": Finding.Severity.ERROR, "message": "m"}
    Finding.objects.create(code="missing-commit", path="commits/3", **common)
    Finding.objects.create(code="orphan", path="offsets/1", resolved_at=timezone.now(), **common)

    answer = client.get(reverse("api-finding-list", args=[with_batches.pk]), **token_headers).json()

    assert [(row["code"], row["severity"]) for row in answer["results"]] == [("missing-commit", "error")]


def test_maintenance_runs_show_the_plan_summary_without_its_file_lists(client, with_batches, token_headers):
    plan = {
        "summary": "delete 2 files",
        "writes": [],
        "bytes_freed": 30,
        "bytes_written": 0,
        "deletes": [
            {"path": "offsets/0", "size": 10, "reason": "old"},
            {"path": "offsets/1", "size": 20, "reason": "old"},
        ],
    }
    MaintenanceRun.objects.create(
        checkpoint=with_batches, action="purge", status=MaintenanceRun.Status.PLANNED, plan=plan
    )

    row = client.get(reverse("api-maintenance-run-list", args=[with_batches.pk]), **token_headers).json()["results"][0]

    assert row["plan_summary"] == {
        "summary": "delete 2 files",
        "writes": 0,
        "deletes": 2,
        "bytes_freed": 30,
        "bytes_written": 0,
    }
    assert "offsets/0" not in str(row)


def test_the_schema_documents_every_read_endpoint(viewer_client):
    schema = viewer_client.get(reverse("api-schema"), {"format": "json"}).json()
    assert SCHEMA_PATHS <= set(schema["paths"])
    parameters = {
        p["name"] for p in schema["paths"]["/api/v1/checkpoints/{checkpoint_id}/batches/"]["get"]["parameters"]
    }
    assert {"after", "limit", "from", "to", "known_latest_batch"} <= parameters
    listing = schema["paths"]["/api/v1/checkpoints/"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"after", "limit", "url"}
    assert set(schema["components"]["schemas"]["CheckpointList"]["properties"]) == {"results", "next"}


def test_state_partitions_give_the_oldest_version_on_storage_and_the_schema_says_what_it_is(
    client, viewer_client, with_batches, token_headers
):
    StatePartition.objects.create(
        checkpoint=with_batches,
        operator=0,
        partition=3,
        store="default",
        provider="hdfs",
        path="state/0/3",
        latest_version=48,
        earliest_version=29,
        snapshot_version=40,
    )
    url = reverse("api-state-partition-list", args=[with_batches.pk])
    (row,) = client.get(url, **token_headers).json()["results"]
    assert (row["partition"], row["latest_version"], row["earliest_version"]) == (3, 48, 29)

    schema = viewer_client.get(reverse("api-schema"), {"format": "json"}).json()
    described = schema["components"]["schemas"]["StatePartition"]["properties"]["earliest_version"]
    assert described["description"] == "Oldest version with a file on storage (Spark's maintenance deletes older ones)."
    assert described["type"] == "integer" and described["nullable"] is True
