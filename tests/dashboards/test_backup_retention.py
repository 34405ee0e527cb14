"""A risky run's backup stays undoable for CKPTWEB_MAINTENANCE_BACKUP_RETENTION_DAYS, then the
hourly job deletes it (workers/backup_retention.py): only that run's backup folder, audited, once."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from dashboards.models import AuditEntry, MaintenanceRun
from factories import make_checkpoint, make_idle
from fixture_paths import OUR_FIXTURES
from workers.backup_retention import prune_expired_backups

pytestmark = pytest.mark.django_db

BACKUPS = "_ckptweb_backup"


@pytest.fixture
def rewound(copy_checkpoint, settings):
    """A registered checkpoint rewound to batch 9 from the shell, its backup in place."""
    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    make_idle(directory)
    make_checkpoint(url=str(directory))
    reason = "bad deploy after 9"
    call_command("rewind_checkpoint", str(directory), "--to-batch", "9", "--yes", "--reason", reason, stdout=StringIO())
    run = MaintenanceRun.objects.get(action="rewind")
    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    return directory, run


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _age(run: MaintenanceRun, days: float) -> None:
    MaintenanceRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days))


def test_a_backup_inside_its_retention_stays_and_the_run_can_still_be_undone(rewound, settings):
    directory, run = rewound
    settings.MAINTENANCE_BACKUP_RETENTION_DAYS = 7
    _age(run, 6.9)
    before = _tree(directory)

    assert prune_expired_backups(timezone.now())["runs"] == 0

    assert _tree(directory) == before
    run.refresh_from_db()
    assert run.backup_pruned_at is None and run.can_be_undone()


def test_a_backup_past_its_retention_goes_alone_audited_and_the_undo_is_no_longer_offered(rewound, settings):
    directory, run = rewound
    settings.MAINTENANCE_BACKUP_RETENTION_DAYS = 7
    _age(run, 7.1)
    backup = directory / BACKUPS / f"run-{run.pk}"
    backed_up = {p for p in backup.rglob("*") if p.is_file()}
    assert backed_up, "the rewind kept no backup to prune"
    outside = {k: v for k, v in _tree(directory).items() if not k.startswith(f"{BACKUPS}/")}

    pruned = prune_expired_backups(timezone.now())

    assert pruned["runs"] == 1 and pruned["files"] == len(backed_up) and pruned["failed"] == 0
    assert not any(p.is_file() for p in backup.rglob("*"))
    assert {k: v for k, v in _tree(directory).items() if not k.startswith(f"{BACKUPS}/")} == outside
    run.refresh_from_db()
    assert run.backup_pruned_at is not None
    assert "pruned" in run.why_not_undoable()
    entry = AuditEntry.objects.get(event=AuditEntry.Event.BACKUP_PRUNED)
    assert entry.run_id == run.pk and f"run-{run.pk}" in entry.detail
    assert prune_expired_backups(timezone.now())["runs"] == 0  # once only


def test_a_backup_an_undo_is_waiting_for_is_kept(rewound, settings):
    directory, run = rewound
    settings.MAINTENANCE_BACKUP_RETENTION_DAYS = 1
    _age(run, 3)
    MaintenanceRun.objects.create(
        checkpoint=run.checkpoint,
        action="undo",
        parameters={"backup_dir": run.backup_dir},
        status=MaintenanceRun.Status.AWAITING_APPROVAL,
    )

    assert prune_expired_backups(timezone.now())["runs"] == 0
    assert any(p.is_file() for p in (directory / BACKUPS / f"run-{run.pk}").rglob("*"))


def test_the_run_page_says_how_long_the_backup_is_kept_and_then_that_it_was_pruned(rewound, settings, client):
    from django.contrib.auth.models import Permission, User

    _, run = rewound
    settings.MAINTENANCE_BACKUP_RETENTION_DAYS = 3
    user = User.objects.create_user("rita", password="x")
    user.user_permissions.add(Permission.objects.get(codename="plan_maintenance"))
    client.force_login(user)

    page = client.get(run.get_absolute_url()).content.decode()
    assert "kept 3 days after the run ended" in page and 'id="undo-run"' in page

    _age(run, 4)
    prune_expired_backups(timezone.now())
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="undo-run"' not in page and "its backup was pruned on" in page
