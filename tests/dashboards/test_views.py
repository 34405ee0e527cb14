"""Pages and panels, on the real database, with batches synced from a real Spark checkpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from dashboards.models import Checkpoint
from factories import make_checkpoint
from fixture_paths import SPARK_TEST_RESOURCES
from url_catalogue import all_url_names, reverse_with_ids
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"
PUBLIC_URL_NAMES = {"login", "logout", "health", "metrics", "favicon"}


def test_every_page_but_login_health_and_the_icon_requires_a_signed_in_user(client, synced):
    names = [n for n in all_url_names() if n.split(":")[-1] not in PUBLIC_URL_NAMES]
    assert "dashboards:checkpoint-detail" in names
    for name in names:
        url = reverse_with_ids(name, synced.pk)
        if name.startswith("api-") and name != "api-docs":
            # Machine endpoints answer 401 and name the scheme instead of redirecting to a form.
            is_ingest = name.startswith("api-ingest")
            response = client.post(url, {}, content_type="application/json") if is_ingest else client.get(url)
            assert (response.status_code, response["WWW-Authenticate"]) == (401, "Token"), name
            continue
        response = client.get(url)
        assert response.status_code == 302, name
        assert response["Location"].startswith(reverse("login")), name


def test_health_check_is_public(client):
    assert client.get(reverse("dashboards:health")).json() == {"status": "ok"}


def test_list_shows_each_checkpoint_with_its_health_in_a_fixed_number_of_queries(
    viewer_client, synced, django_assert_num_queries
):
    for name in ("never-synced", "second", "third"):
        make_checkpoint(name=name, url=f"/nowhere/{name}")
    # session (none when sessions are read from the shared cache), user, two permission look-ups
    # for the menu, one for every checkpoint with the health model's figures, one for the trends,
    # one for the state variables of the checkpoints on the page
    session_queries = 0 if settings.SESSION_ENGINE.endswith("cached_db") else 1
    with django_assert_num_queries(session_queries + 6):
        page = viewer_client.get(reverse("dashboards:checkpoint-list")).content.decode()
    assert "inconsistent" in page and "never-synced" in page
    assert "d4358946-170c-49a7-823b-d8e4e9126616" in page
    # Spark's 2018 checkpoint: an integrity error from the full pass, and batch 4 has offsets/4 and no commits/4.
    assert 'data-checkpoint="inconsistent" data-status="damaged"' in page
    assert 'also <span title="batch 4 was planned' in page


def test_query_page_lists_batches_newest_first_and_flags_the_uncommitted_one(viewer_client, synced):
    page = viewer_client.get(synced.get_absolute_url()).content.decode()
    table = page[page.index('id="batch-table"') :]
    assert [table.index(f">{b}</a>") for b in (4, 2, 1, 0)] == sorted(table.index(f">{b}</a>") for b in (4, 2, 1, 0))
    assert 'class="uncommitted"' in table
    assert 'data-chart-url="' + reverse("dashboards:batch-timeline-chart", args=[synced.pk]) in page


def test_timeline_chart_plots_committed_and_uncommitted_batches_at_their_start_time(viewer_client, synced):
    figure = json.loads(viewer_client.get(reverse("dashboards:batch-timeline-chart", args=[synced.pk])).content)
    committed, uncommitted, interval, watermark = figure["data"]
    assert committed["y"] == [0, 1, 2] and uncommitted["y"] == [4]
    # Epoch milliseconds on a date axis (every panel's x axis follows the bottom one).
    assert datetime.fromtimestamp(committed["x"][0] / 1000, UTC).isoformat().startswith("2018-07-11T06:53:49.003")
    assert {figure["layout"][f"xaxis{n}"]["type"] for n in ("", "2", "3")} == {"date"}
    assert interval["y"][0] == pytest.approx(1_002)  # ms: no interval reaches 10 s
    assert interval["customdata"][0] == 1
    assert "Interval since the previous batch (ms)" in [a["text"] for a in figure["layout"]["annotations"]]
    assert watermark["y"] and watermark["y"][0].startswith("1970-01-01T00:00:05")  # batchWatermarkMs 5000
    assert len(watermark["y"]) == 3  # batch 0 has no watermark yet


def test_batch_page_shows_offsets_conf_and_commit(viewer_client, synced):
    page = viewer_client.get(reverse("dashboards:batch-detail", args=[synced.pk, 4])).content.decode()
    assert "offsets/4 has no commits/4" in page
    assert "spark.sql.shuffle.partitions" in page
    assert viewer_client.get(reverse("dashboards:batch-detail", args=[synced.pk, 3])).status_code == 404


def test_viewer_may_not_register_a_checkpoint(viewer_client):
    assert viewer_client.get(reverse("dashboards:checkpoint-create")).status_code == 403


def test_registering_a_checkpoint_outside_the_roots_is_refused_with_the_reason(
    client, operator_user, checkpoint_roots, tmp_path
):
    client.force_login(operator_user)
    data = {
        "name": "escape",
        "url": str(checkpoint_roots / ".." / "other"),
        "is_enabled": "on",
        "sync_interval_seconds": 30,
    }
    response = client.post(reverse("dashboards:checkpoint-create"), data)
    assert response.status_code == 200
    assert "outside" in response.content.decode()
    assert not Checkpoint.objects.exists()


def test_registering_a_checkpoint_schedules_its_sync_and_queues_the_first_one(
    client, operator_user, copy_checkpoint, django_capture_on_commit_callbacks, eager_celery
):
    client.force_login(operator_user)
    data = {"name": "inc", "url": str(copy_checkpoint(INCONSISTENT)), "is_enabled": "on", "sync_interval_seconds": 45}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("dashboards:checkpoint-create"), data)
    checkpoint = Checkpoint.objects.get(name="inc")
    assert response["Location"] == checkpoint.get_absolute_url()
    task = PeriodicTask.objects.get(pk=checkpoint.sync_schedule_id)
    assert (task.task, json.loads(task.args), task.interval.every) == (
        "workers.tasks.sync_checkpoint",
        [checkpoint.pk],
        45,
    )
    assert checkpoint.batches.count() == 4  # the eager first sync ran after the commit


def test_disabling_a_checkpoint_disables_its_schedule(client, operator_user, synced):
    client.force_login(operator_user)
    data = {"name": synced.name, "url": synced.url, "sync_interval_seconds": 30}
    client.post(reverse("dashboards:checkpoint-edit", args=[synced.pk]), data)
    assert PeriodicTask.objects.get(name=f"sync checkpoint {synced.pk}").enabled is False


def test_a_sync_interval_below_the_minimum_is_refused(client, operator_user, checkpoint_roots):
    client.force_login(operator_user)
    data = {"name": "fast", "url": str(checkpoint_roots / "x"), "is_enabled": "on", "sync_interval_seconds": 1}
    response = client.post(reverse("dashboards:checkpoint-create"), data)
    assert "Sync at most every 5 seconds" in response.content.decode()


def test_sync_now_requires_post(viewer_client, synced):
    assert viewer_client.get(reverse("dashboards:checkpoint-sync", args=[synced.pk])).status_code == 405


def test_file_errors_are_shown_on_the_query_page(viewer_client, copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    (directory / "offsets" / "2").write_bytes(b"v1\n{broken")
    checkpoint = make_checkpoint(url=str(directory))
    sync_checkpoint(checkpoint.pk)
    page = viewer_client.get(checkpoint.get_absolute_url()).content.decode()
    assert "Files that could not be read" in page
    assert "offsets/2" in page


def test_check_all_files_now_requires_post_and_asks_whichever_worker_syncs_next_for_a_full_walk(
    viewer_client, synced, django_capture_on_commit_callbacks
):
    url = reverse("dashboards:checkpoint-full-walk", args=[synced.pk])
    assert viewer_client.get(url).status_code == 405

    with django_capture_on_commit_callbacks() as queued:
        response = viewer_client.post(url)

    assert response.status_code == 302 and len(queued) == 1  # the sync, sent once the flag is stored
    synced.refresh_from_db()
    walked_at, asked_at = synced.last_inspected_at, synced.full_walk_requested_at
    assert asked_at is not None
    sync_checkpoint(synced.pk)
    synced.refresh_from_db()
    assert synced.full_walk_requested_at is None and synced.last_inspected_at > walked_at
