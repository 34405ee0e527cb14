"""A real browser pages through the checkpoint list, and the refreshing panel stays on the page shown."""

from __future__ import annotations

import pytest

from dashboards.models import Checkpoint
from factories import make_checkpoint
from ui_helpers import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_next_page_is_swapped_in_and_its_refresh_shows_a_new_checkpoint_on_it(
    browser_page, live_server, django_user_model
):
    from playwright.sync_api import expect

    django_user_model.objects.create_user("oncall", password="a-long-password")
    Checkpoint.objects.bulk_create(Checkpoint(name=f"q{n:03d}", url=f"/nowhere/q{n:03d}") for n in range(120))
    page = browser_page
    rows = page.locator("#checkpoint-table tbody tr")

    log_in(page, live_server.url, "/", "oncall", "a-long-password")
    expect(rows.first).to_contain_text("q000")
    page.click("#checkpoint-pager a[rel=next]")
    expect(rows.first).to_contain_text("q050")
    assert page.url == live_server.url + "/?page=2"

    # Sorts second on page 2; the panel polls every 10 seconds, asking for page 2 again.
    make_checkpoint(name="q050a", url="/nowhere/q050a")
    expect(rows.nth(1)).to_contain_text("q050a")
    expect(rows.first).to_contain_text("q050")
    expect(page.locator("#checkpoint-pager")).to_contain_text("page 2 of 3 (51–100 of 121)")
