"""The checkpoint list with 1,000 registered checkpoints and a million batches among them (issue 16).

Usage (from the repository root, PostgreSQL as in the README's test command; an idle machine)::

    .venv/bin/python -m bench.list_at_scale --checkpoints 1000 --batches-each 1000

1. Recreates the database ``ckptweb_load`` (shared with bench/load.py), migrates it, and writes
   ``--checkpoints`` checkpoints with ``--batches-each`` batches and as many progress events each
   (a batch a second, the newest ones in the last hour, so every row has a trend), the health
   figures a sync stores, and a spread of states: running, stopped, stalled, falling behind,
   failing to sync, damaged, copies of a query. ANALYZE.
2. Starts gunicorn and logs one session in.
3. Server side: ``--rounds`` rounds; in each, keeps busy with wrk (or ``--client python``) from one
   connection for ``--seconds`` the baseline (``/health/``, a request that reads no checkpoint) and
   then each variant of the list (the default order, each status filter, each sort, provider,
   scheme, findings, a search); prints requests, p50, p95 and p99 per round, then each variant's
   p95 over the rounds (min / median / max) and its requests in all, with the load average.
4. In Debian's chromium (Playwright), times a visit of the list to the table drawn
   (``--visits`` visits, first with an empty cache) and prints the median and range.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.load import (
    _percentile,
    _recreate_database,
    _start,
    _stop,
    cookie_header,
    gunicorn_command,
    logged_in_session,
)
from bench.page_load import CHROMIUM, CHROMIUM_ARGS
from bench.pages_at_scale import PASSWORD, USER, _empty_cache, _environment, _wait_for, migrate_with_user
from bench.wrk import require_wrk, run_one_client, run_wrk

FILL_SQL = (
    # Every checkpoint has its query; one in 50 shares the query of the one before (a copy).
    # The list and /metrics read no chart roll-ups: the rows say built, so no worker is asked to build them.
    """INSERT INTO dashboards_streamingquery (query_id, name, first_seen_at, rollups_built)
       SELECT md5('q' || g)::uuid, 'query_' || g, now(), true FROM generate_series(0, %(last_checkpoint)s) g""",
    # The figures a sync keeps on the row, with a spread of states: by g % 10, 0-5 running, 6 stopped (an hour ago),
    # 7 stalled (newest batch uncommitted 20 min ago), 8 falling behind (input over processed), 9 damaged
    # (a finding below).
    """INSERT INTO dashboards_checkpoint (name, url, is_enabled, sync_interval_seconds, sink_log_url,
           file_log_compact_interval, created_at, query_id, latest_batch_id, latest_batch_at, latest_committed_batch_id,
           uncommitted_batch_count, last_synced_at, root_problem, trigger_interval_ms, typical_gap_ms,
           recent_batch_duration_ms, recent_input_rate, recent_process_rate, status_figures_at, state_rows, state_bytes,
           state_providers, sync_lease_owner, timeline_rollups_built)
       SELECT 'q' || lpad(g::text, 5, '0'),
              CASE WHEN g %% 3 = 0 THEN 's3://lake/checkpoints/q' || g ELSE '/data/checkpoints/q' || g END,
              true, 30, '', 10, now(),
              (SELECT id FROM dashboards_streamingquery WHERE query_id = md5('q' || (g - (g %% 50 = 1)::int))::uuid),
              %(batches_each)s - 1,
              now() - CASE g %% 10 WHEN 6 THEN interval '1 hour' WHEN 7 THEN interval '20 minutes'
                                   ELSE interval '2 seconds' END,
              %(batches_each)s - 1 - (g %% 10 = 7)::int, (g %% 10 = 7)::int,
              now(), '', 1000, 1000, 300 + g %% 700, 100 + g %% 50, CASE WHEN g %% 10 = 8 THEN 50 ELSE 400 END,
              now(), g * 1000, g * 100000, CASE WHEN g %% 2 = 0 THEN 'hdfs' ELSE 'rocksdb' END, '', true
       FROM generate_series(0, %(last_checkpoint)s) g""",
    """INSERT INTO dashboards_batch (checkpoint_id, batch_id, offset_log_version, timestamp_ms, watermark_ms, conf,
           sources, is_committed, synced_at)
       SELECT c.id, b, 1, (extract(epoch FROM c.latest_batch_at) * 1000)::bigint - (%(batches_each)s - 1 - b) * 1000, 0,
              '{}', '[]', b <= c.latest_committed_batch_id, now()
       FROM dashboards_checkpoint c, generate_series(0, %(batches_each)s - 1) b""",
    """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, batch_duration_ms, duration_ms,
           num_input_rows, input_rows_per_second, processed_rows_per_second, event_time, sources, origin, received_at)
       SELECT c.query_id, b, c.latest_batch_at - (%(batches_each)s - 1 - b) * interval '1 second', 300 + (b * 7) %% 500,
              '{}', 100, 100, 400, '{}', '[]', 'listener', now()
       FROM dashboards_checkpoint c, generate_series(0, %(batches_each)s - 1) b
       WHERE c.id IN (SELECT min(id) FROM dashboards_checkpoint GROUP BY query_id)""",
    """INSERT INTO dashboards_syncrun (checkpoint_id, kind, started_at, finished_at, status, worker, files_read,
           bytes_read, list_calls, info_calls, read_calls, new_batches, new_commits, error_count, message)
       SELECT id, 'probe', now(), now(), CASE WHEN id %% 97 = 0 THEN 'failed' ELSE 'ok' END, 'bench', 2, 200, 0, 0, 2,
              1, 1, (id %% 97 = 0)::int, CASE WHEN id %% 97 = 0 THEN 'storage unreachable' ELSE '' END
       FROM dashboards_checkpoint""",
    """INSERT INTO dashboards_finding (checkpoint_id, code, path, severity, message, restart_impact,
           first_seen_at, last_seen_at)
       SELECT id, 'bench', 'state/0/0/1.delta', 30, 'bench finding', '', now(), now()
       FROM dashboards_checkpoint WHERE id %% 10 = 9""",
    "ANALYZE",
)
VARIANTS = {
    "default (worst first)": "/",
    "status=stopped": "/?status=stopped",
    "status=running": "/?status=running",
    "status=stalled": "/?status=stalled",
    "sort=-latest_batch": "/?sort=-latest_batch",
    "sort=duration": "/?sort=duration",
    "sort=-input_rate": "/?sort=-input_rate",
    "sort=-state_size": "/?sort=-state_size",
    "sort=-findings": "/?sort=-findings",
    "sort=name page 10": "/?sort=name&page=10",
    "provider=rocksdb": "/?provider=rocksdb",
    "scheme=s3": "/?scheme=s3",
    "findings=1": "/?findings=1",
    "q=q0099": "/?q=q0099",
}


def add_fill_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``_fill``: the server and how many checkpoints and batches each."""
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--checkpoints", type=int, default=1_000)
    parser.add_argument("--batches-each", type=int, default=1_000)


def _fill(args: argparse.Namespace) -> None:
    migrate_with_user(args)
    from django.db import connection

    started = time.perf_counter()
    values = {"last_checkpoint": args.checkpoints - 1, "batches_each": args.batches_each}
    with connection.cursor() as cursor:
        for sql in FILL_SQL:
            cursor.execute(sql, values)
    total = args.checkpoints * args.batches_each
    print(
        f"{args.checkpoints:,} checkpoints, {total:,} batches and progress "
        f"events written in {time.perf_counter() - started:.0f} s"
    )


def _browser_visits(base: str, visits: int) -> list[float]:
    """Milliseconds from navigation to the list's table drawn, per visit (the first with an empty cache)."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", USER)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        for _ in range(visits):
            started = time.perf_counter()
            page.goto(f"{base}/")
            page.wait_for_selector("#checkpoint-table tbody tr")
            times.append((time.perf_counter() - started) * 1000)
        browser.close()
    return times


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-list"))
    add_fill_arguments(parser)
    parser.add_argument(
        "--seconds", type=int, default=75, help="how long wrk keeps each variant busy in a round (1,000+ requests)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--visits", type=int, default=10)
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument(
        "--client",
        choices=("wrk", "python"),
        default="wrk",
        help="wrk, or one Python client back to back where wrk is not installed (bench/wrk.py run_one_client)",
    )
    parser.add_argument(
        "--redis-url", default="redis://127.0.0.1:6379/5", help="Redis database emptied and used as the shared cache"
    )
    return parser.parse_args()


# The baseline, interleaved with the variants in every round: a request of the same server that reads
# no checkpoint (the health check: one query and the broker's ping), the machine's floor at that moment.
BASELINE = ("baseline: /health/", "/health/")


def _time_variants(args: argparse.Namespace, base: str) -> None:
    """``--rounds`` rounds of one client on the baseline then each variant for ``--seconds``; a row each,
    then per variant the p95 (min / median / max over the rounds) and the requests in all."""
    if args.client == "wrk":
        require_wrk()
    cookie = cookie_header(logged_in_session(base, USER, PASSWORD))
    rows: dict[str, list[dict]] = {}
    for number in range(1, args.rounds + 1):
        print(f"\nround {number}, load average {_load()}")
        print(f"{'list variant':<24} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
        for name, path in (BASELINE, *VARIANTS.items()):
            row = _one_client_figures(args, base + path, cookie)
            rows.setdefault(name, []).append(row)
            print(
                f"{name:<24} {row['requests']:>9} {row['errors']:>7} "
                f"{row['p50_ms']:>8.0f} {row['p95_ms']:>8.0f} {row['p99_ms']:>8.0f}"
            )
    print(f"\n{args.rounds} rounds, load average {_load()}")
    print(f"{'list variant':<24} {'requests':>9} {'errors':>7} {'p95 ms min / median / max':>28}")
    for name, runs in rows.items():
        p95 = sorted(run["p95_ms"] for run in runs)
        spread = f"{p95[0]:.0f} / {statistics.median(p95):.0f} / {p95[-1]:.0f}"
        print(f"{name:<24} {sum(r['requests'] for r in runs):>9} {sum(r['errors'] for r in runs):>7} {spread:>28}")


def _load() -> str:
    return " ".join(f"{figure:.2f}" for figure in os.getloadavg())


def _one_client_figures(args: argparse.Namespace, url: str, cookie: str) -> dict:
    """One connection on ``url`` for ``--seconds``: by wrk, or by one Python client (``--client``)."""
    if args.client == "wrk":
        return run_wrk(url, connections=1, seconds=args.seconds, headers={"Cookie": cookie})
    return run_one_client(url, seconds=args.seconds, headers={"Cookie": cookie})


def _time_browser(args: argparse.Namespace, base: str) -> None:
    visits = _browser_visits(base, args.visits)
    print(
        f"\nchromium, navigation to the table drawn, {len(visits)} visits: first {visits[0]:.0f} ms, "
        f"median {statistics.median(visits):.0f} ms, "
        f"p95 {_percentile(visits, 0.95):.0f} ms, max {max(visits):.0f} ms"
    )


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    _recreate_database(args.database_url)
    _fill(args)
    _empty_cache(args.redis_url)
    base = f"http://127.0.0.1:{args.port}"
    gunicorn = gunicorn_command(args.port, args.gunicorn_workers, timeout_seconds=120)
    server = _start(gunicorn, _environment(args), args.workdir / "gunicorn.log")
    try:
        _wait_for(base)
        _time_variants(args, base)
        _time_browser(args, base)
    finally:
        _stop([server])


if __name__ == "__main__":
    main()
