"""A rewind in a real browser: choose it and its batch, read the plan with what it cannot undo outside
the checkpoint, confirm, have a second person approve, watch it succeed, then undo it the same way
and find the checkpoint and its sink as they were, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from factories import make_checkpoint, make_idle
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The fixture's committed batches are 8–11: rewinding to 9 removes 10 and 11.
REWIND_TO = 9
PASSWORD = "a-long-password"


def _user(django_user_model, oncall_group, name):
    user = django_user_model.objects.create_user(name, password=PASSWORD)
    user.groups.add(oncall_group)
    codenames = ("rewind_checkpoint", "undo_maintenance")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="dashboards", codename__in=codenames))
    return user


@pytest.fixture
def two_rewinders(django_user_model, oncall_group):
    return _user(django_user_model, oncall_group, "rita"), _user(django_user_model, oncall_group, "sam")


@pytest.fixture
def orders(copy_checkpoint):
    """The windowed aggregation with its file sink, stopped, registered with the sink's log."""
    base = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink", "orders")
    make_idle(base)
    checkpoint = make_checkpoint(name="orders", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))
    sync_checkpoint(checkpoint.pk)  # the request form's preview reads the synced batches
    return checkpoint, base


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and "_ckptweb_backup" not in path.parts
    }


def _screenshot(page, name: str) -> None:
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / name), full_page=True)


def _confirm(page, reason: str) -> None:
    page.wait_for_selector("#maintenance-confirm")
    page.fill("#id_reason", reason)
    page.fill("#id_checkpoint_name", "orders")
    page.click("#maintenance-confirm button[type=submit]")
    page.wait_for_selector("#run-status[data-status=approval]")


def _approve_as_sam(page, live_server, run_path: str) -> None:
    """Sam, in a browser of his own, approves the run Rita confirmed."""
    context = page.context.browser.new_context(viewport={"width": 1400, "height": 1100})
    other = context.new_page()
    try:
        log_in(other, live_server.url, run_path, "sam", PASSWORD)
        assert "Confirmed by rita" in other.inner_text("#maintenance-approve")
        other.click("#maintenance-approve button[type=submit]")
        other.wait_for_selector("#run-status[data-status=succeeded]")
    finally:
        context.close()


def test_rewind_approved_by_a_second_person_then_undone(browser_page, live_server, orders, two_rewinders, eager_celery):
    checkpoint, base = orders
    before = _files(base)
    page = browser_page

    log_in(page, live_server.url, f"{checkpoint.get_absolute_url()}maintenance/", "rita", PASSWORD)
    page.check("#action-rewind")
    page.fill("#id_to_batch", str(REWIND_TO))
    page.wait_for_function("document.querySelector('#preview-rewind').innerText.startsWith('remove batches 10')")
    _screenshot(page, "risky_rewind_request.png")
    page.check("#action-skip")
    _screenshot(page, "risky_skip_request.png")
    page.check("#action-rewind")
    page.click("text=Make a plan")

    page.wait_for_selector("#plan-warnings")
    warnings = page.inner_text("#plan-warnings")
    assert "cannot undo outside the checkpoint" in warnings
    assert "Kafka" in warnings or "sink" in warnings, warnings
    deleted = page.inner_text("#plan-deletes")
    assert "offsets/10" in deleted and "commits/11" in deleted
    assert page.is_visible("#plan-deletes")  # every file shown, not folded away
    _screenshot(page, "risky_rewind_plan.png")
    _confirm(page, "bad deploy wrote wrong output from batch 10")
    run_path = page.url.split("#")[0].removeprefix(live_server.url)

    _approve_as_sam(page, live_server, run_path)
    # No reload: Rita's page polls the run and reloads itself once its status changes (HX-Refresh);
    # a reload of our own at that moment was aborted by the page's (net::ERR_ABORTED, under load).
    page.wait_for_selector("#run-status[data-status=succeeded]")
    assert not (base / "checkpoint" / "offsets" / "10").exists()
    assert page.is_visible("#undo-run")
    _screenshot(page, "risky_rewind_succeeded.png")

    page.click("#undo-run")
    page.wait_for_selector("#run-status[data-status=planned]")
    assert "Undo a run from its backup" in page.inner_text("h1")
    assert "the backup of run #" in page.inner_text("#run-backup")
    _screenshot(page, "risky_undo_plan.png")
    _confirm(page, "the deploy was fine after all")
    _approve_as_sam(page, live_server, page.url.split("#")[0].removeprefix(live_server.url))

    assert _files(base) == before
    # Rita's page of the undo reloads itself once the undo succeeds (HX-Refresh, as above): a goto of
    # ours before that reload had happened was aborted by it (net::ERR_ABORTED, two test workers).
    page.wait_for_selector("#run-status[data-status=succeeded]")
    page.goto(live_server.url + run_path)
    assert "Undo: run #" in page.inner_text("#undone-by")
    _screenshot(page, "risky_rewind_undone.png")


def test_a_repairable_finding_leads_to_the_repair_form_with_its_damage_chosen(
    browser_page, live_server, orders, two_rewinders, settings
):
    checkpoint, base = orders
    (base / "checkpoint" / "offsets" / "11").write_bytes(b"")  # a crash left the latest offsets file empty
    settings.FULL_WALK_INTERVAL_SECONDS = 0  # this sync runs the integrity check again, as the next walk would
    sync_checkpoint(checkpoint.pk)
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "rita", PASSWORD)
    page.wait_for_selector("#findings a.repair-link")
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.locator("#findings").screenshot(path=str(SCREENSHOT_DIR / "risky_finding_repair_link.png"))
    page.click("#findings a.repair-link")

    page.wait_for_selector("#parameters-repair")
    assert page.is_checked("#action-repair")
    assert page.input_value("#id_damage") == "log-file-empty"
    assert page.is_visible("#parameters-repair") and not page.is_visible("#parameters-rewind")
    _screenshot(page, "risky_repair_request.png")


def test_the_run_page_says_how_long_the_backup_is_kept_then_that_it_was_pruned(
    browser_page, live_server, orders, two_rewinders, settings
):
    from datetime import timedelta
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    from dashboards.models import MaintenanceRun
    from workers.backup_retention import prune_expired_backups

    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False
    settings.MAINTENANCE_BACKUP_RETENTION_DAYS = 3
    checkpoint, _ = orders
    call_command(
        "rewind_checkpoint",
        "orders",
        "--to-batch",
        str(REWIND_TO),
        "--yes",
        "--reason",
        "bad deploy",
        stdout=StringIO(),
    )
    run = MaintenanceRun.objects.get(action="rewind")
    page = browser_page
    log_in(page, live_server.url, run.get_absolute_url(), "rita", PASSWORD)
    page.wait_for_selector("#undo-run")
    assert "kept 3 days after the run ended" in page.inner_text("#maintenance-undo")
    assert page.inner_text("#run-requester").endswith(" on the command line (manage.py rewind_checkpoint)")
    _screenshot(page, "risky_backup_kept.png")

    MaintenanceRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=4))
    assert prune_expired_backups(timezone.now())["runs"] == 1
    page.reload()
    assert not page.is_visible("#undo-run")
    assert "its backup was pruned on" in page.inner_text("#backup-pruned")
    assert page.inner_text("#run-backup").startswith("pruned on ")
    _screenshot(page, "risky_backup_pruned.png")
