"""Registering, archiving, restoring and removing checkpoints in a real browser (Debian's chromium)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from dashboards.models import AuditEntry, Checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SINK_FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink"
NARROW = {"width": 420, "height": 900}
WIDE = {"width": 1400, "height": 1100}


@pytest.fixture
def registrar(django_user_model):
    user = django_user_model.objects.create_user("rita", password="a-long-password")
    codenames = ["add_checkpoint", "change_checkpoint", "delete_checkpoint"]
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="dashboards", codename__in=codenames))
    return user


def _screenshot(page, name: str) -> None:
    """A full-page screenshot at the wide and at the narrow width, for a human to read."""
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    for label, size in (("wide", WIDE), ("narrow", NARROW)):
        page.set_viewport_size(size)
        page.screenshot(path=str(SCREENSHOT_DIR / f"{name}_{label}.png"), full_page=True)
    page.set_viewport_size(WIDE)


def _register(page, base_url: str, name: str, url: Path, sink: Path | None = None) -> None:
    page.goto(base_url + "/checkpoints/new/")
    page.fill("#id_name", name)
    page.fill("#id_url", str(url))
    if sink is not None:
        page.fill("#id_sink_log_url", str(sink))
    page.click("form.form button[type=submit]")
    page.wait_for_load_state()


def test_registering_each_bad_path_shows_the_reason_registers_nothing_and_audits_the_refusal(
    browser_page, live_server, checkpoint_roots, copy_checkpoint, registrar
):
    (checkpoint_roots / "part-0.json").write_bytes(b"{}")
    (checkpoint_roots / "notes").mkdir()
    (checkpoint_roots / "notes" / "todo.txt").write_bytes(b"x")
    copy_checkpoint(SINK_FIXTURE, "orders")
    checkpoint = checkpoint_roots / "orders" / "checkpoint"
    bad_checkpoints = {
        checkpoint_roots / "typo": "no such file or folder",
        checkpoint_roots / "part-0.json": "this is a file, not a checkpoint folder",
        checkpoint_roots
        / "notes": "no metadata file and no offsets/, commits/ or state/ folder: not a Spark checkpoint",
        checkpoint_roots
        / "orders"
        / "output": "this is a file sink's output (it holds _spark_metadata), not its checkpoint",
    }
    bad_sinks = {
        checkpoint_roots / "typo": "no such folder",
        checkpoint_roots / "part-0.json": "this is a file: give the sink's output folder or its _spark_metadata folder",
        checkpoint_roots / "notes": "no _spark_metadata folder here: not a file sink's output",
    }
    page = browser_page
    log_in(page, live_server.url, "/checkpoints/new/", "rita", "a-long-password")

    for path, reason in bad_checkpoints.items():
        _register(page, live_server.url, "orders", path)
        assert f"{path.as_uri()}: {reason}" in page.inner_text("form.form ul.errorlist"), path
    _screenshot(page, "register_refused")
    for path, reason in bad_sinks.items():
        _register(page, live_server.url, "orders", checkpoint, sink=path)
        assert f"{path.as_uri()}: {reason}" in page.inner_text("form.form ul.errorlist"), path
    assert not Checkpoint.objects.exists()
    refusals = list(AuditEntry.objects.order_by("pk").values_list("event", "actor_name", "checkpoint_name"))
    assert refusals == [("registration-refused", "rita", "orders")] * (len(bad_checkpoints) + len(bad_sinks))


def test_a_query_that_ran_no_batch_is_registered_with_the_warning_on_its_page(
    browser_page, live_server, checkpoint_roots, registrar, eager_celery
):
    fresh = checkpoint_roots / "fresh"
    for name in ("offsets", "commits"):
        (fresh / name).mkdir(parents=True)
    (fresh / "metadata").write_bytes(b'{"id":"7f2f8253-89e7-4971-8c29-64755cc9983d"}\n')
    page = browser_page
    log_in(page, live_server.url, "/checkpoints/new/", "rita", "a-long-password")

    _register(page, live_server.url, "fresh", fresh)

    assert page.inner_text("p.message.warning") == (
        f"{fresh.as_uri()}: the query has not run a batch yet (no offsets/<N> file); "
        "its batches appear once Spark writes them"
    )
    assert Checkpoint.objects.get().name == "fresh"
    _screenshot(page, "register_not_started")


def test_archive_restore_and_remove_from_the_checkpoint_page_each_confirmed_and_audited(
    browser_page, live_server, copy_checkpoint, checkpoint_roots, registrar, eager_celery
):
    copy_checkpoint(SINK_FIXTURE, "orders")
    page = browser_page
    log_in(page, live_server.url, "/checkpoints/archived/", "rita", "a-long-password")
    assert "No checkpoint is archived." in page.inner_text("main")
    _screenshot(page, "archived_list_empty")
    _register(
        page,
        live_server.url,
        "orders",
        checkpoint_roots / "orders" / "checkpoint",
        sink=checkpoint_roots / "orders" / "output",
    )
    checkpoint = Checkpoint.objects.get()
    batches = checkpoint.batches.count()
    assert batches > 0  # the eager first sync ran

    page.click(".actions >> text=Archive")
    assert "it is no longer synced" in page.inner_text("#archive-effects")
    _screenshot(page, "archive_confirm")
    page.fill("#id_reason", "query retired")
    page.click("#archive-form button[type=submit]")
    page.wait_for_selector("#archived-banner")
    assert "Sync now" not in page.inner_text(".actions")
    _screenshot(page, "checkpoint_archived")
    page.goto(live_server.url + "/")
    assert page.locator(f'#checkpoint-list-panel a[href="{checkpoint.get_absolute_url()}"]').count() == 0
    page.click("#archived-link")
    assert "orders" in page.inner_text("#archived-checkpoint-table")
    _screenshot(page, "archived_list")

    page.click("#archived-checkpoint-table button")
    page.wait_for_selector("p.message.success")
    assert page.locator("#archived-banner").count() == 0
    assert Checkpoint.objects.get().batches.count() == batches

    page.click(".actions >> text=Remove")
    _screenshot(page, "remove_confirm")
    page.fill("#id_reason", "registered under the wrong name")
    page.fill("#id_checkpoint_name", "orders")
    page.click("#remove-form button[type=submit]")
    page.wait_for_selector("p.message.success")
    assert not Checkpoint.objects.exists()

    page.click("text=Audit trail")
    entries = page.inner_text("#audit-entries")
    for event in ("checkpoint registered", "checkpoint archived", "checkpoint restored", "checkpoint removed"):
        assert event in entries, event
    assert "query retired" in entries and "registered under the wrong name" in entries
    _screenshot(page, "audit_registry")
