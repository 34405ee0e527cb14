"""The Runtime section's chart endpoint on one query with a long history (issue 17).

Usage (from the repository root, PostgreSQL as in the README's test command; an idle machine)::

    .venv/bin/python -m bench.runtime_charts --batches 1000000

1. Recreates the database ``ckptweb_runtime_bench`` (its own: bench/load.py and pages_at_scale.py
   share ``ckptweb_load``), migrates it and fills one checkpoint with ``--batches`` batches, their
   progress with every figure the Runtime charts draw (a slow batch every 997, a rate spike every
   1,009) and one stateful operator each, ten runs (nine restarts), with ``INSERT ... SELECT
   generate_series``, then ANALYZE.
2. In this process (Django's test client, the local-memory cache, one signed-in user) asks for
   ``/checkpoints/<id>/charts/runtime.json`` ``--repeats`` times each way and prints the medians:
   the first request (cold: both downsampling reads, the marks, nine figures), the same request
   again (the cached answer), and a request after one new batch (the settled buckets come from the
   cache, the newest is read again); with the answer's size and the CPU time of this process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from urllib.parse import urlsplit, urlunsplit

DATABASE = "ckptweb_runtime_bench"
START_MS = 1_700_000_000_000
RUNS = 10

FILL_SQL = (
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, %(start)s + g * 1000, %(start)s + g * 1000 - 10000,
              '{"spark.sql.shuffle.partitions": "8"}', '["{\\"0\\":1}"]', g < %(last)s, now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    """INSERT INTO dashboards_batchprogress (query_id, run_id, batch_id, timestamp, batch_duration_ms, duration_ms,
           num_input_rows, input_rows_per_second, processed_rows_per_second, watermark, event_time, sources, origin,
           received_at)
       SELECT %(query)s, %(first_run)s + g / %(per_run)s, g, to_timestamp((%(start)s + g * 1000) / 1000.0),
              CASE WHEN g %% 997 = 0 THEN 60000 ELSE 400 + g %% 50 END,
              jsonb_build_object('addBatch', 300, 'walCommit', 40, 'queryPlanning', 30, 'getBatch', 5,
                                 'latestOffset', 10, 'commitOffsets', 15, 'triggerExecution', 400),
              100 + g %% 7, CASE WHEN g %% 1009 = 0 THEN 50000 ELSE 100 + g %% 13 END, 250.0,
              to_timestamp((%(start)s + g * 1000 - 10000) / 1000.0), '{}', '[]', 'listener', now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    """INSERT INTO dashboards_stateoperatormetrics (progress_id, operator_index, operator_name, num_rows_total,
           num_rows_updated, num_rows_removed, num_rows_dropped_by_watermark, memory_used_bytes, custom_metrics)
       SELECT id, 0, 'dedupe', batch_id %% 5000, batch_id %% 11, batch_id %% 3, 0, 1000000 + batch_id %% 777,
              jsonb_build_object('loadedMapCacheHitCount', CASE WHEN batch_id %% 1009 = 0 THEN 0 ELSE 9 END,
                                 'loadedMapCacheMissCount', 1)
       FROM dashboards_batchprogress WHERE query_id = %(query)s""",
    "ANALYZE",
)


def _setup(database_url: str) -> None:
    """Recreate the bench's database, point Django at it and migrate."""
    import psycopg

    with psycopg.connect(database_url.replace("postgres://", "postgresql://"), autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {DATABASE}")
    os.environ["CKPTWEB_DATABASE_URL"] = urlunsplit(urlsplit(database_url)._replace(path=f"/{DATABASE}"))
    os.environ.pop("CKPTWEB_REDIS_URL", None)  # the local-memory cache: this process only
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _fill(batches: int):
    """The long checkpoint with its runs and progress; return it."""
    import uuid

    from dashboards.models import Checkpoint, StreamingQuery

    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    checkpoint = Checkpoint.objects.create(name="long", url="/nowhere/long", query=query)
    _fill_batches(checkpoint, query, batches)
    # The ingest keeps the charts' roll-ups as progress arrives; rows filled in SQL need them built once.
    from dashboards.query_page.runtime_series import rebuild_runtime_rollups

    started = time.perf_counter()
    rebuild_runtime_rollups(query.pk)
    print(f"their chart roll-ups built in {time.perf_counter() - started:.0f} s")
    return checkpoint


def _fill_batches(checkpoint, query, batches: int) -> None:
    """The runs and ``batches`` batches of progress, written in SQL, and the checkpoint's latest batch ids."""
    from dashboards.models import Checkpoint

    per_run = batches // RUNS
    first_run = _create_runs(query, batches, per_run)
    started = time.perf_counter()
    _execute_fill_sql(
        {
            "checkpoint": checkpoint.pk,
            "query": query.pk,
            "start": START_MS,
            "last": batches - 1,
            "first_run": first_run,
            "per_run": per_run,
        }
    )
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        latest_batch_id=batches - 1, latest_committed_batch_id=batches - 2
    )
    print(f"{batches:,} batches written in {time.perf_counter() - started:.0f} s")


def _create_runs(query, batches: int, per_run: int) -> int:
    """RUNS runs of ``per_run`` batches each; return the first one's id (FILL_SQL counts on from it)."""
    import uuid

    from dashboards.models import QueryRun

    runs = [
        QueryRun.objects.create(query=query, run_id=uuid.uuid4(), last_batch_id=min(batches, (k + 1) * per_run) - 1)
        for k in range(RUNS)
    ]
    assert [run.pk for run in runs] == list(range(runs[0].pk, runs[0].pk + RUNS)), "run ids must be consecutive"
    return runs[0].pk


def _execute_fill_sql(parameters: dict[str, int]) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(sql, parameters)


def _add_batch(checkpoint, batch: int) -> None:
    """One more batch's progress, as a running query's listener posts it."""
    from datetime import UTC, datetime

    from dashboards.models import BatchProgress, StateOperatorMetrics
    from dashboards.query_page.runtime_series import refresh_runtime_rollups

    progress = BatchProgress.objects.create(
        query_id=checkpoint.query_id,
        batch_id=batch,
        timestamp=datetime.fromtimestamp((START_MS + batch * 1000) / 1000, tz=UTC),
        batch_duration_ms=420,
        duration_ms={"addBatch": 300},
        num_input_rows=100,
        input_rows_per_second=100.0,
        processed_rows_per_second=250.0,
        origin="listener",
    )
    StateOperatorMetrics.objects.create(progress=progress, operator_index=0, operator_name="dedupe", num_rows_total=1)
    refresh_runtime_rollups(checkpoint.query_id, [batch])  # as the ingest API does


def _timed(client, url: str) -> tuple[float, float, int]:
    """Wall ms, CPU ms of this process, and bytes of one request."""
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    _setup(args.database_url)
    checkpoint = _fill(args.batches)
    _report(_time_requests(checkpoint, args), args.repeats)


def _time_requests(checkpoint, args: argparse.Namespace) -> dict[str, list[tuple[float, float, int]]]:
    """The runtime charts' request timed cold, cached, and after a new batch, ``--repeats`` times each."""
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.test import Client
    from django.urls import reverse

    client = Client(HTTP_HOST="localhost")
    client.force_login(get_user_model().objects.create_user("bench"))
    url = reverse("dashboards:runtime-charts", args=[checkpoint.pk])
    figures = {"cold": [], "cached": [], "after a new batch": []}
    for repeat in range(args.repeats):
        cache.clear()
        figures["cold"].append(_timed(client, url))
        figures["cached"].append(_timed(client, url))
        _add_batch(checkpoint, args.batches + repeat)
        figures["after a new batch"].append(_timed(client, url))
    return figures


def _report(figures: dict[str, list[tuple[float, float, int]]], repeats: int) -> None:
    print(
        f"{'request':<18} {'wall ms':>8} {'cpu ms':>8} {'bytes':>9}   (medians of {repeats}; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    for name, times in figures.items():
        print(
            f"{name:<18} {statistics.median(t[0] for t in times):>8.0f} {statistics.median(t[1] for t in times):>8.0f} "
            f"{statistics.median(t[2] for t in times):>9,}"
        )


if __name__ == "__main__":
    main()
