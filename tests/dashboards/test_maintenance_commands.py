"""The rewind/skip/repair/undo commands: print the plan and change nothing, apply with --yes, refuse
what the page refuses with a non-zero exit, and leave the same audit trail as the page's runs."""

from __future__ import annotations

import getpass
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from dashboards.models import AuditEntry, MaintenanceRun
from factories import make_checkpoint, make_idle
from fixture_paths import KILLED_MID_BATCH, OUR_FIXTURES
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.django_db

BACKUPS = "_ckptweb_backup"


@pytest.fixture
def directory(copy_checkpoint):
    copied = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    make_idle(copied)
    return copied


def _files(root: Path) -> dict[str, bytes]:
    """Every file of a checkpoint but its backups, with its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and BACKUPS not in path.relative_to(root).parts
    }


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_without_yes_the_rewind_prints_every_file_and_changes_nothing(directory):
    before = _files(directory)

    printed = _run("rewind_checkpoint", str(directory), "--to-batch", "9")

    assert _files(directory) == before
    assert not (directory / BACKUPS).exists()
    assert "offsets/10" in printed and "offsets/11" in printed and "commits/11" in printed
    assert "READ BEFORE APPLYING" in printed
    assert "Nothing changed" in printed
    assert [entry.event for entry in AuditEntry.objects.order_by("pk")] == ["plan-requested", "planned"]


def test_a_path_outside_the_roots_is_refused_with_a_non_zero_exit(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    with pytest.raises(CommandError) as refused:
        _run("rewind_checkpoint", str(outside), "--to-batch", "1")

    # run_from_argv exits with this status: what a shell sees.
    assert refused.value.returncode == 1
    assert str(refused.value).startswith("no plan:") and str(outside) in str(refused.value)
    assert AuditEntry.objects.get(event="plan-failed").checkpoint_name == str(outside)


def test_a_batch_that_is_not_committed_is_refused_and_audited(directory):
    with pytest.raises(CommandError) as refused:
        _run("rewind_checkpoint", str(directory), "--to-batch", "40", "--yes", "--reason", "bad deploy")

    assert refused.value.returncode == 1
    assert AuditEntry.objects.filter(event__in=["plan-failed", "refused"], checkpoint_name=str(directory)).exists()


def test_on_a_registered_checkpoint_yes_confirms_and_leaves_the_run_awaiting_approval(directory):
    checkpoint = make_checkpoint(url=str(directory))
    before = _files(directory)

    with pytest.raises(CommandError) as waiting:
        _run("rewind_checkpoint", "orders", "--to-batch", "9", "--yes", "--reason", "bad deploy after 9")

    run = MaintenanceRun.objects.get(checkpoint=checkpoint)
    assert waiting.value.returncode == 2
    assert run.status == MaintenanceRun.Status.AWAITING_APPROVAL
    assert run.parameters["backup_dir"] == f"{BACKUPS}/run-{run.pk}"
    assert run.audit_entries.get(event="confirmed").actor_name.endswith("(manage.py rewind_checkpoint)")
    assert _files(directory) == before


def test_the_run_page_and_the_runs_list_say_a_run_came_from_the_command_line_and_name_the_os_user(
    directory, viewer_client
):
    checkpoint = make_checkpoint(url=str(directory))
    with pytest.raises(CommandError):
        _run("rewind_checkpoint", "orders", "--to-batch", "9", "--yes", "--reason", "bad deploy after 9")
    run = MaintenanceRun.objects.get(checkpoint=checkpoint)
    shell = f"{getpass.getuser()} on the command line (manage.py rewind_checkpoint)"

    page = viewer_client.get(run.get_absolute_url()).content.decode()
    listing = viewer_client.get(reverse("dashboards:maintenance", args=[checkpoint.pk])).content.decode()

    assert f'<span id="run-requester">{shell}</span>' in page
    assert f'<span id="run-confirmer">{shell}</span>' in page
    assert "by —" not in page and "policy" not in page
    row = re.search(rf'<a href="{run.get_absolute_url()}">{run.pk}</a>.*?</tr>', listing, re.S).group(0)
    assert row.count(f"<td>{shell}</td>") == 2


def test_a_confirmation_the_command_refuses_is_audited_under_the_command_line_and_its_os_user(copy_checkpoint):
    running = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")  # just written
    make_checkpoint(url=str(running))

    with pytest.raises(CommandError, match="query-stopped"):
        _run("rewind_checkpoint", "orders", "--to-batch", "9", "--yes", "--reason", "bad deploy after 9")

    refusal = AuditEntry.objects.get(event="refused")
    assert refusal.actor is None
    assert refusal.actor_name == f"{getpass.getuser()} on the command line (manage.py rewind_checkpoint)"
    assert refusal.detail.startswith("confirmation refused: query-stopped")


def test_with_approval_off_the_rewind_and_its_undo_run_from_the_shell_and_undo_restores_every_byte(directory, settings):
    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False
    checkpoint = make_checkpoint(url=str(directory))
    before = _files(directory)

    printed = _run("rewind_checkpoint", str(directory), "--to-batch", "9", "--yes", "--reason", "bad deploy after 9")

    rewind = MaintenanceRun.objects.get(checkpoint=checkpoint, action="rewind")
    assert rewind.status == MaintenanceRun.Status.SUCCEEDED, rewind.error
    assert "succeeded" in printed
    assert not (directory / "offsets" / "10").exists() and not (directory / "commits" / "11").exists()
    assert (directory / BACKUPS / f"run-{rewind.pk}" / "offsets" / "10").read_bytes() == before["offsets/10"]
    events = list(rewind.audit_entries.order_by("pk").values_list("event", flat=True))
    assert events == ["plan-requested", "planned", "confirmed", "started", "succeeded"]

    make_idle(directory)
    _run("undo_maintenance", "--run", str(rewind.pk), "--yes", "--reason", "the deploy was fine after all")

    assert _files(directory) == before
    assert MaintenanceRun.objects.get(action="undo").status == MaintenanceRun.Status.SUCCEEDED
    with pytest.raises(CommandError, match="cannot be undone"):
        _run("undo_maintenance", "--run", str(rewind.pk))


def test_yes_on_an_unregistered_path_is_refused_while_approval_is_required(directory):
    before = _files(directory)

    with pytest.raises(CommandError, match="approval") as refused:
        _run("rewind_checkpoint", str(directory), "--to-batch", "9", "--yes", "--reason", "bad deploy after 9")

    assert refused.value.returncode == 1
    assert _files(directory) == before
    assert AuditEntry.objects.filter(event="refused", checkpoint_name=str(directory)).exists()


def test_a_skip_naming_two_shapes_is_refused_before_anything_is_read(directory):
    with pytest.raises(CommandError, match="either a batch"):
        _run("skip_batch", str(directory), "--batch", "3", "--source", "0")

    assert not AuditEntry.objects.filter(checkpoint_name=str(directory)).exists()


def test_yes_needs_a_reason(directory):
    with pytest.raises(CommandError, match="--reason"):
        _run("repair_checkpoint", str(directory), "--yes")


def test_skip_batch_prints_the_commit_it_would_write_for_the_batch_killed_mid_way(copy_checkpoint):
    directory = copy_checkpoint(KILLED_MID_BATCH / "checkpoint", "killed")
    make_idle(directory)
    before = _files(directory)

    printed = _run("skip_batch", str(directory), "--batch", "6")

    assert "commits/6" in printed
    assert _files(directory) == before


def test_a_repair_from_the_shell_fixes_an_empty_latest_offsets_file_and_its_undo_puts_it_back(directory, settings):
    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False
    (directory / "offsets" / "11").write_bytes(b"")
    make_idle(directory)
    damaged = _files(directory)

    printed = _run("repair_checkpoint", str(directory), "--yes", "--reason", "crash left offsets/11 empty")

    assert "Applied" in printed
    assert not any(f.code == "log-file-empty" for f in check_checkpoint(CheckpointStorage(str(directory))))
    backup = printed.rsplit("Backup: ", 1)[1].strip()
    assert (directory / backup / "manifest.json").exists()

    make_idle(directory)
    _run("undo_maintenance", str(directory), "--backup", backup, "--yes", "--reason", "put the damage back")

    assert _files(directory) == damaged
    events = list(AuditEntry.objects.filter(checkpoint_name=str(directory)).values_list("event", flat=True))
    assert events.count("succeeded") == 2 and events.count("confirmed") == 2


def test_a_lost_metadata_file_is_written_back_with_the_query_id_the_dashboard_stored(directory, settings):
    from dashboards.models import StreamingQuery

    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False
    original = (directory / "metadata").read_bytes()
    query_id = json.loads(original)["id"]
    make_checkpoint(url=str(directory), query=StreamingQuery.objects.create(query_id=query_id))
    (directory / "metadata").unlink()

    printed = _run("repair_checkpoint", str(directory), "--yes", "--reason", "metadata lost in a copy")

    assert "succeeded" in printed
    assert json.loads((directory / "metadata").read_bytes()) == {"id": query_id}
    run = MaintenanceRun.objects.get(action="repair")
    assert run.plan["parameters"]["query_id"] == query_id
