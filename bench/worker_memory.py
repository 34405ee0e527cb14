"""Memory of a Celery worker that keeps checkpoints in sync for an hour (issue 28).

Usage (from the repository root; the embedded default, as ``manage.py demo`` runs it: SQLite and
the filesystem broker in the work dir, no PostgreSQL or Redis)::

    .venv/bin/python -m bench.worker_memory --workdir /tmp/ckptweb-worker-memory --minutes 60

1. Migrates a fresh SQLite database in the work dir, copies the PySpark-written fixture
   checkpoints (tests/fixtures) in turn until there are ``--checkpoints``, and registers each with
   a ``--interval`` second sync interval (celery beat's table, as the UI does).
2. Starts celery beat and one Celery worker (``--concurrency`` pool children) with
   ``CKPTWEB_DEBUG`` set to ``--debug`` (the demo runs with the default, true). Meanwhile every
   checkpoint gets a new batch every ``--interval`` seconds (a copy of its own newest offsets and
   commits entries), so that each sync stores something.
3. Once every checkpoint has been synced, prints the RSS of the worker and of each pool child
   every ``--sample-seconds`` for ``--minutes``, with the sync runs done and the load average,
   then the growth of each from the first sample to the last.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import threading
import time
from pathlib import Path

from bench.checkpoint_history import read_template, write_batches
from bench.django_env import add_embedded_arguments, embedded_environment, fixture_checkpoints, fresh_embedded_default
from bench.load import CELERY, _start, _stop
from bench.rss import child_pids, load_average, rss_mb


def _register_checkpoints(args: argparse.Namespace) -> list[Path]:
    """Copy fixture checkpoints (those with a committed batch) and register them; return their folders."""
    from dashboards.models import Checkpoint

    fixtures = fixture_checkpoints()
    folders = []
    for number in range(args.checkpoints):
        source = fixtures[number % len(fixtures)]
        target = args.workdir / "checkpoints" / f"{source.parent.name}-{number}"
        shutil.copytree(source, target)
        Checkpoint.objects.create(name=target.name, url=str(target), sync_interval_seconds=args.interval)
        folders.append(target)
    return folders


def _write_new_batches(folders: list[Path], interval: int, stop: threading.Event) -> None:
    """One new committed batch per checkpoint every ``interval`` seconds, as a running query adds them."""
    templates = {folder: read_template(folder) for folder in folders}
    next_batch = {
        folder: 1 + max(int(p.name) for p in (folder / "commits").iterdir() if p.name.isdigit()) for folder in folders
    }
    while not stop.wait(interval):
        for folder in folders:
            write_batches(folder, range(next_batch[folder], next_batch[folder] + 1), templates[folder])
            next_batch[folder] += 1


def _wait_until_all_synced(count: int, worker: subprocess.Popen, timeout: float = 600) -> None:
    from dashboards.models import Checkpoint

    deadline = time.monotonic() + timeout
    while Checkpoint.objects.filter(last_synced_at__isnull=False).count() < count:
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("not every checkpoint was synced once (see worker.log in the work dir)")
        time.sleep(1)


def _sample(worker_pid: int, started: float) -> dict:
    from dashboards.models import SyncRun

    children = child_pids(worker_pid)
    return {
        "minute": (time.monotonic() - started) / 60,
        "syncs": SyncRun.objects.count(),
        "worker": rss_mb(worker_pid),
        "children": [rss_mb(pid) for pid in children],
        "pids": children,
        "load": load_average(),
    }


def _print_sample(row: dict) -> None:
    children = " ".join(f"{pid}:{mb:.1f}" for pid, mb in zip(row["pids"], row["children"], strict=True))
    print(
        f"{row['minute']:7.1f} {row['syncs']:7d} {row['worker']:10.1f}  {children:<28} {row['load']}",
        flush=True,
    )


def _print_growth(first: dict, last: dict) -> None:
    def growth(before: float, after: float) -> str:
        return f"{before:.1f} -> {after:.1f} MB ({(after - before) / before * 100:+.1f}%)" if before else "n/a"

    print(f"worker: {growth(first['worker'], last['worker'])}")
    for pid, before in zip(first["pids"], first["children"], strict=True):
        after = dict(zip(last["pids"], last["children"], strict=True)).get(pid)
        print(f"child {pid}: " + (growth(before, after) if after else f"{before:.1f} MB, gone by the end"))
    print(f"sync runs during the measurement: {last['syncs'] - first['syncs']}")


def _measure(args: argparse.Namespace, worker: subprocess.Popen) -> None:
    started = time.monotonic()
    print(f"{'minute':>7} {'syncs':>7} {'worker MB':>10}  {'child pid:MB':<28} load average", flush=True)
    rows = [_sample(worker.pid, started)]
    _print_sample(rows[0])
    deadline = started + args.minutes * 60
    while time.monotonic() < deadline and worker.poll() is None:
        time.sleep(min(args.sample_seconds, max(0.0, deadline - time.monotonic())))
        rows.append(_sample(worker.pid, started))
        _print_sample(rows[-1])
    _print_growth(rows[0], rows[-1])


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_embedded_arguments(parser, workdir="/tmp/ckptweb-worker-memory", debugged="the worker")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--interval", type=int, default=10, help="seconds between two syncs of a checkpoint")
    parser.add_argument("--sample-seconds", type=float, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    return parser.parse_args()


def _start_beat_and_worker(args: argparse.Namespace) -> list[subprocess.Popen]:
    """celery beat and one worker, in that order, each logging into the work folder."""
    env = embedded_environment(args.workdir, debug=args.debug)
    beat = [*CELERY, "beat", "--loglevel=WARNING", "-s", str(args.workdir / "beat-schedule")]
    worker = [*CELERY, "worker", f"--concurrency={args.concurrency}", "--loglevel=WARNING", "-n", "mem@%h"]
    return [_start(beat, env, args.workdir / "beat.log"), _start(worker, env, args.workdir / "worker.log")]


def main() -> None:
    args = _arguments()
    fresh_embedded_default(args.workdir)
    folders = _register_checkpoints(args)
    processes = _start_beat_and_worker(args)
    stop = threading.Event()
    threading.Thread(target=_write_new_batches, args=(folders, args.interval, stop), daemon=True).start()
    try:
        _wait_until_all_synced(args.checkpoints, processes[1])
        _measure(args, processes[1])
    finally:
        stop.set()
        _stop(processes)


if __name__ == "__main__":
    main()
