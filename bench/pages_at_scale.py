"""P4: the query page, its batch table and its charts on one query with a million batches (issue 6).

Usage (from the repository root, PostgreSQL as in the README's test command; an idle machine)::

    .venv/bin/python -m bench.pages_at_scale --batches 1000000

1. Recreates the database ``ckptweb_load`` (shared with bench/load.py; ``CKPTWEB_BENCH_DATABASE``
   names another), migrates it, and fills one checkpoint with ``--batches`` batches and one
   stateful operator's progress per batch (and ``--state-partitions`` state store rows), with
   ``INSERT ... SELECT generate_series`` (a slow batch and a cache miss now and then, so the
   downsampled charts have peaks to keep), then ANALYZE.
   ``--reuse`` measures a database that already holds one such checkpoint instead (bench/
   cold_charts.py's fill of 10M batches takes half an hour), and reads ``--batches`` from it.
2. Starts gunicorn (``--gunicorn-workers``) with production's settings (bench.load
   PRODUCTION_SETTINGS) and Redis (``--redis-url``, emptied) as the shared cache, and logs one
   session in.
3. Times the first request of each page (empty caches); then ``--rounds`` rounds: for 1 client and
   for ``--clients`` concurrent clients, keeps the baseline (/health/, which reads no checkpoint)
   and each page and read API endpoint busy for ``--seconds`` with wrk (bench/wrk.py; Debian's
   package) and prints requests, errors and p50/p95/p99 per page, with the load average; then the
   spread of the p95 (1 client) and p99 (``--clients``) over the rounds; then, as a running query
   adds ``--live-batches`` batches one by one, the charts after each.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import requests

from bench.load import (
    PRODUCTION_SETTINGS,
    _database_url,
    _percentile,
    _recreate_database,
    _start,
    _stop,
    chosen,
    cookie_header,
    gunicorn_command,
    logged_in_session,
)
from bench.wrk import require_wrk, run_wrk

USER, PASSWORD = "pages", "pages-bench-password"
START_MS = 1_700_000_000_000

FILL_SQL = (
    # A batch a second, every 997th an hour late; the newest one not yet committed.
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, %(start)s + g * 1000 + (g / 997) * 3600000, %(start)s + g * 1000 - 10000, '{}',
              '["{\\"0\\":1}"]', g < %(last)s, now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, duration_ms, event_time, sources,
           origin, received_at)
       SELECT %(query)s, g, to_timestamp((%(start)s + g * 1000) / 1000.0), '{}', '{}', '[]', 'listener', now()
       FROM generate_series(0::bigint, %(last)s::bigint) g""",
    """INSERT INTO dashboards_stateoperatormetrics (progress_id, operator_index, operator_name, num_rows_total,
           memory_used_bytes, custom_metrics)
       SELECT id, 0, 'dedupe', batch_id %% 5000, 1000000 + batch_id %% 777,
              jsonb_build_object('loadedMapCacheHitCount', CASE WHEN batch_id %% 1009 = 0 THEN 0 ELSE 9 END,
                                 'loadedMapCacheMissCount', 1)
       FROM dashboards_batchprogress WHERE query_id = %(query)s""",
    "ANALYZE",
)
# --state-partitions store directories of the newest version, 200 partitions an operator (a
# stream-stream join has 4 stores an operator: 800 for 200 shuffle partitions).
STATE_FILL_SQL = """INSERT INTO dashboards_statepartition (checkpoint_id, operator, partition, store, provider, path,
       latest_version, earliest_version, maintenance_probed_version, snapshot_version, delta_chain, load_files,
       load_bytes, bytes_on_disk, rows, rows_version, uncommitted_versions, note, variables, updated_at)
   SELECT %(checkpoint)s, g / 200, g %% 200, 'default', 'hdfs', 'state/' || g / 200 || '/' || g %% 200,
          %(last)s, %(last)s - 100, %(last)s, %(last)s - g %% 7, g %% 7, 1 + g %% 7, 4096 * (1 + g %% 7),
          100000 + g, 1000 + g, %(last)s, '[]', '', '[]', now()
   FROM generate_series(0, %(partitions)s - 1) g"""


def _environment(args: argparse.Namespace) -> dict[str, str]:
    environment = {
        **os.environ,
        "CKPTWEB_DATA_DIR": str(args.workdir),
        "CKPTWEB_DATABASE_URL": _database_url(args.database_url),
        **PRODUCTION_SETTINGS,
        "CKPTWEB_LOG_LEVEL": "WARNING",
    }
    # With Redis the web workers share one cache, as in a deployment with the broker; without,
    # each gunicorn worker has its own (LocMem) and meets every chart cold once.
    environment.pop("CKPTWEB_REDIS_URL", None)
    if args.redis_url:
        environment["CKPTWEB_REDIS_URL"] = args.redis_url
    return environment


def _empty_cache(redis_url: str) -> None:
    """Start from a cold cache: the database of ``--redis-url`` is the bench's own."""
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()


def set_up_django(args: argparse.Namespace) -> None:
    """Set Django up in this process on the bench's database."""
    os.environ.update(_environment(args))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import django

    django.setup()


def migrate_with_user(args: argparse.Namespace) -> None:
    """Set Django up in this process on the bench's database, migrate it and create the bench's user."""
    set_up_django(args)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user(USER, password=PASSWORD)


def _fill(args: argparse.Namespace) -> int:
    """Migrate, create the user and the long checkpoint (in this process); return its id."""
    import uuid

    migrate_with_user(args)
    from dashboards.models import Checkpoint, StreamingQuery

    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    checkpoint = Checkpoint.objects.create(name="million", url="/nowhere/million", query=query)
    started = time.perf_counter()
    _execute_fill_sql(checkpoint.pk, query.pk, args.batches, args.state_partitions)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        latest_batch_id=args.batches - 1, latest_committed_batch_id=args.batches - 2
    )
    print(f"{args.batches:,} batches written in {time.perf_counter() - started:.0f} s")
    build_rollups_of_filled_rows(checkpoint.pk, query.pk)
    return checkpoint.pk


def _filled_checkpoint(args: argparse.Namespace) -> int | None:
    """The id of the one checkpoint a former fill left in the bench's database (``--batches`` set
    from it), or None when there is no such database or checkpoint."""
    from django.db import DatabaseError, connections

    set_up_django(args)
    from dashboards.models import Checkpoint

    try:
        rows = list(Checkpoint.objects.filter(timeline_rollups_built=True).values_list("pk", "latest_batch_id"))
    except DatabaseError:
        return None
    finally:
        connections.close_all()  # before a recreate drops the database under it
    if len(rows) != 1 or rows[0][1] is None:
        return None
    args.batches = rows[0][1] + 1
    print(f"kept the database's checkpoint of {args.batches:,} batches (--reuse)")
    return rows[0][0]


def _execute_fill_sql(checkpoint_pk: int, query_pk: int, batches: int, state_partitions: int = 0) -> None:
    from django.db import connection

    values = {"checkpoint": checkpoint_pk, "query": query_pk, "start": START_MS, "last": batches - 1}
    with connection.cursor() as cursor:
        if state_partitions:
            cursor.execute(STATE_FILL_SQL, {**values, "partitions": state_partitions})
        for sql in FILL_SQL:
            cursor.execute(sql, values)


def build_rollups_of_filled_rows(checkpoint_pk: int, query_pk: int) -> None:
    """The sync and the ingest keep the charts' roll-ups as rows arrive; rows filled in SQL have
    theirs built once, by the worker's build (workers.rollup_builds), as after an upgrade."""
    from dashboards.models import Checkpoint, StreamingQuery
    from workers.rollup_builds import build_runtime_rollups, build_timeline_rollups

    Checkpoint.objects.filter(pk=checkpoint_pk).update(timeline_rollups_built=False)
    StreamingQuery.objects.filter(pk=query_pk).update(rollups_built=False)
    started = time.perf_counter()
    if not (build_timeline_rollups(checkpoint_pk) and build_runtime_rollups(query_pk)):
        raise SystemExit("the chart roll-ups were not built: another build held them")
    print(f"their chart roll-ups built in {time.perf_counter() - started:.0f} s")


LIVE_BATCH_SQL = (
    # One more batch as a running query adds it: the previous one commits, a new one is planned,
    # and its progress arrives (same shapes as FILL_SQL).
    "UPDATE dashboards_batch SET is_committed = true WHERE checkpoint_id = %(checkpoint)s AND batch_id = %(batch)s - 1",
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       VALUES (%(checkpoint)s, %(batch)s, 1, %(start)s + %(batch)s * 1000, %(start)s + %(batch)s * 1000 - 10000, '{}',
              '[]', false, now())""",
    """UPDATE dashboards_checkpoint SET latest_batch_id = %(batch)s, latest_committed_batch_id = %(batch)s - 1
       WHERE id = %(checkpoint)s""",
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, duration_ms, event_time, sources,
           origin, received_at)
       VALUES (%(query)s, %(batch)s, to_timestamp((%(start)s + %(batch)s * 1000) / 1000.0), '{}', '{}', '[]',
              'listener', now())""",
    """INSERT INTO dashboards_stateoperatormetrics (progress_id, operator_index, operator_name, num_rows_total,
           memory_used_bytes, custom_metrics)
       SELECT id, 0, 'dedupe', 1, 1000000, '{}'
       FROM dashboards_batchprogress WHERE query_id = %(query)s AND batch_id = %(batch)s""",
)


def _live_batches(
    base: str, session: requests.Session, checkpoint: int, batches: int, count: int
) -> dict[str, list[float]]:
    """Add ``count`` batches one by one; after each, time each chart once (its cache was keyed on the old batches)."""
    from dashboards.models import Checkpoint

    query = Checkpoint.objects.get(pk=checkpoint).query_id
    pages = {name: url for name, url in _pages(checkpoint, batches).items() if name in ("timeline", "runtime-charts")}
    times: dict[str, list[float]] = {name: [] for name in pages}
    for batch in range(batches, batches + count):
        _add_live_batch(checkpoint, query, batch)
        for name, url in pages.items():
            times[name].append(_time_once(base, session, url))
    return times


def _add_live_batch(checkpoint: int, query: int, batch: int) -> None:
    """Batch ``batch`` and its progress, as a running query, the sync and the listener add them."""
    from django.db import connection

    from dashboards.query_page.runtime_series import refresh_runtime_rollups

    with connection.cursor() as cursor:
        for sql in LIVE_BATCH_SQL:
            cursor.execute(sql, {"checkpoint": checkpoint, "query": query, "start": START_MS, "batch": batch})
    refresh_runtime_rollups(query, [batch])  # as the ingest API does after storing the progress


def _pages(checkpoint: int, batches: int) -> dict[str, str]:
    base = f"/checkpoints/{checkpoint}"
    return {
        "page": f"{base}/",
        "batches": f"{base}/panels/batches/",
        "batches-deep": f"{base}/panels/batches/?before={batches // 2}",
        "timeline": f"{base}/charts/timeline.json",
        "timeline-zoom": f"{base}/charts/timeline.json?from={batches // 2}&to={batches // 2 + 1000}",
        "runtime-charts": f"{base}/charts/runtime.json",
        # The read API (session auth here; a token costs the same lookup).
        "api-batches": f"/api/v1{base}/batches/",
        "api-batches-deep": f"/api/v1{base}/batches/?after={batches // 2}",
        "api-progress-range": f"/api/v1{base}/progress/?from={batches // 2}&to={batches // 2 + 99}",
    }


def _wait_for(base: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/health/", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit("gunicorn did not answer")


def _time_once(base: str, session: requests.Session, url: str) -> float:
    """Milliseconds of one request of ``url``; a failed answer stops the bench."""
    started = time.perf_counter()
    status = session.get(base + url, timeout=120).status_code
    if status != 200:
        raise SystemExit(f"{url} answered {status}")
    return (time.perf_counter() - started) * 1000


def _report(rows: list[tuple[str, int, dict]]) -> None:
    print(f"\n{'page':<18} {'clients':>7} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for page, clients, figures in rows:
        print(
            f"{page:<18} {clients:>7} {figures['requests']:>8} {figures['errors']:>6} "
            f"{figures['p50_ms']:>8.0f} {figures['p95_ms']:>8.0f} {figures['p99_ms']:>8.0f}"
        )


def _add_fill_arguments(parser: argparse.ArgumentParser) -> None:
    """What the bench's database holds, or that it is kept."""
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument(
        "--state-partitions", type=int, default=0, help="state store rows the fill adds (200 an operator)"
    )
    parser.add_argument("--reuse", action="store_true", help="keep a database that holds one filled checkpoint")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-pages"))
    _add_fill_arguments(parser)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=15, help="how long wrk keeps each page busy at each concurrency")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", help="comma-separated names of the pages to keep busy (default: every page)")
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument(
        "--live-batches", type=int, default=20, help="batches added one by one at the end, each followed by the charts"
    )
    parser.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/5",
        help="Redis database emptied and used as the shared cache ('' for a cache per gunicorn worker)",
    )
    return parser.parse_args()


def _measure(args: argparse.Namespace, base: str, checkpoint: int) -> None:
    """Time each page cold, then under wrk at one and ``--clients`` connections, then after new batches."""
    require_wrk()
    session = logged_in_session(base, USER, PASSWORD)
    cookie = cookie_header(session)
    pages = chosen(_pages(checkpoint, args.batches), args.only, "page")
    # The first request of each page meets an empty chart cache (a miss): timed on its own.
    cold = {page: _time_once(base, session, url) for page, url in pages.items()}
    rounds = []
    for number in range(1, args.rounds + 1):
        print(f"\nround {number}, load average {_load()}")
        rounds.append(_load_pages(args, base, {**dict([BASELINE]), **pages}, cookie))
        _report(rounds[-1])
    print(f"\nload average at the end {_load()}")
    _report_rounds(rounds, args.clients)
    print(
        "\nfirst request of each page (empty caches), ms: " + ", ".join(f"{page} {ms:.0f}" for page, ms in cold.items())
    )
    live = _live_batches(base, session, checkpoint, args.batches, args.live_batches)
    for name, times in live.items() if args.live_batches else ():
        print(
            f"{name} after each of {len(times)} new batches: "
            f"p50 {_percentile(times, 0.5):.0f} ms, max {max(times):.0f} ms"
        )


# Interleaved with the pages in every round: a request of the same server that reads no checkpoint
# (the health check), the machine's floor at that moment.
BASELINE = ("baseline /health/", "/health/")


def _load() -> str:
    return " ".join(f"{figure:.2f}" for figure in os.getloadavg())


def _report_rounds(rounds: list[list[tuple[str, int, dict]]], clients: int) -> None:
    """Per page, the p95 with one client and the p99 with ``clients`` (min / median / max over the rounds)."""
    figures: dict[tuple[str, int], list[dict]] = {}
    for rows in rounds:
        for page, connections, row in rows:
            figures.setdefault((page, connections), []).append(row)
    print(
        f"\n{len(rounds)} rounds: {'page':<18} {'requests':>9} {'errors':>6}  p95 (1 client) / p99 ({clients} clients)"
    )
    for (page, connections), runs in figures.items():
        if connections == 1:
            many = figures[(page, clients)]
            print(
                f"{page:<28} {sum(r['requests'] for r in runs + many):>9} {sum(r['errors'] for r in runs + many):>6}  "
                f"{_spread(r['p95_ms'] for r in runs)} / {_spread(r['p99_ms'] for r in many)} ms"
            )


def _spread(values) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.0f} / {ordered[len(ordered) // 2]:.0f} / {ordered[-1]:.0f}"


def _load_pages(args: argparse.Namespace, base: str, pages: dict[str, str], cookie: str) -> list[tuple[str, int, dict]]:
    """wrk's figures of each page at one and at ``--clients`` connections."""
    rows = []
    for clients in (1, args.clients):
        for page, url in pages.items():
            figures = run_wrk(base + url, connections=clients, seconds=args.seconds, headers={"Cookie": cookie})
            rows.append((page, clients, figures))
    return rows


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.reuse:
        checkpoint = _filled_checkpoint(args)
        if checkpoint is None:
            raise SystemExit(f"--reuse: {_database_url(args.database_url)} holds no filled checkpoint (fill it first)")
    else:
        _recreate_database(args.database_url)
        checkpoint = _fill(args)
    _empty_cache(args.redis_url)
    base = f"http://127.0.0.1:{args.port}"
    gunicorn = gunicorn_command(args.port, args.gunicorn_workers, timeout_seconds=120)
    server = _start(gunicorn, _environment(args), args.workdir / "gunicorn.log")
    try:
        _wait_for(base)
        _measure(args, base, checkpoint)
    finally:
        _stop([server])


if __name__ == "__main__":
    main()
