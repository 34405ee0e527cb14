"""On-call in a real browser: ask for a purge plan, read it, confirm it, see the result and the audit trail."""
from __future__ import annotations

import pytest

from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BATCHES = 12


def test_on_call_plans_confirms_and_follows_a_purge(browser_page, live_server, copy_checkpoint, django_user_model, eager_celery, oncall_group):
    user = django_user_model.objects.create_user("oncall", password="a-long-password")
    user.groups.add(oncall_group)
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=BATCHES)
    checkpoint = make_checkpoint(name="orders", url=str(directory))
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.click("text=Maintenance")
    page.select_option("#id_action", "purge")
    page.fill("#id_keep_batches", "3")
    page.click("text=Make a plan")

    page.wait_for_selector("#plan-deletes")
    # Offsets and commits of batches 0..8, each with its Hadoop CRC.
    assert page.locator("#plan-deletes tbody tr").count() == 4 * (BATCHES - 3)
    assert page.locator("ul.preconditions li.failed").count() == 0
    assert sorted(p.name for p in (directory / "offsets").iterdir() if p.name.isdigit()) == sorted(str(n) for n in range(BATCHES))
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "maintenance_plan.png"), full_page=True)

    page.fill("#id_reason", "offset log too long after the incident")
    page.fill("#id_checkpoint_name", "orders")
    page.click("text=Confirm and run")

    page.wait_for_selector("#run-status[data-status=succeeded]", timeout=30_000)
    assert page.get_attribute("#run-progress", "value") == "100"
    assert "freed" in page.inner_text("#run-result")
    assert sorted(int(p.name) for p in (directory / "offsets").iterdir() if p.name.isdigit()) == list(range(BATCHES - 3, BATCHES))
    page.screenshot(path=str(SCREENSHOT_DIR / "maintenance_result.png"), full_page=True)

    page.click("text=Audit trail")
    entries = page.inner_text("#audit-entries")
    for event in ("Plan Requested", "Planned", "Confirmed", "Started", "Succeeded"):
        assert event in entries, event
    assert "offset log too long after the incident" in entries
