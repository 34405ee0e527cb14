"""History retention (workers/retention.py): old sync runs are folded into totals so that the
/metrics counters never drop, old inventory passes are thinned to one a day, and pruning is safe
to repeat and to run twice at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.urls import reverse

from ckptweb.celery import app
from dashboards.models import DirectoryInventory, SyncRun, SyncTotal
from factories import make_checkpoint
from prometheus.scenario import checkpoint_sample, parse_exposition
from workers import retention

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
COUNTERS = [
    ("ckptweb_sync_runs_total", {"status": "ok"}),
    ("ckptweb_sync_runs_total", {"status": "partial"}),
    ("ckptweb_sync_runs_total", {"status": "failed"}),
    ("ckptweb_sync_storage_calls_total", {"kind": "list"}),
    ("ckptweb_sync_storage_calls_total", {"kind": "info"}),
    ("ckptweb_sync_storage_calls_total", {"kind": "read"}),
    ("ckptweb_sync_storage_read_bytes_total", {}),
]


def _runs(checkpoint, *, days_ago: float, count: int, status=SyncRun.Status.OK, first_number: int = 0) -> None:
    started = NOW - timedelta(days=days_ago)
    SyncRun.objects.bulk_create(
        SyncRun(
            checkpoint=checkpoint,
            started_at=started + timedelta(seconds=30 * n),
            finished_at=None if status == SyncRun.Status.RUNNING else started + timedelta(seconds=30 * n + 1),
            status=status,
            list_calls=n % 3,
            info_calls=1,
            read_calls=n + 1,
            bytes_read=100 * (first_number + n),
        )
        for n in range(count)
    )


def _counters(client, name: str) -> list[float | None]:
    samples = parse_exposition(client.get("/metrics").content.decode())
    return [checkpoint_sample(samples, metric, name, **labels) for metric, labels in COUNTERS]


@pytest.fixture
def history():
    """A checkpoint with runs of every status ten days old, a running one as old, and recent runs."""
    checkpoint = make_checkpoint(name="orders", url="/nowhere/orders")
    _runs(checkpoint, days_ago=10, count=40)
    _runs(checkpoint, days_ago=9, count=7, status=SyncRun.Status.PARTIAL)
    _runs(checkpoint, days_ago=8, count=3, status=SyncRun.Status.FAILED)
    _runs(checkpoint, days_ago=8, count=1, status=SyncRun.Status.RUNNING)
    _runs(checkpoint, days_ago=1, count=5, first_number=1000)
    neighbour = make_checkpoint(name="neighbour", url="/nowhere/neighbour")
    _runs(neighbour, days_ago=10, count=2)
    return checkpoint, neighbour


def test_old_runs_are_folded_into_totals_and_deleted_and_no_counter_moves(client, history, settings):
    checkpoint, neighbour = history
    settings.SYNC_HISTORY_DAYS = 7
    before = {name: _counters(client, name) for name in ("orders", "neighbour")}
    assert before["orders"][:3] == [45, 7, 3]

    pruned = retention.prune_history(NOW)

    assert pruned["sync_runs"] == 40 + 7 + 3 + 2
    kept = SyncRun.objects.filter(checkpoint=checkpoint)
    assert sorted(kept.values_list("status", flat=True)) == ["ok"] * 5 + ["running"]
    assert {name: _counters(client, name) for name in ("orders", "neighbour")} == before
    totals = {t.status: (t.runs, t.read_calls) for t in SyncTotal.objects.filter(checkpoint=checkpoint)}
    assert totals == {"ok": (40, sum(range(1, 41))), "partial": (7, sum(range(1, 8))), "failed": (3, 6)}


def test_pruning_again_or_in_small_chunks_folds_each_run_once(client, history, settings, monkeypatch):
    checkpoint, _ = history
    settings.SYNC_HISTORY_DAYS = 7
    before = _counters(client, "orders")
    monkeypatch.setattr(retention, "PRUNE_CHUNK_ROWS", 6)

    retention.prune_history(NOW)
    again = retention.prune_history(NOW)

    assert again == {"sync_runs": 0, "inventory_rows": 0, "state_key_sets": 0}
    assert _counters(client, "orders") == before
    assert SyncTotal.objects.get(checkpoint=checkpoint, status="ok").runs == 40


def test_the_history_kept_follows_the_setting(history, settings):
    checkpoint, _ = history
    settings.SYNC_HISTORY_DAYS = 9
    retention.prune_history(NOW)
    # Started 9 days ago or later: the partial (9 days ago, then 30 s apart) and failed runs stay.
    assert sorted(set(SyncRun.objects.filter(checkpoint=checkpoint).values_list("status", flat=True))) == [
        "failed",
        "ok",
        "partial",
        "running",
    ]
    assert SyncTotal.objects.get(checkpoint=checkpoint, status="ok").runs == 40


def _inventory_pass(checkpoint, taken_at: datetime, size: int) -> None:
    for path, kind in (("offsets", "offsets"), ("commits", "commits")):
        DirectoryInventory.objects.create(
            checkpoint=checkpoint,
            taken_at=taken_at,
            path=path,
            kind=kind,
            files=size,
            size_bytes=size * 10,
            small_files=size,
            list_requests=1,
            get_requests=size,
        )


def test_old_inventory_passes_are_thinned_to_the_last_of_each_day_and_the_chart_still_draws(viewer_client, settings):
    checkpoint = make_checkpoint(name="orders", url="/nowhere/orders")
    settings.INVENTORY_HISTORY_DAYS = 2
    every_six_hours = [NOW - timedelta(hours=6 * n) for n in range(20)]  # five days, newest first
    for number, taken_at in enumerate(every_six_hours):
        _inventory_pass(checkpoint, taken_at, size=100 - number)

    pruned = retention.prune_history(NOW)

    cutoff = NOW - timedelta(days=2)
    kept = sorted(set(DirectoryInventory.objects.filter(checkpoint=checkpoint).values_list("taken_at", flat=True)))
    recent = sorted(t for t in every_six_hours if t >= cutoff)
    older_days = {t.date() for t in every_six_hours if t < cutoff}
    last_of_each_day = sorted(max(t for t in every_six_hours if t < cutoff and t.date() == day) for day in older_days)
    assert kept == last_of_each_day + recent
    assert pruned["inventory_rows"] == 2 * (len(every_six_hours) - len(kept))
    assert DirectoryInventory.objects.latest_for(checkpoint).first().taken_at == NOW
    figure = viewer_client.get(reverse("dashboards:inventory-growth-chart", args=[checkpoint.pk])).json()
    offsets_files = next(trace for trace in figure["data"] if trace["name"] == "offsets" and trace["yaxis"] == "y2")
    assert offsets_files["y"] == [100 - every_six_hours.index(taken_at) for taken_at in kept]


def test_beat_prunes_the_history_every_hour(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["prune-history"]
    app.loader.import_default_modules()  # what a worker imports at start; alone, nothing else did
    assert entry["schedule"] == 3600.0 and entry["task"] in app.tasks


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SKIP LOCKED is PostgreSQL's; SQLite runs one writer at a time"
)
def test_two_prunes_at_once_fold_each_run_once(settings, monkeypatch):
    checkpoint = make_checkpoint(name="orders", url="/nowhere/orders")
    _runs(checkpoint, days_ago=10, count=400)
    settings.SYNC_HISTORY_DAYS = 7
    monkeypatch.setattr(retention, "PRUNE_CHUNK_ROWS", 7)
    start = threading.Barrier(2)

    def prune() -> None:
        start.wait()
        try:
            retention.prune_sync_runs(checkpoint.pk, NOW - timedelta(days=7))
        finally:
            connection.close()

    threads = [threading.Thread(target=prune) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not SyncRun.objects.filter(checkpoint=checkpoint).exists()
    total = SyncTotal.objects.get(checkpoint=checkpoint, status="ok")
    assert (total.runs, total.read_calls) == (400, sum(range(1, 401)))
