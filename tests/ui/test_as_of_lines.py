"""Every panel read by a pass says, in a real browser, which batch its figures are as of and how long ago.

House style B8.1: "as of batch N, T ago", louder when behind the batch table; a panel never read says
so and when it will be. The "behind" case is made for real: the first sync sees the fixture's query
two batches short (their files held back), the files come back, and the second sync stores the two
batches while its full pass is not due yet; holding back the two state versions as well keeps the
state figures at the older batch.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DEDUP = OUR_FIXTURES / "file_source_dedup"  # batches 12 to 15; state versions up to 16
PASS_LINES = ("#findings-as-of", "#metadata-logs-as-of", "#inventory-as-of")
NARROW_WIDTH = 480
# Batch 14 and 15's files: their offsets and commits, their sink log entries, their state versions.
LOG_FILES = ("checkpoint/offsets/1[45]", "checkpoint/commits/1[45]", "output/_spark_metadata/1[45]*")
STATE_FILES = ("checkpoint/state/0/*/1[56].*",)


def _hold_back(base: Path, patterns: tuple[str, ...]) -> list[tuple[Path, Path]]:
    """Move the files matching ``patterns`` (and their Hadoop CRCs) aside; return (aside, original) pairs."""
    moved = []
    for pattern in patterns:
        for path in base.glob(pattern):
            for file in (path, path.with_name(f".{path.name}.crc")):
                aside = base.parent / "held-back" / file.relative_to(base)
                aside.parent.mkdir(parents=True, exist_ok=True)
                moved.append((Path(shutil.move(file, aside)), file))
    return moved


def _put_back(moved: list[tuple[Path, Path]]) -> None:
    for aside, original in moved:
        shutil.move(aside, original)


def _open_query_page(page, live_server, django_user_model, checkpoint) -> None:
    django_user_model.objects.create_user("oncall", password="a-long-password")
    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")
    page.wait_for_selector("#timeline-as-of")


def _line(page, selector: str) -> tuple[str, bool]:
    """The words of an "as of" line and whether it is shown as behind."""
    text = " ".join(page.inner_text(selector).split())
    return text, "behind" in (page.get_attribute(selector, "class") or "").split()


def _screenshots(page, name: str) -> None:
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": NARROW_WIDTH, "height": 1000})
    page.screenshot(path=str(SCREENSHOT_DIR / f"{name}_narrow.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1100})


def _synced_dedup(copy_checkpoint):
    base = copy_checkpoint(DEDUP)
    return base, make_checkpoint(name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output"))


def test_every_panel_of_a_freshly_synced_query_is_as_of_its_latest_batch(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    _, checkpoint = _synced_dedup(copy_checkpoint)
    sync_checkpoint(checkpoint.pk)
    page = browser_page
    _open_query_page(page, live_server, django_user_model, checkpoint)

    for selector in ("#timeline-as-of", *PASS_LINES):
        text, behind = _line(page, selector)
        assert re.fullmatch(r"As of batch 15, read \d+ s ago\.", text), (selector, text)
        assert not behind, selector
    text, behind = _line(page, "#state-as-of")
    assert re.fullmatch(r"As of batch 15 \(state version 16\), read \d+ s ago\.", text) and not behind, text
    assert page.get_attribute("#findings-as-of span", "title").endswith(" UTC")
    _screenshots(page, "as_of_current")

    page.click("#state summary")
    # The oldest version each partition keeps on storage (Spark's fixture kept them from version 12).
    assert page.locator("#state-partitions tbody tr td:nth-child(3)").all_inner_texts() == ["12", "12"]
    page.locator("#state").screenshot(path=str(SCREENSHOT_DIR / "state_panel_partitions.png"))
    page.click("#state-partitions a >> nth=0")
    text, behind = _line(page, "#partition-as-of")
    assert re.fullmatch(r"As of batch 15 \(state version 16\), read \d+ s ago\.", text) and not behind, text


def test_panels_whose_pass_has_not_run_since_batch_13_say_they_are_two_batches_behind(
    browser_page, live_server, copy_checkpoint, django_user_model, settings
):
    base, checkpoint = _synced_dedup(copy_checkpoint)
    state_files = _hold_back(base, STATE_FILES)
    log_files = _hold_back(base, LOG_FILES)
    sync_checkpoint(checkpoint.pk)  # the full pass reads the query at batch 13
    _put_back(log_files)
    # Stores batches 14 and 15; neither a full walk nor a probe of the logs; no state version 15 or 16 to follow.
    settings.FULL_WALK_INTERVAL_SECONDS = settings.INSPECT_INTERVAL_SECONDS = 3600
    sync_checkpoint(checkpoint.pk)
    _put_back(state_files)
    page = browser_page
    _open_query_page(page, live_server, django_user_model, checkpoint)

    text, behind = _line(page, "#timeline-as-of")
    assert re.fullmatch(r"As of batch 15, read \d+ s ago\.", text) and not behind, text
    for selector, pass_name in zip(PASS_LINES, ("full check", "log check", "full check"), strict=True):
        text, behind = _line(page, selector)
        assert re.fullmatch(
            r"As of batch 13, read \d+ s ago — 2 batches behind the latest \(15\)\. "
            rf"The next {pass_name} is due in \d+ min \d+ s\.",
            text,
        ), (selector, text)
        assert behind, selector
    text, behind = _line(page, "#state-as-of")
    assert re.fullmatch(
        r"As of batch 13 \(state version 14\), read \d+ s ago — 2 batches behind the latest \(15\)\. "
        r"The next sync is due (in \d+ s|now)\.",
        text,
    ), text
    assert behind and page.is_visible("#state-behind-note")
    _screenshots(page, "as_of_behind")

    page.click("#state summary")
    page.click("#state-partitions a >> nth=0")
    text, behind = _line(page, "#partition-as-of")
    assert text.startswith("As of batch 13 (state version 14), read ") and behind, text
    assert "— 2 batches behind the latest (15)." in text
    _screenshots(page, "as_of_partition_behind")


def test_a_checkpoint_not_synced_yet_says_each_panel_is_not_read_and_when_it_will_be(
    browser_page, live_server, copy_checkpoint, django_user_model
):
    _, checkpoint = _synced_dedup(copy_checkpoint)
    page = browser_page
    _open_query_page(page, live_server, django_user_model, checkpoint)

    assert _line(page, "#timeline-as-of") == ("Not read yet. The first sync is due now.", False)
    for selector in ("#findings-as-of", "#inventory-as-of"):
        assert _line(page, selector) == ("Not read yet. The first full check is due now.", False), selector
    _screenshots(page, "as_of_never_read")


def test_check_all_files_now_walks_the_checkpoint_and_the_page_says_when_the_last_walk_ran(
    browser_page, live_server, copy_checkpoint, django_user_model, eager_celery
):
    from datetime import timedelta

    from django.utils import timezone

    from dashboards.models import Checkpoint

    _, checkpoint = _synced_dedup(copy_checkpoint)
    sync_checkpoint(checkpoint.pk)
    # The walk at registration ran two hours ago; syncs probed since.
    two_hours_ago = timezone.now() - timedelta(hours=2)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=two_hours_ago)
    page = browser_page
    _open_query_page(page, live_server, django_user_model, checkpoint)

    text = " ".join(page.inner_text("#full-walk").split())
    assert re.match(
        r"Last full check \(every file listed and checked\): 2 h( \d+ (min|s))* ago, at batch 15\. "
        r"The next one is due in 3 h 59 min( \d+ s)? \(every 6 h, CKPTWEB_FULL_WALK_INTERVAL_SECONDS\)\. ",
        text,
    ), text
    assert "(every 5 min, CKPTWEB_INSPECT_INTERVAL_SECONDS)" in text
    _screenshots(page, "full_walk_before")
    page.locator("#integrity").screenshot(path=str(SCREENSHOT_DIR / "full_walk_before_panel.png"))

    page.click("#full-walk-now")
    page.wait_for_selector("text=Full walk of dedup queued")

    checkpoint.refresh_from_db()
    assert checkpoint.last_inspected_at > two_hours_ago and checkpoint.full_walk_requested_at is None
    text = " ".join(page.inner_text("#full-walk").split())
    assert re.match(r"Last full check \(every file listed and checked\): \d+ s ago, at batch 15\. ", text), text
    _screenshots(page, "full_walk_after")
    page.locator("#integrity").screenshot(path=str(SCREENSHOT_DIR / "full_walk_after_panel.png"))
