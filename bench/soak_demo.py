"""Soak: `manage.py demo` on the embedded default for hours, busy, and nothing lost (issue 19).

Usage (from the repository root; no PostgreSQL or Redis: the embedded default is what is soaked)::

    .venv/bin/python -m bench.soak_demo --workdir /tmp/ckptweb-soak --seconds 7200

1. Starts ``manage.py demo`` with its data folder in the work dir (SQLite, the embedded broker,
   its live PySpark queries with the listener), waits for its address, then registers copies of
   the PySpark-written fixture checkpoints (tests/fixtures) until ``--checkpoints`` are registered
   and sets every sync interval to ``--interval`` seconds.
2. For ``--seconds``, every ``--every`` seconds it does the next of: ask for a sync from the
   checkpoint's page ("Sync now"), ask for a purge plan from the maintenance page, load a query
   page, load the list, checking each answer's status.
3. Prints what decides the soak: the Celery worker's deaths (the demo says when it restarts a
   child), every child restart, broker messages set aside as damaged, messages still queued, each
   asked-for sync and plan that never happened (a sync run started after the ask, within
   ``--grace`` seconds; a plan that reached a planned or refused state), the largest gap between
   two syncs of one checkpoint, and failed page loads.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import requests

from bench.django_env import setup_django
from bench.load import largest_sync_gaps

REPO_DIR = Path(__file__).resolve().parent.parent
FIXTURES = REPO_DIR / "tests" / "fixtures"
DEMO_USER, DEMO_PASSWORD = "demo", "ckptweb-demo"
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class Tally:
    pages: int = 0
    failed_pages: list[str] = field(default_factory=list)
    sync_asks: list[tuple[int, datetime]] = field(default_factory=list)
    plan_runs: list[int] = field(default_factory=list)


def _start_demo(args: argparse.Namespace) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("CKPTWEB_DATABASE_URL", "CKPTWEB_REDIS_URL")}
    env.update(CKPTWEB_DATA_DIR=str(args.workdir), CKPTWEB_CHECKPOINT_ROOTS=str(args.workdir / "checkpoints"))
    log = (args.workdir / "demo.log").open("w")
    command = [sys.executable, "manage.py", "demo", "--port", str(args.port)]
    return subprocess.Popen(
        command, cwd=REPO_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _wait_for_demo(args: argparse.Namespace, demo: subprocess.Popen) -> None:
    deadline = time.monotonic() + 600
    while "ckptweb demo: http" not in (args.workdir / "demo.log").read_text(errors="replace"):
        if demo.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the demo did not come up (see {args.workdir / 'demo.log'})")
        time.sleep(2)


def _register_more(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    from dashboards.models import Checkpoint

    fixtures = sorted(path for path in FIXTURES.iterdir() if (path / "checkpoint").is_dir())
    number = 0
    while Checkpoint.objects.count() < args.checkpoints:
        source = fixtures[number % len(fixtures)]
        target = args.workdir / "checkpoints" / "soak" / f"{source.name}-{number}"
        shutil.copytree(source / "checkpoint", target)
        call_command("register_checkpoint", f"soak-{source.name}-{number}", str(target), interval=args.interval)
        number += 1
    _set_every_interval(args.interval)


def _set_every_interval(seconds: int) -> None:
    from dashboards.models import Checkpoint

    for checkpoint in Checkpoint.objects.all():
        checkpoint.sync_interval_seconds = seconds
        checkpoint.save()  # reschedules its periodic sync


def _session(base: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{base}/login/")
    token = CSRF.search(page.text).group(1)
    answer = session.post(
        f"{base}/login/", data={"username": DEMO_USER, "password": DEMO_PASSWORD, "csrfmiddlewaretoken": token}
    )
    answer.raise_for_status()
    return session


def _post(session: requests.Session, base: str, form_page: str, action: str, data: dict) -> requests.Response:
    token = CSRF.search(session.get(f"{base}{form_page}").text).group(1)
    return session.post(
        f"{base}{action}", data={**data, "csrfmiddlewaretoken": token}, headers={"Referer": f"{base}{form_page}"}
    )


def _step(step: int, session: requests.Session, base: str, ids: list[int], tally: Tally) -> None:
    checkpoint_id = ids[(step // 4) % len(ids)]
    page = f"/checkpoints/{checkpoint_id}/"
    kind = step % 4
    if kind == 0:
        answer = _ask_sync(session, base, checkpoint_id, tally)
    elif kind == 1:
        answer = _ask_purge_plan(session, base, checkpoint_id, tally)
    else:
        answer = session.get(f"{base}{page}" if kind == 2 else f"{base}/")
    tally.pages += 1
    if answer.status_code >= 400:
        tally.failed_pages.append(f"{answer.request.method} {answer.url}: {answer.status_code}")


def _ask_sync(session: requests.Session, base: str, checkpoint_id: int, tally: Tally) -> requests.Response:
    """Press "Sync now" on the checkpoint's page; tally the ask with its time."""
    from django.utils import timezone

    page = f"/checkpoints/{checkpoint_id}/"
    asked = timezone.now()
    answer = _post(session, base, page, f"{page}sync/", {})
    tally.sync_asks.append((checkpoint_id, asked))
    return answer


def _ask_purge_plan(session: requests.Session, base: str, checkpoint_id: int, tally: Tally) -> requests.Response:
    """Request a purge from the maintenance page; tally the runs the request created."""
    from dashboards.models import MaintenanceRun

    page = f"/checkpoints/{checkpoint_id}/"
    before = MaintenanceRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    answer = _post(
        session,
        base,
        f"{page}maintenance/",
        f"{page}maintenance/request/",
        {"action": "purge", "keep_batches": "5"},
    )
    tally.plan_runs.extend(
        MaintenanceRun.objects.filter(pk__gt=before, checkpoint_id=checkpoint_id).values_list("pk", flat=True)
    )
    return answer


def _report(args: argparse.Namespace, tally: Tally, since: datetime, until: datetime) -> None:
    rejected, queued = _broker_leftovers(args.workdir / "broker")
    print(
        f"soaked {(until - since).total_seconds():.0f} s with "
        f"{args.checkpoints} checkpoints at a {args.interval} s interval"
    )
    _print_restarts(args.workdir / "demo.log")
    print(f"broker messages set aside as damaged: {len(rejected)}; still queued at the end: {len(queued)}")
    _print_lost_asks(args, tally, until)
    print(f"page loads and posts: {tally.pages}; failed: {len(tally.failed_pages)}")
    for line in tally.failed_pages[:20]:
        print(f"  {line}")
    _print_sync_gaps(since, until, args.interval)


def _print_restarts(demo_log: Path) -> None:
    """The children the demo restarted (it logs each), the Celery worker's deaths counted apart."""
    log = demo_log.read_text(errors="replace")
    restarts = [line for line in log.splitlines() if line.startswith("demo: ")]
    worker_deaths = [line for line in restarts if "Celery worker" in line]
    print(f"Celery worker deaths: {len(worker_deaths)}; all restarts by the demo: {len(restarts)}")
    for line in restarts:
        print(f"  {line}")


def _print_lost_asks(args: argparse.Namespace, tally: Tally, until: datetime) -> None:
    """The syncs asked for that did not start in time, and the plans asked for still planning."""
    from dashboards.models import MaintenanceRun

    lost_syncs = _lost_syncs(tally, timedelta(seconds=args.grace), until)
    unplanned = MaintenanceRun.objects.filter(pk__in=tally.plan_runs, status=MaintenanceRun.Status.PLANNING).count()
    print(f"syncs asked for: {len(tally.sync_asks)}; not started within {args.grace} s: {len(lost_syncs)}")
    print(f"plans asked for: {len(tally.plan_runs)}; still planning at the end: {unplanned}")


def _broker_leftovers(broker: Path) -> tuple[list[Path], list[Path]]:
    """The messages the broker set aside as damaged, and those still queued."""
    rejected = list((broker / "rejected").glob("*")) if (broker / "rejected").exists() else []
    return rejected, list((broker / "queue").glob("*.msg"))


def _lost_syncs(tally: Tally, grace: timedelta, until: datetime) -> list[tuple[int, datetime]]:
    """The syncs asked for that did not start within ``grace`` (those asked too late to tell left out)."""
    from dashboards.models import SyncRun

    return [
        (checkpoint_id, asked)
        for checkpoint_id, asked in tally.sync_asks
        if asked + grace < until
        and not SyncRun.objects.filter(
            checkpoint_id=checkpoint_id, started_at__gte=asked, started_at__lte=asked + grace
        ).exists()
    ]


def _print_sync_gaps(since: datetime, until: datetime, interval: int) -> None:
    from dashboards.models import SyncRun

    gaps = largest_sync_gaps(since, until)
    runs = SyncRun.objects.filter(started_at__range=(since, until))
    print(
        f"sync runs: {runs.count()} ({runs.exclude(status__in=['ok', 'partial']).count()} not ok); "
        f"largest gap between two syncs of one checkpoint: {max(gaps):.1f} s (interval {interval} s)"
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-soak"))
    parser.add_argument("--seconds", type=int, default=7200)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--interval", type=int, default=5)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between two actions")
    parser.add_argument("--grace", type=int, default=120, help="seconds an asked-for sync may take to start")
    parser.add_argument("--port", type=int, default=8011)
    return parser.parse_args()


def _act_until_deadline(args: argparse.Namespace, demo: subprocess.Popen) -> tuple[Tally, datetime, datetime]:
    """One action every ``--every`` seconds for ``--seconds`` (or until the demo exits); the tally and its span."""
    from django.utils import timezone

    from dashboards.models import Checkpoint

    base = f"http://127.0.0.1:{args.port}"
    session, ids, tally = _session(base), list(Checkpoint.objects.values_list("pk", flat=True)), Tally()
    since, step = timezone.now(), 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline and demo.poll() is None:
        _step(step, session, base, ids, tally)
        step += 1
        time.sleep(args.every)
    return tally, since, timezone.now()


def main() -> None:
    args = _arguments()
    shutil.rmtree(args.workdir, ignore_errors=True)
    (args.workdir / "checkpoints").mkdir(parents=True)
    demo = _start_demo(args)
    try:
        _wait_for_demo(args, demo)
        setup_django(args.workdir)
        _register_more(args)
        tally, since, until = _act_until_deadline(args, demo)
        if demo.poll() is not None:
            print(f"the demo itself exited with {demo.returncode} (see {args.workdir / 'demo.log'})")
        _report(args, tally, since, until)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
            demo.wait(timeout=120)


if __name__ == "__main__":
    main()
