"""P4: the query page, its batch table and its charts on one query with a million batches (issue 6).

Usage (from the repository root, PostgreSQL as in the README's test command; an idle machine)::

    .venv/bin/python -m bench.pages_at_scale --batches 1000000

1. Recreates the database ``ckptweb_load`` (shared with bench/load.py), migrates it, and fills one
   checkpoint with ``--batches`` batches and one stateful operator's progress per batch, with
   ``INSERT ... SELECT generate_series`` (a slow batch and a cache miss now and then, so the
   downsampled charts have peaks to keep), then ANALYZE.
2. Starts gunicorn (``--gunicorn-workers``) and logs one session in per client.
3. For 1 client and for ``--clients`` concurrent clients (threads), requests each page
   ``--requests`` times and prints p50/p95/p99 per page.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench.load import _database_url, _percentile, _recreate_database, _start, _stop

USER, PASSWORD = "pages", "pages-bench-password"
START_MS = 1_700_000_000_000

FILL_SQL = (
    # A batch a second, every 997th an hour late; the newest one not yet committed.
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf, sources,
           is_committed, synced_at)
       SELECT %(checkpoint)s, g, 1, %(start)s + g * 1000 + (g / 997) * 3600000, %(start)s + g * 1000 - 10000, '{}',
              '["{\\"0\\":1}"]', g < %(last)s, now()
       FROM generate_series(0, %(last)s) g""",
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, duration_ms, event_time, sources, origin, received_at)
       SELECT %(query)s, g, to_timestamp((%(start)s + g * 1000) / 1000.0), '{}', '{}', '[]', 'listener', now()
       FROM generate_series(0, %(last)s) g""",
    """INSERT INTO dashboards_stateoperatormetrics (progress_id, operator_index, operator_name, num_rows_total, memory_used_bytes,
           custom_metrics)
       SELECT id, 0, 'dedupe', batch_id %% 5000, 1000000 + batch_id %% 777,
              jsonb_build_object('loadedMapCacheHitCount', CASE WHEN batch_id %% 1009 = 0 THEN 0 ELSE 9 END, 'loadedMapCacheMissCount', 1)
       FROM dashboards_batchprogress WHERE query_id = %(query)s""",
    "ANALYZE",
)


def _environment(args: argparse.Namespace) -> dict[str, str]:
    environment = {
        **os.environ,
        "CKPTWEB_DATA_DIR": str(args.workdir),
        "CKPTWEB_DATABASE_URL": _database_url(args.database_url),
        "CKPTWEB_DEBUG": "true",
        "CKPTWEB_LOG_LEVEL": "WARNING",
    }
    environment.pop("CKPTWEB_REDIS_URL", None)
    return environment


def _fill(args: argparse.Namespace) -> int:
    """Migrate, create the user and the long checkpoint (in this process); return its id."""
    os.environ.update(_environment(args))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import uuid

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    from django.db import connection

    from dashboards.models import Checkpoint, StreamingQuery

    get_user_model().objects.create_user(USER, password=PASSWORD)
    query = StreamingQuery.objects.create(query_id=uuid.uuid4())
    checkpoint = Checkpoint.objects.create(name="million", url="/nowhere/million", query=query)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(sql, {"checkpoint": checkpoint.pk, "query": query.pk, "start": START_MS, "last": args.batches - 1})
    Checkpoint.objects.filter(pk=checkpoint.pk).update(latest_batch_id=args.batches - 1, latest_committed_batch_id=args.batches - 2)
    print(f"{args.batches:,} batches written in {time.perf_counter() - started:.0f} s")
    return checkpoint.pk


def _pages(checkpoint: int, batches: int) -> dict[str, str]:
    base = f"/checkpoints/{checkpoint}"
    return {
        "page": f"{base}/",
        "batches": f"{base}/panels/batches/",
        "batches-deep": f"{base}/panels/batches/?before={batches // 2}",
        "timeline": f"{base}/charts/timeline.json",
        "timeline-zoom": f"{base}/charts/timeline.json?from={batches // 2}&to={batches // 2 + 1000}",
        "state-chart": f"{base}/charts/state-metrics.json",
    }


def _session(base: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/login/")
    response = session.post(
        f"{base}/login/", data={"username": USER, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        allow_redirects=False,
    )
    if response.status_code != 302:
        raise SystemExit(f"login failed: {response.status_code}")
    return session


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


def _measure(base: str, sessions: list[requests.Session], url: str, count: int) -> tuple[list[float], int]:
    """Request ``url`` ``count`` times spread over the sessions, as many at once as there are sessions."""

    def one(number: int) -> tuple[float, bool]:
        started = time.perf_counter()
        ok = sessions[number % len(sessions)].get(base + url, timeout=120).status_code == 200
        return (time.perf_counter() - started) * 1000, ok

    with ThreadPoolExecutor(len(sessions)) as pool:
        results = list(pool.map(one, range(count)))
    return [elapsed for elapsed, _ in results], sum(1 for _, ok in results if not ok)


def _report(rows: list[tuple[str, int, list[float], int]]) -> None:
    print(f"\n{'page':<14} {'clients':>7} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for page, clients, times, errors in rows:
        print(f"{page:<14} {clients:>7} {len(times):>8} {errors:>6} "
              f"{_percentile(times, .5):>8.0f} {_percentile(times, .95):>8.0f} {_percentile(times, .99):>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-pages"))
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=100, help="requests per page and concurrency level")
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    _recreate_database(args.database_url)
    checkpoint = _fill(args)
    base = f"http://127.0.0.1:{args.port}"
    gunicorn = [sys.executable, "-m", "gunicorn", "ckptweb.wsgi", "--bind", f"127.0.0.1:{args.port}",
                "--workers", str(args.gunicorn_workers), "--timeout", "120"]
    server = _start(gunicorn, _environment(args), args.workdir / "gunicorn.log")
    try:
        _wait_for(base)
        sessions = [_session(base) for _ in range(args.clients)]
        rows = []
        for clients in (1, args.clients):
            for page, url in _pages(checkpoint, args.batches).items():
                _measure(base, sessions[:clients], url, min(clients, 5))  # warm the workers' connections
                times, errors = _measure(base, sessions[:clients], url, args.requests)
                rows.append((page, clients, times, errors))
        _report(rows)
    finally:
        _stop([server])


if __name__ == "__main__":
    main()
