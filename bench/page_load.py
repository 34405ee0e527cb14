"""How long the query page takes to appear in a browser, first visit and repeat visit (issue 17).

Usage (from the repository root; Debian's chromium)::

    .venv/bin/python -m bench.page_load --workdir /tmp/ckptweb-page-load --repo /tmp/ckptweb-before --repo . --visits 15

1. In ``--workdir``: a SQLite database with one registered, synced checkpoint, a copy of the
   PySpark-written fixture ``tests/fixtures/file_source_dedup`` plus the progress its Spark run
   reported, so the page has every chart (timeline, state heatmap and metrics, two compact-file
   charts, file inventory); a user and a session for it.
2. For each ``--repo`` (a checkout of ckptweb: this one, or a ``git worktree`` of an older commit),
   ``manage.py collectstatic`` and gunicorn from that checkout with production settings
   (``CKPTWEB_DEBUG=false``, plain http on 127.0.0.1), all on the same database; with ``--demo``,
   as ``manage.py demo`` runs it instead: debug mode, with ``CKPTWEB_SERVE_COLLECTED_STATIC=true``
   (which a checkout older than that setting ignores, serving the apps' folders as its demo did).
3. ``--visits`` times, each checkout in turn: a fresh browser context (empty cache) opens the
   query page (first visit), then opens it again (repeat visit, warm cache). A visit lasts until
   the page's load event and every ``.chart`` on the first screen (1400 x 1100) is drawn
   (``data-rendered="true"``), counted from the navigation's start in the browser's own clock. The
   first contentful paint, DOMContentLoaded, the bytes transferred, when the last figure answer (a
   fetch) arrived, when plotly.js did and when it had run (charts.js marks it) are recorded too:
   what is left after the answers and the run is Plotly drawing. ``--mbps`` and ``--rtt-ms``
   emulate a slower network (Chrome DevTools' throttling); by default the loopback is used as is.
4. Prints the median and range of each figure per checkout.

With ``--live URL`` (a query page of a server already running, e.g. ``make demo``'s after an hour
of history) steps 1 and 2 are skipped: the browser logs in as ``--user`` (the demo's user by
default) and times that page, as it is, beside whatever the machine is running::

    .venv/bin/python -m bench.page_load --workdir /tmp/ckptweb-page-load \\
        --live http://127.0.0.1:8000/checkpoints/1/ --visits 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

from bench.load import _start, _stop, gunicorn_command, logged_in_session

REPO_DIR = Path(__file__).resolve().parent.parent
FIXTURE = REPO_DIR / "tests" / "fixtures" / "file_source_dedup"
SECRET_KEY = "page-load-bench-only"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_SECONDS = 60
VISIT_TIMEOUT_MS = 60_000
# Notes the browser time (ms since the navigation started) when every chart on the first screen is
# drawn: what a first visit shows. Charts further down are drawn as they are scrolled to (charts.js);
# a checkout that draws them all at once is timed to the same on-screen charts.
WATCH_CHARTS = """
new MutationObserver(() => {
  const charts = [...document.querySelectorAll(".chart")].filter(
    (chart) => chart.getBoundingClientRect().top < window.innerHeight);
  if (window.__chartsDrawnMs === undefined && charts.length > 0
      && charts.every((chart) => chart.dataset.rendered)) {
    window.__chartsDrawnMs = performance.now();
    window.__chartErrors = charts.filter((chart) => chart.dataset.rendered !== "true").map((chart) => chart.id);
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-rendered"]});
"""
VISIT_FIGURES = """() => {
  const navigation = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  const resources = performance.getEntriesByType("resource");
  const fetched = resources.filter((entry) => entry.initiatorType === "fetch");
  const plotly = resources.find((entry) => entry.name.includes("plotly"));
  return {
    done_ms: Math.max(navigation.loadEventEnd, window.__chartsDrawnMs),
    // What the on-screen charts waited for before Plotly drew them: their answers and plotly.js.
    figures_fetched_ms: fetched.length ? Math.max(...fetched.map((entry) => entry.responseEnd)) : null,
    plotly_loaded_ms: plotly ? plotly.responseEnd : null,
    plotly_ready_ms: (performance.getEntriesByName("ckptweb:plotly-ready")[0] || {}).startTime ?? null,
    figure_requests: fetched.length,
    dom_ready_ms: navigation.domContentLoadedEventEnd,
    first_paint_ms: paint ? paint.startTime : null,
    transferred_bytes: navigation.transferSize + resources.reduce((sum, entry) => sum + entry.transferSize, 0),
    chart_errors: window.__chartErrors,
  };
}"""


def _server_environment(workdir: Path, label: str, *, demo: bool) -> dict[str, str]:
    """Production settings (or the demo's), on plain http, sharing the bench's database; static files of its own."""
    return {
        **os.environ,
        **({"CKPTWEB_DEBUG": "true", "CKPTWEB_SERVE_COLLECTED_STATIC": "true"} if demo else {"CKPTWEB_DEBUG": "false"}),
        "CKPTWEB_SECRET_KEY": SECRET_KEY,
        "CKPTWEB_SSL_REDIRECT": "false",
        "CKPTWEB_DATA_DIR": str(workdir / label),
        "CKPTWEB_DATABASE_URL": f"sqlite:///{workdir / 'ckptweb.sqlite3'}",
        "CKPTWEB_CHECKPOINT_ROOTS": str(workdir / "checkpoints"),
        "CKPTWEB_LOG_LEVEL": "WARNING",
    }


def _prepare_database(workdir: Path) -> tuple[str, dict[str, str]]:
    """Migrate, register and sync the fixture, store its progress; return the query page's path and a session cookie."""
    os.environ.update({"CKPTWEB_DEBUG": "false", "CKPTWEB_SECRET_KEY": SECRET_KEY})
    from bench.django_env import setup_django

    setup_django(workdir)
    checkpoint = _register_fixture(workdir / "checkpoints" / "dedup")
    return checkpoint.get_absolute_url(), _session_cookie()


def _register_fixture(base: Path):
    """Copy the fixture to ``base``, register it as "dedup" afresh, sync it and store its progress reports."""
    from dashboards.models import BatchProgress, Checkpoint
    from workers.checkpoint.progress import progress_from_dict
    from workers.sync import sync_checkpoint

    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(FIXTURE, base)
    Checkpoint.objects.filter(name="dedup").delete()
    checkpoint = Checkpoint.objects.create(
        name="dedup", url=str(base / "checkpoint"), sink_log_url=str(base / "output")
    )
    sync_checkpoint(checkpoint.pk)
    for progress in json.loads((base / "spark-report.json").read_text())["progress"]:
        BatchProgress.objects.store(progress_from_dict(progress, source="spark-report.json"), origin="listener")
    return checkpoint


def _session_cookie() -> dict[str, str]:
    """The session cookie (name and value) of the user "page-load", logged in."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(username="page-load")
    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return {"name": name, "value": client.cookies[name].value}


def _start_server(repo: Path, environment: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    """collectstatic and gunicorn from ``repo``; return once it answers."""
    _collectstatic(repo, environment)
    server = _start(gunicorn_command(port, 2), environment, log, cwd=repo)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", SERVER_START_TIMEOUT_SECONDS, log=log)
    except SystemExit:
        _stop([server])
        raise
    return server


def _collectstatic(repo: Path, environment: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--clear", "--verbosity=0"],
        cwd=repo,
        env=environment,
        check=True,
    )


def wait_until_serving(base_url: str, timeout_seconds: float, *, log: Path) -> None:
    """Return once ``base_url`` answers /health/; exit naming ``log`` if it does not in time."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        try:
            requests.get(f"{base_url}/health/", timeout=5)
            return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.5)
    raise SystemExit(f"{base_url} did not answer within {timeout_seconds:.0f} s; see {log}")


def draw_charts(page, selector: str = ".chart", *, timeout_ms: float | None = None) -> None:
    """Scroll to each chart of ``selector`` in turn and wait until it is drawn (or has said it cannot be).

    charts.js fetches and draws a chart only once it is near the screen (a first visit asks for
    what is in view); whoever looks at every chart scrolls to them as a reader would.
    """
    for chart in page.locator(selector).all():
        chart.scroll_into_view_if_needed()
        page.wait_for_function("(el) => el.dataset.rendered", arg=chart.element_handle(), timeout=timeout_ms)
    page.evaluate("window.scrollTo(0, 0)")


def _visit(page, url: str) -> dict:
    """Open ``url`` in ``page`` and return its figures once it has loaded and drawn every chart."""
    page.goto(url, wait_until="load", timeout=VISIT_TIMEOUT_MS)
    page.wait_for_function("() => window.__chartsDrawnMs !== undefined", timeout=VISIT_TIMEOUT_MS)
    figures = page.evaluate(VISIT_FIGURES)
    if figures["chart_errors"]:
        raise SystemExit(f"{url}: charts {figures['chart_errors']} could not be drawn")
    return figures


def _first_and_repeat_visit(browser, url: str, session: dict[str, str], args: argparse.Namespace) -> tuple[dict, dict]:
    """Both visits of one person: a new context starts with an empty cache and keeps it for the second."""
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    context.add_cookies([{**session, "url": url}])
    context.add_init_script(WATCH_CHARTS)
    page = context.new_page()
    if args.mbps:
        devtools = context.new_cdp_session(page)
        devtools.send("Network.enable")
        devtools.send(
            "Network.emulateNetworkConditions",
            {
                "offline": False,
                "latency": args.rtt_ms,
                "downloadThroughput": args.mbps * 125_000,
                "uploadThroughput": args.mbps * 125_000,
            },
        )
    try:
        return _visit(page, url), _visit(page, url)
    finally:
        context.close()


SUMMARISED = (
    *("done_ms", "first_paint_ms", "dom_ready_ms", "figures_fetched_ms", "plotly_loaded_ms", "plotly_ready_ms"),
    "transferred_bytes",
)


def _summary(visits: list[dict], key: str) -> str:
    values = [visit[key] for visit in visits if visit[key] is not None]
    if not values:
        return "-"
    if key == "transferred_bytes":
        return f"{statistics.median(values) / 1024:,.0f} KiB"
    return f"{statistics.median(values):,.0f} ms ({min(values):,.0f}-{max(values):,.0f})"


def _report(labels: list[str], first: dict[str, list], repeat: dict[str, list]) -> None:
    """Medians (and ranges) in milliseconds since the navigation started, per checkout."""
    print(
        "| checkout | visit | loaded, charts drawn | first paint | DOMContentLoaded | figures fetched"
        " | plotly.js loaded | plotly.js run | transferred |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label in labels:
        for visit, figures in (("first", first[label]), ("repeat", repeat[label])):
            print(f"| {label} | {visit} | " + " | ".join(_summary(figures, key) for key in SUMMARISED) + " |")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--repo", type=Path, action="append", help="a ckptweb checkout to serve (repeatable)")
    _add_live_arguments(parser)
    parser.add_argument("--visits", type=int, default=15)
    parser.add_argument("--demo", action="store_true", help="serve as manage.py demo does (debug mode)")
    parser.add_argument("--port", type=int, default=8750, help="the first checkout's port; the next ones count up")
    parser.add_argument("--mbps", type=float, default=0, help="emulated bandwidth in Mbit/s (0: the loopback as it is)")
    parser.add_argument("--rtt-ms", type=float, default=0, help="emulated round-trip time, with --mbps")
    args = parser.parse_args()
    if bool(args.repo) == bool(args.live):
        parser.error("give either --repo (once or more) or --live")
    return args


def _add_live_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--live", help="instead of --repo: the URL of a query page of a running server")
    parser.add_argument("--user", default="demo", help="with --live: who logs in (default: the demo's user)")
    parser.add_argument("--password", default=os.environ.get("CKPTWEB_DEMO_PASSWORD", "ckptweb-demo"))


def _live_session(args: argparse.Namespace) -> dict[str, str]:
    """The session cookie of ``--user``, logged in to the server of ``--live`` through its login page."""
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    base = "{0.scheme}://{0.netloc}".format(urlsplit(args.live))
    session = logged_in_session(base, args.user, args.password)
    return {"name": settings.SESSION_COOKIE_NAME, "value": session.cookies[settings.SESSION_COOKIE_NAME]}


def _start_servers(
    args: argparse.Namespace, labels: list[str], path: str, servers: list[subprocess.Popen]
) -> dict[str, str]:
    """Serve each checkout on its own port; return the page's URL by label.

    Each server is appended to ``servers`` as soon as it starts, so the caller stops those already
    up when a later one fails.
    """
    urls = {}
    for index, (label, repo) in enumerate(zip(labels, args.repo, strict=True)):
        port = args.port + index
        log = args.workdir / f"gunicorn-{index}.log"
        servers.append(
            _start_server(
                repo.resolve(), _server_environment(args.workdir, f"server-{index}", demo=args.demo), port, log
            )
        )
        urls[label] = f"http://127.0.0.1:{port}{path}"
    return urls


def _visit_in_turn(
    args: argparse.Namespace, labels: list[str], urls: dict[str, str], session: dict[str, str]
) -> tuple[dict[str, list], dict[str, list]]:
    """Visit every server's page ``--visits`` times in turn, after one unmeasured warm-up round."""
    from playwright.sync_api import sync_playwright

    first: dict[str, list] = {label: [] for label in labels}
    repeat: dict[str, list] = {label: [] for label in labels}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for label in labels:  # warms the servers up, not measured
            _first_and_repeat_visit(browser, urls[label], session, args)
        for _ in range(args.visits):
            for label in labels:
                visits = _first_and_repeat_visit(browser, urls[label], session, args)
                first[label].append(visits[0])
                repeat[label].append(visits[1])
        browser.close()
    return first, repeat


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.live:
        first, repeat = _visit_in_turn(args, ["live"], {"live": args.live}, _live_session(args))
        _report(["live"], first, repeat)
        print(f"load average at the end: {os.getloadavg()}")
        return
    path, session = _prepare_database(args.workdir)
    labels = [f"{index}:{repo.resolve().name}" for index, repo in enumerate(args.repo)]
    servers: list[subprocess.Popen] = []
    try:
        urls = _start_servers(args, labels, path, servers)
        first, repeat = _visit_in_turn(args, labels, urls, session)
        _report(labels, first, repeat)
    finally:
        _stop(servers)


if __name__ == "__main__":
    main()
