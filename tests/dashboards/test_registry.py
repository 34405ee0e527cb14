"""Registering (form and register_checkpoint), editing, archiving, restoring and removing checkpoints.

On the real database, with real Spark-written checkpoints copied under the allowed root.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from dashboards.models import AuditEntry, Batch, BatchProgress, Checkpoint, MaintenancePolicy, SyncRun
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"
SINK_FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink"
NOT_STARTED_WARNING = (
    "the query has not run a batch yet (no offsets/<N> file); its batches appear once Spark writes them"
)


def _bad_checkpoint_paths(root: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of bad path under ``root``, made on disk, and the reason it must be refused with."""
    (root / "offsets-file").write_bytes(b"v1\n")
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_bytes(b"x")
    return {
        "missing": (root / "typo", "no such file or folder"),
        "file": (root / "offsets-file", "this is a file, not a checkpoint folder"),
        "no checkpoint": (
            root / "notes",
            "no metadata file and no offsets/, commits/ or state/ folder: not a Spark checkpoint",
        ),
    }


def _not_started(root: Path) -> Path:
    """What Spark leaves when a query starts and stops before its first batch (test_rootkinds_vs_spark)."""
    root.mkdir()
    (root / "metadata").write_bytes(b'{"id":"7f2f8253-89e7-4971-8c29-64755cc9983d"}\n')
    for name in ("offsets", "commits"):
        (root / name).mkdir()
    return root


def _form_data(name: str, url: Path | str, **extra) -> dict:
    return {"name": name, "url": str(url), "is_enabled": "on", "sync_interval_seconds": 30, **extra}


@pytest.fixture
def operator_client(client, operator_user):
    client.force_login(operator_user)
    return client


# --- registering: the form ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "file", "no checkpoint"])
def test_the_form_refuses_a_path_holding_no_checkpoint_with_the_reason_and_audits_the_refusal(
    operator_client, checkpoint_roots, kind
):
    path, reason = _bad_checkpoint_paths(checkpoint_roots)[kind]
    response = operator_client.post(reverse("dashboards:checkpoint-create"), _form_data("bad", path))
    assert response.status_code == 200
    assert f"{path.as_uri()}: {reason}" in response.content.decode()
    assert not Checkpoint.objects.exists()
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.actor.username, entry.checkpoint, entry.checkpoint_name) == (
        "registration-refused",
        "olivia",
        None,
        "bad",
    )
    assert entry.detail.startswith(f"url: {path.as_uri()}: {reason}")
    assert entry.data == {"name": "bad", "url": str(path), "sink_log_url": "", "reasons": {"url": [entry.detail[5:]]}}


@pytest.mark.parametrize(
    ("sink", "reason"),
    [
        ("typo", "no such folder (a file sink creates its _spark_metadata when the query starts)"),
        ("offsets-file", "this is a file: give the sink&#x27;s output folder or its _spark_metadata folder"),
        ("notes", "no _spark_metadata folder here: not a file sink&#x27;s output"),
    ],
)
def test_the_form_refuses_a_sink_path_holding_no_file_sink_log(
    operator_client, checkpoint_roots, copy_checkpoint, sink, reason
):
    _bad_checkpoint_paths(checkpoint_roots)
    checkpoint = copy_checkpoint(SINK_FIXTURE / "checkpoint", "ckpt")
    data = _form_data("q", checkpoint, sink_log_url=str(checkpoint_roots / sink))
    page = operator_client.post(reverse("dashboards:checkpoint-create"), data).content.decode()
    assert f"{(checkpoint_roots / sink).as_uri()}: {reason}" in page
    assert not Checkpoint.objects.exists()


@pytest.mark.parametrize("given", ["output", "output/_spark_metadata"], ids=["output folder", "log folder"])
def test_the_sink_may_be_given_as_its_output_folder_or_its_log_folder(
    operator_client, copy_checkpoint, checkpoint_roots, given
):
    copy_checkpoint(SINK_FIXTURE, "q")
    data = _form_data("q", checkpoint_roots / "q" / "checkpoint", sink_log_url=str(checkpoint_roots / "q" / given))
    response = operator_client.post(reverse("dashboards:checkpoint-create"), data)
    assert response.status_code == 302
    assert Checkpoint.objects.get().sink_log_url == (checkpoint_roots / "q" / given).as_uri()


def test_a_query_that_ran_no_batch_is_registered_with_a_warning_shown_and_audited(
    operator_client, checkpoint_roots, eager_celery
):
    path = _not_started(checkpoint_roots / "fresh")
    response = operator_client.post(reverse("dashboards:checkpoint-create"), _form_data("fresh", path), follow=True)
    assert (
        f'<p class="message warning">{path.as_uri()}: {NOT_STARTED_WARNING}</p>'
        in response.content.decode().replace("&lt;", "<").replace("&gt;", ">")
    )
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.actor_name, entry.checkpoint_name) == ("registered", "olivia", "fresh")
    assert entry.detail == f"{path.as_uri()}; {path.as_uri()}: {NOT_STARTED_WARNING}"


def test_registering_is_audited_with_who_and_what(operator_client, copy_checkpoint, eager_celery):
    path = copy_checkpoint(INCONSISTENT)
    operator_client.post(reverse("dashboards:checkpoint-create"), _form_data("inc", path))
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.actor.username, entry.checkpoint.name) == ("registered", "olivia", "inc")
    assert entry.data == {
        "name": "inc",
        "url": path.as_uri(),
        "sink_log_url": "",
        "file_log_compact_interval": 10,
        "is_enabled": True,
        "sync_interval_seconds": 30,
    }


def test_editing_is_audited_with_each_changed_value_before_and_after(operator_client, synced):
    data = _form_data("renamed", synced.url, sync_interval_seconds=60)
    operator_client.post(reverse("dashboards:checkpoint-edit", args=[synced.pk]), data)
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.detail) == ("edited", "changed name, sync_interval_seconds")
    assert entry.data == {"name": ["inconsistent", "renamed"], "sync_interval_seconds": [30, 60]}


def test_editing_without_changing_the_url_does_not_look_at_storage_again(operator_client, synced):
    # The checkpoint is gone from storage; renaming it must still work (its URL was checked once).
    for path in sorted(Path(synced.url.removeprefix("file://")).rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    response = operator_client.post(
        reverse("dashboards:checkpoint-edit", args=[synced.pk]), _form_data("renamed", synced.url)
    )
    assert response.status_code == 302
    assert Checkpoint.objects.get().name == "renamed"


def test_editing_to_a_url_holding_no_checkpoint_is_refused_and_audited(operator_client, synced, checkpoint_roots):
    response = operator_client.post(
        reverse("dashboards:checkpoint-edit", args=[synced.pk]), _form_data("x", checkpoint_roots / "typo")
    )
    assert f"{(checkpoint_roots / 'typo').as_uri()}: no such file or folder" in response.content.decode()
    assert Checkpoint.objects.get().url == synced.url
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.checkpoint, entry.checkpoint_name) == ("edit-refused", synced, "inconsistent")
    assert entry.detail == f"url: {(checkpoint_roots / 'typo').as_uri()}: no such file or folder"


def test_registering_the_url_of_an_archived_checkpoint_points_to_restoring_it(operator_client, synced):
    url = Path(synced.url).as_uri()  # as the form stores it
    Checkpoint.objects.filter(pk=synced.pk).update(url=url, archived_at="2026-01-01T00:00:00Z")
    response = operator_client.post(reverse("dashboards:checkpoint-create"), _form_data("again", synced.url))
    assert (
        f"{url} is registered already as inconsistent, archived: restore it from the archived checkpoints page."
        in response.content.decode()
    )
    assert Checkpoint.objects.count() == 1


# --- registering: the command line ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "file", "no checkpoint"])
def test_register_checkpoint_refuses_a_path_holding_no_checkpoint_naming_it_and_audits_the_refusal(
    checkpoint_roots, kind
):
    path, reason = _bad_checkpoint_paths(checkpoint_roots)[kind]
    with pytest.raises(CommandError) as raised:
        call_command("register_checkpoint", "bad", str(path))
    assert str(raised.value).startswith(f"url: {path.as_uri()}: {reason}")
    assert not Checkpoint.objects.exists()
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.actor, entry.checkpoint_name) == ("registration-refused", None, "bad")
    assert entry.actor_name.endswith(" on the command line (manage.py register_checkpoint)")
    assert entry.detail.startswith(f"url: {path.as_uri()}: {reason}")


def test_register_checkpoint_takes_the_sink_log_folder_itself_and_audits_the_shell_user(
    copy_checkpoint, checkpoint_roots, capsys
):
    copy_checkpoint(SINK_FIXTURE, "q")
    log = checkpoint_roots / "q" / "output" / "_spark_metadata"
    call_command("register_checkpoint", "q", str(checkpoint_roots / "q" / "checkpoint"), sink_log=str(log))
    assert Checkpoint.objects.get().sink_log_url == log.as_uri()
    entry = AuditEntry.objects.get()
    assert entry.event == "registered" and entry.actor is None
    assert entry.actor_name.endswith(" on the command line (manage.py register_checkpoint)")


def test_register_checkpoint_warns_about_a_query_that_ran_no_batch(checkpoint_roots, capsys):
    path = _not_started(checkpoint_roots / "fresh")
    call_command("register_checkpoint", "fresh", str(path))
    assert capsys.readouterr().err == f"warning: {path.as_uri()}: {NOT_STARTED_WARNING}\n"


def test_register_checkpoint_takes_an_empty_folder_as_a_query_not_started_with_a_warning(checkpoint_roots, capsys):
    path = checkpoint_roots / "not-yet"
    path.mkdir()
    call_command("register_checkpoint", "not-yet", str(path))
    assert Checkpoint.objects.get().url == path.as_uri()
    assert capsys.readouterr().err == (
        f"warning: {path.as_uri()}: the folder is empty: a query given this checkpoint location has not started "
        "(Spark writes metadata, offsets/ and commits/ when it starts); its batches appear once it runs\n"
    )


def test_register_checkpoint_refuses_a_sink_path_holding_no_file_sink_log(copy_checkpoint, checkpoint_roots):
    path = copy_checkpoint(INCONSISTENT)
    with pytest.raises(CommandError, match=f"^sink_log_url: {(checkpoint_roots / 'out').as_uri()}: no such folder"):
        call_command("register_checkpoint", "q", str(path), sink_log=str(checkpoint_roots / "out"))


# --- archiving and restoring ----------------------------------------------------------------------


def test_a_viewer_may_not_archive_restore_or_remove(viewer_client, synced):
    for name in ("checkpoint-archive", "checkpoint-restore", "checkpoint-remove"):
        assert viewer_client.post(reverse(f"dashboards:{name}", args=[synced.pk])).status_code == 403, name
    assert Checkpoint.objects.get().archived_at is None


def test_archiving_asks_for_confirmation_first(operator_client, synced):
    page = operator_client.get(reverse("dashboards:checkpoint-archive", args=[synced.pk])).content.decode()
    assert "it is no longer synced" in page and 'id="archive-form"' in page
    assert Checkpoint.objects.get().archived_at is None


def test_archiving_stops_syncs_hides_it_from_the_list_and_keeps_every_row(operator_client, synced):
    BatchProgress.objects.create(query=synced.query, batch_id=4, timestamp="2026-01-01T00:00:00Z", origin="listener")
    batches = list(Batch.objects.filter(checkpoint=synced).values_list("batch_id", "is_committed", "timestamp_ms"))
    runs = SyncRun.objects.count()

    operator_client.post(reverse("dashboards:checkpoint-archive", args=[synced.pk]), {"reason": "query retired"})

    synced.refresh_from_db()
    assert synced.is_archived
    assert PeriodicTask.objects.get(name=f"sync checkpoint {synced.pk}").enabled is False
    assert sync_checkpoint(synced.pk) is None  # a sync queued anyway does nothing
    assert SyncRun.objects.count() == runs
    assert list(Checkpoint.objects.status_list_rows()) == []
    link = f'href="{synced.get_absolute_url()}"'
    assert link not in operator_client.get(reverse("dashboards:checkpoint-list")).content.decode()
    assert link in operator_client.get(reverse("dashboards:archived-checkpoint-list")).content.decode()
    assert operator_client.get(synced.get_absolute_url()).status_code == 200
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.actor_name, entry.detail) == ("archived", "olivia", "query retired")

    operator_client.post(reverse("dashboards:checkpoint-restore", args=[synced.pk]))

    synced.refresh_from_db()
    assert not synced.is_archived
    assert PeriodicTask.objects.get(name=f"sync checkpoint {synced.pk}").enabled is True
    assert (
        list(Batch.objects.filter(checkpoint=synced).values_list("batch_id", "is_committed", "timestamp_ms")) == batches
    )
    assert BatchProgress.objects.filter(query=synced.query, batch_id=4).count() == 1
    assert list(AuditEntry.objects.order_by("pk").values_list("event", flat=True)) == ["archived", "restored"]


def test_archiving_disables_the_maintenance_policies_until_restored(operator_client, synced):
    policy = MaintenancePolicy.objects.create(checkpoint=synced, action="purge", reason="nightly")
    task_name = f"maintenance policy {policy.pk}"
    operator_client.post(reverse("dashboards:checkpoint-archive", args=[synced.pk]))
    assert PeriodicTask.objects.get(name=task_name).enabled is False
    operator_client.post(reverse("dashboards:checkpoint-restore", args=[synced.pk]))
    assert PeriodicTask.objects.get(name=task_name).enabled is True


def test_archiving_twice_is_refused_with_one_audit_entry(operator_client, synced):
    url = reverse("dashboards:checkpoint-archive", args=[synced.pk])
    operator_client.post(url)
    page = operator_client.post(url, follow=True).content.decode()
    assert "inconsistent is archived already." in page
    assert AuditEntry.objects.filter(event="archived").count() == 1


def test_an_archived_checkpoint_has_no_samples_in_metrics(client, synced, copy_checkpoint):
    other = make_checkpoint(name="kept", url=str(copy_checkpoint(INCONSISTENT, "kept")))
    Checkpoint.objects.filter(pk=synced.pk).update(archived_at="2026-01-01T00:00:00Z")
    text = client.get("/metrics").content.decode()
    assert f'ckptweb_checkpoint_enabled{{checkpoint="{other.name}"' in text
    assert 'checkpoint="inconsistent"' not in text


def test_the_archived_page_says_so_when_nothing_is_archived(viewer_client, synced):
    page = viewer_client.get(reverse("dashboards:archived-checkpoint-list")).content.decode()
    assert "No checkpoint is archived." in page


# --- removing -----------------------------------------------------------------------------------


@pytest.fixture
def remover_client(client, django_user_model):
    user = django_user_model.objects.create_user("rita", password="remover-password")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_checkpoint", "delete_checkpoint"]))
    client.force_login(user)
    return client


def test_removing_needs_the_delete_permission(operator_client, synced):
    assert operator_client.post(reverse("dashboards:checkpoint-remove", args=[synced.pk])).status_code == 403


def test_removing_needs_the_name_typed_out(remover_client, synced):
    data = {"reason": "duplicate", "checkpoint_name": "inconsisten"}
    page = remover_client.post(reverse("dashboards:checkpoint-remove", args=[synced.pk]), data).content.decode()
    assert "Type &#x27;inconsistent&#x27; exactly to confirm." in page
    assert Checkpoint.objects.filter(pk=synced.pk).exists()


def test_removing_deletes_the_history_and_the_audit_entry_keeps_the_name(remover_client, synced):
    data = {"reason": "registered twice", "checkpoint_name": "inconsistent"}
    response = remover_client.post(reverse("dashboards:checkpoint-remove", args=[synced.pk]), data)
    assert response["Location"] == reverse("dashboards:checkpoint-list")
    assert not Checkpoint.objects.exists() and not Batch.objects.exists()
    assert not PeriodicTask.objects.filter(name=f"sync checkpoint {synced.pk}").exists()
    entry = AuditEntry.objects.get()
    assert (entry.event, entry.checkpoint, entry.checkpoint_name, entry.detail) == (
        "removed",
        None,
        "inconsistent",
        "registered twice",
    )
    assert entry.data == {"url": synced.url, "batches": 4, "was_archived": False}


# --- the admin ------------------------------------------------------------------------------------


def test_the_admin_refuses_a_path_holding_no_checkpoint_and_audits_what_it_refuses_registers_and_deletes(
    admin_client, checkpoint_roots, copy_checkpoint
):
    refused = admin_client.post(
        reverse("admin:dashboards_checkpoint_add"), _form_data("typo", checkpoint_roots / "typo")
    )
    assert f"{(checkpoint_roots / 'typo').as_uri()}: no such file or folder" in refused.content.decode()
    assert not Checkpoint.objects.exists()

    admin_client.post(reverse("admin:dashboards_checkpoint_add"), _form_data("inc", copy_checkpoint(INCONSISTENT)))
    checkpoint = Checkpoint.objects.get()
    admin_client.post(reverse("admin:dashboards_checkpoint_delete", args=[checkpoint.pk]), {"post": "yes"})

    assert not Checkpoint.objects.exists()
    events = list(AuditEntry.objects.order_by("pk").values_list("event", "actor_name", "checkpoint_name", "detail"))
    assert events == [
        (
            "registration-refused",
            "admin",
            "typo",
            f"url: {(checkpoint_roots / 'typo').as_uri()}: no such file or folder",
        ),
        ("registered", "admin", "inc", checkpoint.url),
        ("removed", "admin", "inc", "removed in the admin"),
    ]
