"""On-call in a real browser: ask for a plan with the per-action form, read it, confirm it (or be
refused), see the audit trail."""

from __future__ import annotations

import pytest

from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in
from workers import maintenance_runs
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BATCHES = 12
# Spark's purge at the start of batch 11 with minBatchesToRetain 5 leaves offsets and commits 6..11.
PURGED_BEFORE = 6
NARROW = {"width": 420, "height": 900}
ACTIONS = ("purge", "snapshot", "cleanup", "compact")


@pytest.fixture
def oncall_user(django_user_model, oncall_group):
    user = django_user_model.objects.create_user("oncall", password="a-long-password")
    user.groups.add(oncall_group)
    return user


@pytest.fixture
def orders(copy_checkpoint):
    """A stopped stateless query with BATCHES batches, as a checkpoint row and its directory."""
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=BATCHES)
    return make_checkpoint(name="orders", url=str(directory)), directory


def _visible_fieldsets(page) -> list[str]:
    return [action for action in ACTIONS if page.is_visible(f"#parameters-{action}")]


def _screenshot(page, name: str) -> None:
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / name), full_page=True)


def test_on_call_plans_confirms_and_follows_a_purge(browser_page, live_server, orders, oncall_user, eager_celery):
    checkpoint, directory = orders
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.click("text=Maintenance")
    page.check("#action-purge")
    page.fill("#id_keep_batches", "3")
    page.click("text=Make a plan")

    page.wait_for_selector("#plan-deletes")
    # Offsets and commits of batches 0..8, each with its Hadoop CRC.
    assert page.locator("#plan-deletes tbody tr").count() == 4 * (BATCHES - 3)
    assert page.locator("ul.preconditions li.failed").count() == 0
    assert sorted(p.name for p in (directory / "offsets").iterdir() if p.name.isdigit()) == sorted(
        str(n) for n in range(BATCHES)
    )
    _screenshot(page, "maintenance_plan.png")

    page.fill("#id_reason", "offset log too long after the incident")
    page.fill("#id_checkpoint_name", "orders")
    page.click("text=Confirm and run")

    page.wait_for_selector("#run-status[data-status=succeeded]")
    assert page.get_attribute("#run-progress", "value") == "100"
    assert "freed" in page.inner_text("#run-result")
    assert sorted(int(p.name) for p in (directory / "offsets").iterdir() if p.name.isdigit()) == list(
        range(BATCHES - 3, BATCHES)
    )
    _screenshot(page, "maintenance_result.png")

    page.click("text=Audit trail")
    entries = page.inner_text("#audit-entries")
    for event in ("Plan Requested", "Planned", "Confirmed", "Started", "Succeeded"):
        assert event in entries, event
    assert "offset log too long after the incident" in entries


def test_choosing_an_action_shows_only_its_parameters_with_the_checkpoints_defaults(
    browser_page, live_server, orders, oncall_user
):
    checkpoint, directory = orders
    for log in ("offsets", "commits"):
        for batch_id in range(PURGED_BEFORE):
            (directory / log / str(batch_id)).unlink()
            (directory / log / f".{batch_id}.crc").unlink()
    sync_checkpoint(checkpoint.pk)
    page = browser_page

    log_in(page, live_server.url, f"{checkpoint.get_absolute_url()}maintenance/", "oncall", "a-long-password")
    assert _visible_fieldsets(page) == []
    page.check("#action-snapshot")
    assert _visible_fieldsets(page) == ["snapshot"]
    # The preview speaks in the form's words ("Longest delta chain allowed"), not its parameter's name.
    snapshot_preview = page.inner_text("#preview-snapshot")
    assert snapshot_preview.startswith(("nothing to do", "write a snapshot")), snapshot_preview
    assert "min_chain" not in snapshot_preview and "(s)" not in snapshot_preview
    _screenshot(page, "maintenance_snapshot_preview.png")
    page.check("#action-purge")
    assert _visible_fieldsets(page) == ["purge"]

    # The query's minBatchesToRetain, read from what Spark's purge left: offsets 6..11.
    assert page.input_value("#id_keep_batches") == "5"
    assert "Spark's own purge left batches 6–11" in page.inner_text("#parameters-purge")
    assert page.inner_text("#preview-purge") == (
        "purge offsets and commits of batch 6, "
        "keep batches 7–11 (5 batches) (keep the last 5 committed batches, up to 11)"
    )
    _screenshot(page, "maintenance_request_form.png")

    page.fill("#id_keep_batches", "20")
    page.wait_for_function("document.querySelector('#preview-purge').innerText.startsWith('nothing to purge')")
    assert page.inner_text("#preview-purge") == (
        "nothing to purge: keeping the last 20 batches keeps batches 6–11 (6 batches), "
        "all that is stored; keeping 5 or fewer would purge from batch 6"
    )
    page.set_viewport_size(NARROW)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    _screenshot(page, "maintenance_request_form_narrow.png")


def test_the_per_action_form_works_without_javascript(browser_page, live_server, orders, oncall_user, eager_celery):
    checkpoint, _ = orders
    context = browser_page.context.browser.new_context(
        java_script_enabled=False, viewport={"width": 1400, "height": 1100}
    )
    page = context.new_page()
    try:
        log_in(page, live_server.url, f"{checkpoint.get_absolute_url()}maintenance/", "oncall", "a-long-password")
        page.check("#action-cleanup")
        assert _visible_fieldsets(page) == ["cleanup"]
        page.fill("#id_min_versions_to_retain", "7")
        page.click("text=Make a plan")

        page.wait_for_selector("#run-status")
        assert "Clean up old state files" in page.inner_text("h1")
        assert checkpoint.maintenance_runs.get().parameters == {"min_versions_to_retain": 7, "keep_offsets_range": True}
    finally:
        context.close()


def test_a_refused_confirmation_keeps_its_input_and_appears_in_the_audit_trail(
    browser_page, live_server, orders, oncall_user
):
    checkpoint, _ = orders
    run = checkpoint.maintenance_runs.create(action="purge", parameters={"keep_batches": 3}, requested_by=oncall_user)
    run = maintenance_runs.make_plan(run.pk)
    page = browser_page

    log_in(page, live_server.url, run.get_absolute_url(), "oncall", "a-long-password")
    page.fill("#id_reason", "offsets of the incident week")
    page.fill("#id_checkpoint_name", "order")
    page.click("text=Confirm and run")

    page.wait_for_selector("#id_checkpoint_name + ul.errorlist, .errorlist")
    assert page.input_value("#id_reason") == "offsets of the incident week"
    assert page.input_value("#id_checkpoint_name") == "order"
    assert page.inner_text("#confirm-refused") == "Not confirmed: Checkpoint name: Type 'orders' exactly to confirm."
    assert page.url.endswith("#maintenance-confirm")  # the browser shows the form, not the top of a long plan
    assert page.get_attribute("#run-status", "data-status") == "planned"
    _screenshot(page, "maintenance_confirm_refused.png")
    page.set_viewport_size(NARROW)
    _screenshot(page, "maintenance_confirm_refused_narrow.png")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    page.click("text=Audit trail")
    entries = page.inner_text("#audit-entries")
    assert "Refused" in entries
    assert (
        "confirmation refused: Checkpoint name: Type 'orders' exactly to confirm. "
        "Reason typed: “offsets of the incident week”."
    ) in entries
