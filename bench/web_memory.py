"""Memory of the web workers over many requests of every kind of page (issue 28).

Usage (from the repository root; the embedded default, as ``manage.py demo`` runs it: SQLite and
the per-process cache in the work dir, ``CKPTWEB_DEBUG`` as ``--debug``)::

    .venv/bin/python -m bench.web_memory --workdir /tmp/ckptweb-web-memory --requests 20000

1. Migrates a fresh SQLite database in the work dir, copies ``--checkpoints`` PySpark-written
   fixture checkpoints (tests/fixtures), gives each a history of ``--batches`` batches (copies of
   its own newest offsets and commits entries, bench/checkpoint_history.py) with a progress event
   per batch, syncs them (workers.sync, in this process) and creates a user.
2. Starts gunicorn with ``--gunicorn-workers`` workers, as the demo does, signs in, and asks for
   ``--requests`` pages one after another, going round the kinds of page (the list and its panel,
   a query page, its health and batch panels, every chart, a batch, the maintenance page, the read
   API, /metrics, the scripts and styles of a query page) and round the checkpoints. Every
   ``--batch-every`` requests each checkpoint gets a new batch, synced and with its progress, as a
   running query does, so that every cached text and series moves on.
3. Every ``--sample-every`` requests prints the RSS of each gunicorn worker and of the master,
   with the load average; at the end, the growth of each worker from the first sample after
   ``--warm-up`` requests to the last, and the failed requests.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys

import requests

from bench.checkpoint_history import read_template, write_batches
from bench.django_env import add_embedded_arguments, embedded_environment, fixture_checkpoints, fresh_embedded_default
from bench.load import _start, _stop, gunicorn_command, logged_in_session
from bench.pages_at_scale import _wait_for
from bench.rss import child_pids, load_average, rss_mb
from bench.runtime_charts import _add_batch

PASSWORD = "web-memory-password"
PER_CHECKPOINT = (
    "/checkpoints/{id}/",
    "/checkpoints/{id}/panels/health/",
    "/checkpoints/{id}/panels/batches/",
    "/checkpoints/{id}/charts/timeline.json",
    "/checkpoints/{id}/charts/runtime.json",
    "/checkpoints/{id}/charts/inventory.json",
    "/checkpoints/{id}/charts/state-heatmap.json",
    "/checkpoints/{id}/batches/{batch}/",
    "/checkpoints/{id}/maintenance/",
    "/api/v1/checkpoints/{id}/batches/",
)
# The files a browser fetches for a query page (scripts, styles), read off the page itself.
STATIC_FILE = re.compile(r'(?:src|href)="(/static/[^"]+)"')
WHOLE_SITE = ("/", "/panels/checkpoints/", "/api/v1/checkpoints/", "/metrics")


class Histories:
    """The bench's checkpoints: their folders and rows, and the next batch of each."""

    def __init__(self, args: argparse.Namespace) -> None:
        from django.contrib.auth import get_user_model

        from dashboards.models import Checkpoint

        get_user_model().objects.create_user("memory", password=PASSWORD)
        fixtures = fixture_checkpoints()
        self.folders, self.ids, self.templates = [], [], []
        for number in range(args.checkpoints):
            folder = args.workdir / "checkpoints" / f"{fixtures[number].parent.name}"
            shutil.copytree(fixtures[number], folder)
            self.templates.append(read_template(folder))
            self.folders.append(folder)
            self.ids.append(Checkpoint.objects.create(name=folder.name, url=str(folder)).pk)
        self.next_batch = args.batches
        self.add_batches(range(args.batches))

    def add_batches(self, batch_ids: range) -> None:
        """Write ``batch_ids`` into every checkpoint, sync them, and store each batch's progress."""
        from dashboards.models import Checkpoint
        from workers.sync import sync_checkpoint

        for folder, pk, template in zip(self.folders, self.ids, self.templates, strict=True):
            write_batches(folder, batch_ids, template)
            sync_checkpoint(pk)
            checkpoint = Checkpoint.objects.get(pk=pk)
            if checkpoint.query_id is not None:
                for batch in batch_ids:
                    _add_batch(checkpoint, batch)
        self.next_batch = batch_ids.stop

    def paths(self) -> list[str]:
        """Every path the bench asks for, in the order it goes round them."""
        newest = self.next_batch - 1
        per_checkpoint = [p.format(id=pk, batch=newest) for pk in self.ids for p in PER_CHECKPOINT]
        return [*per_checkpoint, *WHOLE_SITE]


def _sample(master_pid: int, done: int) -> dict:
    workers = child_pids(master_pid)
    return {"done": done, "master": rss_mb(master_pid), "workers": {pid: rss_mb(pid) for pid in workers}}


def _print_sample(row: dict) -> None:
    workers = " ".join(f"{pid}:{mb:.1f}" for pid, mb in row["workers"].items())
    print(f"{row['done']:8d} {row['master']:10.1f}  {workers:<30} {load_average()}", flush=True)


def _print_growth(first: dict, last: dict, failed: list[str]) -> None:
    for pid, before in first["workers"].items():
        after = last["workers"].get(pid)
        growth = f"{before:.1f} -> {after:.1f} MB ({(after - before) / before * 100:+.1f}%)" if after else "gone"
        print(f"worker {pid} from request {first['done']} to {last['done']}: {growth}")
    print(f"failed requests: {len(failed)}")
    for line in failed[:20]:
        print(f"  {line}")


def _serve(args: argparse.Namespace, histories: Histories, gunicorn_pid: int, base: str) -> None:
    session: requests.Session = logged_in_session(base, "memory", PASSWORD)
    print(f"{'requests':>8} {'master MB':>10}  {'worker pid:MB':<30} load average", flush=True)
    static_files = STATIC_FILE.findall(session.get(f"{base}/checkpoints/{histories.ids[0]}/").text)
    failed, rows, paths = [], [], histories.paths() + static_files
    _add_sample(rows, gunicorn_pid, 0)
    for done in range(1, args.requests + 1):
        _get_noting_failure(session, base, paths[done % len(paths)], failed)
        if done % args.batch_every == 0:
            histories.add_batches(range(histories.next_batch, histories.next_batch + 1))
            paths = histories.paths() + static_files
        if done % args.sample_every == 0 or done == args.requests:
            _add_sample(rows, gunicorn_pid, done)
    warm = next((row for row in rows if row["done"] >= args.warm_up), rows[-1])
    _print_growth(warm, rows[-1], failed)


def _get_noting_failure(session: requests.Session, base: str, path: str, failed: list[str]) -> None:
    status = session.get(base + path, timeout=120).status_code
    if status >= 400:
        failed.append(f"{path}: {status}")


def _add_sample(rows: list[dict], gunicorn_pid: int, done: int) -> None:
    rows.append(_sample(gunicorn_pid, done))
    _print_sample(rows[-1])


def main() -> None:
    args = _arguments()
    fresh_embedded_default(args.workdir)
    histories = Histories(args)
    gunicorn = _start(
        gunicorn_command(args.port, args.gunicorn_workers),
        embedded_environment(args.workdir, debug=args.debug),
        args.workdir / "gunicorn.log",
    )
    try:
        base = f"http://127.0.0.1:{args.port}"
        _wait_for(base)
        _serve(args, histories, gunicorn.pid, base)
    finally:
        _stop([gunicorn])


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_embedded_arguments(parser, workdir="/tmp/ckptweb-web-memory", debugged="gunicorn")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--checkpoints", type=int, default=3)
    parser.add_argument("--batches", type=int, default=2000, help="history of each checkpoint at the start")
    parser.add_argument("--batch-every", type=int, default=100, help="requests between two new batches")
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument("--warm-up", type=int, default=2000, help="requests before the growth is measured")
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8747)
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
