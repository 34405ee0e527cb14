"""Load: many users on the pages and the read API while two workers keep many checkpoints in sync (issue 8).

Usage (from the repository root; PostgreSQL and Redis as in the README's test command)::

    .venv/bin/python -m bench.load --workdir /tmp/ckptweb-load --checkpoints 1000 --users 50 --seconds 120 --interval 60

1. Creates (or empties) the database ``ckptweb_load`` on the PostgreSQL server of
   ``--database-url``, migrates it, writes ``--checkpoints`` checkpoints of ``--batches`` batches
   (bench/checkpoint_history.py, copies of a PySpark-written fixture) and registers them with a
   ``--interval`` second sync interval (celery beat's table, as the UI does); creates the user and
   an API token for it.
2. Starts celery beat, ``--workers`` Celery workers (``--concurrency`` processes each) on a Redis
   database of its own, and gunicorn.
3. Waits until every checkpoint has been synced once and stores one progress event per batch
   (the copies share the fixture's query id, so one query's progress), logs the user in, then for
   ``--seconds`` keeps ``--users`` requests in flight with wrk (bench/wrk.py; Debian's package),
   spread over the kinds of page: a random page of the checkpoint list, a random checkpoint's
   page, its batch table panel, its timeline chart, its health panel and, with the token as a
   machine would, the read API's checkpoint list, a checkpoint's first page of batches and a range
   of its progress; each kind is one wrk process with its share of the connections, each
   connection asking again as soon as it has its answer. Meanwhile a new batch is written to a
   tenth of the checkpoints every few seconds.
4. Prints requests, errors and latency percentiles per kind of page, the throughput and error
   rate, and for the syncs: the largest and median gap between two syncs of one checkpoint during
   the measurement, and how many checkpoints went more than 1.5 intervals without a sync.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

from bench.checkpoint_history import read_template, write_batches
from bench.wrk import require_wrk, wrk_command, wrk_figures

REPO_DIR = Path(__file__).resolve().parent.parent
PASSWORD = "load-test-password"
PAGES = ("list", "detail", "batches", "timeline", "health", "api-list", "api-batches", "api-progress")
CELERY = [sys.executable, "-m", "celery", "-A", "ckptweb"]
# One event per batch of the history, as a listener sends them, for the progress range to read.
PROGRESS_SQL = """INSERT INTO dashboards_batchprogress (query_id, batch_id, timestamp, duration_ms, event_time, sources,
        origin, received_at)
    SELECT q.id, g, now(), '{}', '{}', '[]', 'listener', now()
    FROM dashboards_streamingquery q, generate_series(0, %s) g
    ON CONFLICT DO NOTHING"""


# Benches that recreate their database use this name: another on the same server while one runs.
BENCH_DATABASE = os.environ.get("CKPTWEB_BENCH_DATABASE", "ckptweb_load")


def _database_url(server_url: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}"))


def _recreate_database(server_url: str) -> None:
    import psycopg

    with psycopg.connect(server_url.replace("postgres://", "postgresql://"), autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {BENCH_DATABASE}")


def _environment(args: argparse.Namespace) -> dict[str, str]:
    return {
        **os.environ,
        "CKPTWEB_DATA_DIR": str(args.workdir),
        "CKPTWEB_DATABASE_URL": _database_url(args.database_url),
        "CKPTWEB_REDIS_URL": args.redis_url,
        "CKPTWEB_CHECKPOINT_ROOTS": str(args.workdir / "checkpoints"),
        "CKPTWEB_SYNC_INTERVAL_SECONDS": str(args.interval),
        "CKPTWEB_DEBUG": "true",
        "CKPTWEB_LOG_LEVEL": "WARNING",
    }


def _setup(args: argparse.Namespace) -> str:
    """Migrate, write and register the checkpoints, create the user (in this process); return its API token."""
    os.environ.update(_environment(args))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user("load", password=PASSWORD)
    _write_and_register_checkpoints(args)
    return Token.objects.create(user=user).key


def _write_and_register_checkpoints(args: argparse.Namespace) -> None:
    """``--checkpoints`` histories of ``--batches`` batches each, registered to sync every ``--interval`` s."""
    from dashboards.models import Checkpoint

    template = read_template()
    for number in range(args.checkpoints):
        directory = args.workdir / "checkpoints" / f"q{number:05d}"
        write_batches(directory, range(args.batches), template)
        Checkpoint.objects.create(name=f"q{number:05d}", url=str(directory), sync_interval_seconds=args.interval)


def _store_progress(batches: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(PROGRESS_SQL, [batches - 1])


def _start(command: list[str], env: dict[str, str], log: Path, *, cwd: Path = REPO_DIR) -> subprocess.Popen:
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def gunicorn_command(port: int, workers: int, *, timeout_seconds: int | None = None) -> list[str]:
    """The command that serves the dashboard as production does (gunicorn), for a bench."""
    timeout = [] if timeout_seconds is None else ["--timeout", str(timeout_seconds)]
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "ckptweb.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--no-control-socket",  # gunicorn's default socket is one per user (demo.web_command)
    ] + timeout


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _wait_until_all_synced(count: int, timeout: float) -> float:
    from dashboards.models import Checkpoint

    started = time.monotonic()
    while Checkpoint.objects.filter(last_synced_at__isnull=False).count() < count:
        if time.monotonic() - started > timeout:
            raise SystemExit(f"not every checkpoint was synced within {timeout:.0f} s")
        time.sleep(1)
    return time.monotonic() - started


def _paths(page: str, checkpoint_ids: list[int], *, batches: int, list_pages: int) -> list[str]:
    """Every path a request of this kind of page may ask for (wrk draws one at random each time)."""
    per_checkpoint = {
        "detail": "/checkpoints/{}/",
        "batches": "/checkpoints/{}/panels/batches/",
        "timeline": "/checkpoints/{}/charts/timeline.json",
        "health": "/checkpoints/{}/panels/health/",
        "api-batches": "/api/v1/checkpoints/{}/batches/",
        "api-progress": f"/api/v1/checkpoints/{{}}/progress/?from={batches // 4}&to={batches * 3 // 4}",
    }
    if page == "list":
        return [f"/?page={number}" for number in range(1, list_pages + 1)]
    if page == "api-list":
        return ["/api/v1/checkpoints/"]
    return [per_checkpoint[page].format(checkpoint) for checkpoint in checkpoint_ids]


# The settings of a production web process that a bench talks to over plain http on loopback: DEBUG
# off (no query log, production's templates and middleware), no redirect to https; static files from
# the apps' folders (no collectstatic: the page benches time the server, not static files).
PRODUCTION_SETTINGS = {
    "CKPTWEB_DEBUG": "false",
    "CKPTWEB_SECRET_KEY": "bench-only-secret-key",
    "CKPTWEB_SSL_REDIRECT": "false",
    "CKPTWEB_SERVE_COLLECTED_STATIC": "false",
}


def chosen(named: dict[str, str], only: str | None, what: str) -> dict[str, str]:
    """The entries of ``named`` that ``only`` (comma-separated names, a bench's --only) names, in its
    order; all of them for None; exits naming what is unknown."""
    names = only.split(",") if only else list(named)
    unknown = sorted(set(names) - set(named))
    if unknown:
        raise SystemExit(f"--only: no such {what} {', '.join(unknown)} (known: {', '.join(named)})")
    return {name: named[name] for name in names}


def _unsecure(session: requests.Session) -> None:
    """Production marks its cookies Secure, which requests then keeps from plain http: the bench's
    server is on loopback without TLS, so the session sends them anyway."""
    for cookie in session.cookies:
        cookie.secure = False


def logged_in_session(base: str, username: str, password: str) -> requests.Session:
    """A requests session of ``username``, logged in through the login page as a browser would
    (with production's Secure cookies sent over the bench's plain http)."""
    session = requests.Session()
    session.get(f"{base}/login/")
    _unsecure(session)
    response = session.post(
        f"{base}/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        allow_redirects=False,
    )
    if response.status_code != 302:
        raise SystemExit(f"login of {username!r} failed: {response.status_code}")
    _unsecure(session)  # the session cookie, and the CSRF token rotated at login
    return session


def cookie_header(session: requests.Session) -> str:
    """The session's cookies as one Cookie header (for wrk)."""
    return "; ".join(f"{name}={value}" for name, value in session.cookies.items())


def _run_users(
    args: argparse.Namespace, base: str, checkpoint_ids: list[int], *, token: str, list_pages: int
) -> dict[str, dict]:
    """``--users`` connections for ``--seconds``, shared out over the kinds of page; wrk's figures per kind."""
    cookie = cookie_header(logged_in_session(base, "load", PASSWORD))
    running = {}
    for number, page in enumerate(PAGES):
        connections = args.users // len(PAGES) + (number < args.users % len(PAGES))
        paths_file = _write_paths_file(args, page, checkpoint_ids, list_pages=list_pages)
        headers = {"Authorization": f"Token {token}"} if page.startswith("api-") else {"Cookie": cookie}
        running[page] = (connections, _start_wrk(args, base, connections, headers, paths_file))
    return _wrk_figures_of(running, timeout=args.seconds + 120)


def _write_paths_file(args: argparse.Namespace, page: str, checkpoint_ids: list[int], *, list_pages: int) -> Path:
    """The file of the paths wrk asks for, for this kind of page, one a line."""
    paths_file = args.workdir / f"paths-{page}.txt"
    paths_file.write_text("\n".join(_paths(page, checkpoint_ids, batches=args.batches, list_pages=list_pages)) + "\n")
    return paths_file


def _start_wrk(
    args: argparse.Namespace, base: str, connections: int, headers: dict[str, str], paths_file: Path
) -> subprocess.Popen:
    """wrk with ``connections`` connections for ``--seconds``, asking for the paths of ``paths_file``."""
    command = wrk_command(
        base + "/", connections=connections, seconds=args.seconds, headers=headers, paths_file=paths_file
    )
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wrk_figures_of(running: dict[str, tuple[int, subprocess.Popen]], *, timeout: float) -> dict[str, dict]:
    """Wait for each page's wrk and read its figures, with the connections it had."""
    figures = {}
    for page, (connections, process) in running.items():
        output, _ = process.communicate(timeout=timeout)
        if process.returncode != 0:
            raise SystemExit(f"wrk for {page} failed: {output}")
        figures[page] = {**wrk_figures(output), "connections": connections}
    return figures


def _write_new_batches(args: argparse.Namespace, stop: threading.Event) -> None:
    """A tenth of the queries make progress: one new batch every few seconds."""
    template, next_batch = read_template(), defaultdict(lambda: args.batches)
    active = [args.workdir / "checkpoints" / f"q{number:05d}" for number in range(0, args.checkpoints, 10)]
    while not stop.wait(3):
        for directory in active:
            write_batches(directory, range(next_batch[directory], next_batch[directory] + 1), template)
            next_batch[directory] += 1


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def _report(figures: dict[str, dict], seconds: float) -> None:
    print(f"\n{'page':<13} {'clients':>7} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for page, row in figures.items():
        print(
            f"{page:<13} {row['connections']:>7} {row['requests']:>9} {row['errors']:>7} "
            f"{row['p50_ms']:>8.0f} {row['p95_ms']:>8.0f} {row['p99_ms']:>8.0f}"
        )
    requests_done = sum(row["requests"] for row in figures.values())
    errors = sum(row["errors"] for row in figures.values())
    print(
        f"throughput {requests_done / seconds:.1f} requests/s; "
        f"errors {errors}; error rate {errors / max(1, requests_done):.4f}"
    )


def _sync_gaps(since, until, interval: int) -> None:
    from django.db.models import Max, Min

    from dashboards.models import SyncRun

    gaps = largest_sync_gaps(since, until)
    late = sum(1 for gap in gaps if gap > interval * 1.5)
    runs = SyncRun.objects.filter(started_at__gte=since, started_at__lte=until)
    durations = runs.exclude(finished_at__isnull=True).aggregate(first=Min("started_at"), last=Max("finished_at"))
    failed = runs.exclude(status__in=["ok", "partial"]).count()
    print(
        f"syncs during the measurement: {runs.count()} ({failed} not ok), {durations['first']} .. {durations['last']}"
    )
    print(
        f"largest gap between two syncs of one checkpoint: {max(gaps):.1f} s (interval {interval} s); "
        f"median {statistics.median(gaps):.1f} s"
    )
    print(f"checkpoints with a gap over 1.5 intervals: {late} of {len(gaps)}")


def largest_sync_gaps(since, until) -> list[float]:
    """Per checkpoint, the longest time in seconds without a sync starting, from ``since`` to ``until``."""
    from dashboards.models import Checkpoint

    gaps = []
    for checkpoint_id in Checkpoint.objects.values_list("pk", flat=True):
        edges = [since, *_sync_starts(checkpoint_id, since, until), until]
        gaps.append(max((later - earlier).total_seconds() for earlier, later in zip(edges, edges[1:], strict=False)))
    return gaps


def _sync_starts(checkpoint_id: int, since, until) -> list:
    """When the checkpoint's syncs from ``since`` to ``until`` started, in order."""
    from dashboards.models import SyncRun

    return list(
        SyncRun.objects.filter(checkpoint_id=checkpoint_id, started_at__gte=since, started_at__lte=until)
        .order_by("started_at")
        .values_list("started_at", flat=True)
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-load"))
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    if args.users < len(PAGES):
        parser.error(f"--users must be at least {len(PAGES)}: one connection per kind of page")
    return args


def _prepare(args: argparse.Namespace) -> str:
    """Empty the work folder, the database and the Redis database; register the checkpoints; return the token."""
    shutil.rmtree(args.workdir, ignore_errors=True)
    (args.workdir / "checkpoints").mkdir(parents=True)
    _recreate_database(args.database_url)
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    return _setup(args)


def _start_services(args: argparse.Namespace) -> list[subprocess.Popen]:
    """Celery beat, the Celery workers and gunicorn, each logging into the work folder."""
    env = _environment(args)
    beat = [*CELERY, "beat", "--loglevel=WARNING", "-s", str(args.workdir / "beat-schedule")]
    processes = [_start(beat, env, args.workdir / "beat.log")]
    processes += [_start_celery_worker(args, env, number) for number in range(args.workers)]
    gunicorn = gunicorn_command(args.port, args.gunicorn_workers)
    processes.append(_start(gunicorn, env, args.workdir / "gunicorn.log"))
    return processes


def _start_celery_worker(args: argparse.Namespace, env: dict[str, str], number: int) -> subprocess.Popen:
    command = [
        *CELERY,
        "worker",
        f"--concurrency={args.concurrency}",
        "--loglevel=WARNING",
        "-n",
        f"load{number}@%h",
    ]
    return _start(command, env, args.workdir / f"worker{number}.log")


def _measure(args: argparse.Namespace, token: str) -> None:
    """Wait for the first syncs, then load the pages while new batches are written; report both."""
    print(f"{args.checkpoints} checkpoints registered; waiting for the first sync of each")
    print(f"all synced once after {_wait_until_all_synced(args.checkpoints, timeout=900):.0f} s")
    _store_progress(args.batches)
    from django.utils import timezone

    from dashboards.models import Checkpoint
    from dashboards.views.pages import CHECKPOINTS_PER_PAGE

    ids = list(Checkpoint.objects.values_list("pk", flat=True))
    list_pages = -(-len(ids) // CHECKPOINTS_PER_PAGE)  # the list page asked for is one of these at random
    since = timezone.now()
    figures = _run_users_while_writing(args, ids, token=token, list_pages=list_pages)
    until = timezone.now()
    _report(figures, args.seconds)
    _sync_gaps(since, until, args.interval)


def _run_users_while_writing(
    args: argparse.Namespace, checkpoint_ids: list[int], *, token: str, list_pages: int
) -> dict[str, dict]:
    """``_run_users``, while a thread writes new batches into a tenth of the checkpoints."""
    stop = threading.Event()
    writer = threading.Thread(target=_write_new_batches, args=(args, stop), daemon=True)
    writer.start()
    figures = _run_users(args, f"http://127.0.0.1:{args.port}", checkpoint_ids, token=token, list_pages=list_pages)
    stop.set()
    return figures


def main() -> None:
    args = _arguments()
    require_wrk()
    token = _prepare(args)
    processes = _start_services(args)
    try:
        _measure(args, token)
    finally:
        _stop(processes)


if __name__ == "__main__":
    main()
