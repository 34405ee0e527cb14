"""The README's pictures: the checkpoint list, a query page and a batch page, from a real run.

Usage (from the repository root; Java 17, PySpark and Debian's chromium, about three minutes)::

    .venv/bin/python -m bench.screenshots --workdir /tmp/ckptweb-screenshots --out docs/images

1. Empties ``--workdir`` and runs ``manage.py demo`` in it (its own SQLite database and embedded
   broker): live PySpark queries with the progress listener, a Celery worker, celery beat, gunicorn.
2. Registers three PySpark-written fixtures beside them, so the list shows more than running
   queries: ``killed_mid_batch`` (stalled: a batch that never committed), a copy of
   ``windowed_agg_file_sink`` whose newest offset file is cut short (failing to sync: a file it
   cannot read) and ``rocksdb_changelog_agg`` (stopped between two batches days ago).
3. Waits until the worker has synced them all and each demo query has ``--batches`` committed
   batches, then logs in as the demo user in Debian's chromium and saves, for each ``--width``,
   ``checkpoint-list.png``, ``query-page.png`` (the top ``--height`` pixels of the page of
   ``windowed_agg_file_sink``, its charts drawn) and ``batch-page.png`` (its newest batch with
   progress).
   The first width's files are named as above, other widths get ``-<width>`` before ``.png``.
4. Stops the demo and everything it started.

It lives in bench/ because, like bench/load.py, it runs the whole system from outside and drives
it as a user would; pipelines/ holds only PySpark code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.load import _start
from bench.page_load import CHROMIUM, CHROMIUM_ARGS, draw_charts, wait_until_serving

REPO_DIR = Path(__file__).resolve().parent.parent
FIXTURES = REPO_DIR / "tests" / "fixtures"
PASSWORD = "screenshots-demo"
QUERY = "windowed_agg_file_sink"  # the demo query with state, a file sink and its compaction
DEMO_START_TIMEOUT_SECONDS = 600
SYNC_TIMEOUT_SECONDS = 600
DEMO_STOP_TIMEOUT_SECONDS = 150


def _demo_environment(workdir: Path) -> dict[str, str]:
    """The embedded default in ``workdir``, whatever this shell points at; inventories every 20 s."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("CKPTWEB_")}
    return {
        **environment,
        "CKPTWEB_DATA_DIR": str(workdir),
        "CKPTWEB_DEMO_PASSWORD": PASSWORD,
        "CKPTWEB_INSPECT_INTERVAL_SECONDS": "20",
        "CKPTWEB_FULL_WALK_INTERVAL_SECONDS": "20",
        "CKPTWEB_LOG_LEVEL": "WARNING",
    }


def _copy_fixtures(checkpoints: Path) -> dict[str, tuple[Path, Path | None]]:
    """The extra checkpoints: name -> (checkpoint directory, sink output directory or None)."""
    stopped = shutil.copytree(FIXTURES / "killed_mid_batch", checkpoints / "killed_mid_batch")
    damaged = shutil.copytree(FIXTURES / "windowed_agg_file_sink", checkpoints / "damaged_offsets")
    newest = max(
        (damaged / "checkpoint" / "offsets").iterdir(), key=lambda path: int(path.name) if path.name.isdigit() else -1
    )
    newest.write_bytes(newest.read_bytes()[:25])  # cut inside the first JSON line
    finished = shutil.copytree(FIXTURES / "rocksdb_changelog_agg", checkpoints / "rocksdb_agg_stopped")
    return {
        "killed_mid_batch": (stopped / "checkpoint", None),
        "damaged_offsets": (damaged / "checkpoint", damaged / "output"),
        "rocksdb_agg_stopped": (finished / "checkpoint", None),
    }


def _register(extras: dict[str, tuple[Path, Path | None]]) -> None:
    from django.core.management import call_command

    for name, (checkpoint, sink) in extras.items():
        call_command("register_checkpoint", name, str(checkpoint), sink_log=str(sink or ""), interval=10, verbosity=0)


def _wait_until_synced(demo_dir: Path, batches: int) -> None:
    """Every checkpoint synced once; each demo query's (under ``demo_dir``) with ``batches`` committed
    batches and the listener's progress of half as many (on a busy machine it lags behind)."""
    deadline = time.monotonic() + SYNC_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _all_synced(demo_dir, batches):
            return
        time.sleep(2)
    raise SystemExit(f"the checkpoints were not synced with {batches} batches within {SYNC_TIMEOUT_SECONDS} s")


def _all_synced(demo_dir: Path, batches: int) -> bool:
    """What ``_wait_until_synced`` waits for, as the database has it now."""
    from dashboards.models import BatchProgress, Checkpoint

    checkpoints = list(Checkpoint.objects.all())
    running = [c for c in checkpoints if Path(c.url.removeprefix("file://")).is_relative_to(demo_dir)]
    return bool(
        running
        and all(c.last_synced_at for c in checkpoints)
        and all(
            c.batches.filter(is_committed=True).count() >= batches
            and BatchProgress.objects.for_query(c.query_id).count() >= batches // 2
            for c in running
        )
    )


def _stop_demo(demo: subprocess.Popen) -> None:
    """SIGTERM: the demo stops what it started (the JVM between two batches), which takes a while."""
    demo.terminate()
    try:
        demo.wait(timeout=DEMO_STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)


def _log_in(page, base_url: str) -> None:
    page.goto(base_url + "/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("table")


def _shoot(page, url: str, path: Path, *, height: int | None) -> None:
    page.goto(url, wait_until="load")
    draw_charts(page, timeout_ms=60_000)
    page.wait_for_timeout(500)  # Plotly's responsive resize after the last chart
    width = page.viewport_size["width"]
    clip = {"x": 0, "y": 0, "width": width, "height": height} if height else None
    page.screenshot(path=str(path), full_page=True, clip=clip)
    print(f"{path}: {path.stat().st_size / 1024:,.0f} KiB")


def _take_screenshots(base_url: str, out: Path, widths: list[int], height: int) -> None:
    from playwright.sync_api import sync_playwright

    pages = _pages_to_shoot(height)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for index, width in enumerate(widths):
            suffix = "" if index == 0 else f"-{width}"
            _shoot_at_width(browser, base_url, pages, width, out=out, suffix=suffix)
        browser.close()


def _shoot_at_width(browser, base_url: str, pages: dict, width: int, *, out: Path, suffix: str) -> None:
    """Log in in a new page ``width`` px wide and take each picture of ``pages`` into ``out``."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    _log_in(page, base_url)
    for name, (path, clip_height) in pages.items():
        _shoot(page, base_url + path, out / f"{name}{suffix}.png", height=clip_height)
    page.close()


def _pages_to_shoot(height: int) -> dict[str, tuple[str, int | None]]:
    """Picture name -> (path, how much of the page's top to keep; None for all of it)."""
    from dashboards.models import BatchProgress, Checkpoint

    query = Checkpoint.objects.get(name=QUERY)
    # The listener's progress lags the commit log by a batch or two: show a batch that has both.
    newest = BatchProgress.objects.for_query(query.query_id).last()
    return {
        "checkpoint-list": ("/", None),
        "query-page": (query.get_absolute_url(), height),
        "batch-page": (f"{query.get_absolute_url()}batches/{newest.batch_id}/", None),
    }


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=REPO_DIR / "docs" / "images")
    parser.add_argument("--port", type=int, default=8760)
    parser.add_argument(
        "--batches", type=int, default=12, help="committed batches each demo query has before the pictures"
    )
    parser.add_argument("--width", type=int, action="append", help="viewport width in px (repeatable; default 1400)")
    parser.add_argument("--height", type=int, default=2250, help="how much of the query page's top to keep, in px")
    return parser.parse_args()


def _set_up_django(environment: dict[str, str]) -> None:
    """This process talks to the demo's database, as the demo does."""
    os.environ.update(environment)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import django

    django.setup()


def main() -> None:
    args = _arguments()
    shutil.rmtree(args.workdir, ignore_errors=True)
    (args.workdir / "checkpoints").mkdir(parents=True)
    environment = _demo_environment(args.workdir)
    base_url = f"http://127.0.0.1:{args.port}"
    demo = _start(
        [sys.executable, "manage.py", "demo", "--port", str(args.port)], environment, args.workdir / "demo.log"
    )
    try:
        wait_until_serving(base_url, DEMO_START_TIMEOUT_SECONDS, log=args.workdir / "demo.log")
        _set_up_django(environment)
        _register(_copy_fixtures(args.workdir / "checkpoints"))
        _wait_until_synced(args.workdir / "checkpoints" / "demo", args.batches)
        _take_screenshots(base_url, args.out, args.width or [1400], args.height)
    finally:
        _stop_demo(demo)


if __name__ == "__main__":
    main()
