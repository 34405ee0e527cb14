"""One Prometheus scrape of ``/metrics`` with 1,000 registered checkpoints (the list bench's data).

Usage (from the repository root, PostgreSQL as in the README's test command; an idle machine)::

    .venv/bin/python -m bench.metrics_at_scale --checkpoints 1000 --batches-each 1000
    .venv/bin/python -m bench.metrics_at_scale --reuse        # the same data, not written again

1. Unless ``--reuse``: recreates the database ``ckptweb_load`` and fills it as bench/list_at_scale.py
   does (``--checkpoints`` checkpoints with their batches, progress, health figures and findings).
2. In this process, as ``ckptweb/wsgi.py`` starts a web worker (its URLconf loaded, then
   ``gc.freeze()``), scrapes ``/metrics`` ``--scrapes`` times with Django's test client, after
   one scrape to warm up, and prints the median, p95 and max in ms, the statements per scrape
   and the size of the exposition.

``--reuse`` lets two checkouts be timed on the same data one after the other: fill once, then run
``python -m bench.metrics_at_scale --reuse`` in each, alternating.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.list_at_scale import _fill, add_fill_arguments
from bench.load import _percentile, _recreate_database
from bench.pages_at_scale import set_up_django

METRICS_TOKEN = "bench-metrics-token"


def _scrape_times(scrapes: int) -> tuple[list[float], int, int]:
    """Milliseconds per scrape, the statements of the last one and its exposition's size in bytes."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    import ckptweb.wsgi  # noqa: F401 - loads the URLconf and freezes the garbage collector, as a worker does

    client = Client(HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}", HTTP_HOST="127.0.0.1")
    assert client.get("/metrics").status_code == 200  # warm-up: connection, templates, caches
    times = []
    for _ in range(scrapes):
        started = time.perf_counter()
        response = client.get("/metrics")
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    with CaptureQueriesContext(connection) as statements:
        size = len(client.get("/metrics").content)
    return times, len(statements), size


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-metrics"))
    add_fill_arguments(parser)
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--reuse", action="store_true", help="time the data already in ckptweb_load")
    parser.add_argument("--redis-url", default="", help="the shared cache's Redis (default: none, as in the test)")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ["CKPTWEB_METRICS_TOKEN"] = METRICS_TOKEN  # read by the settings at django.setup()
    if args.reuse:
        set_up_django(args)
    else:
        _recreate_database(args.database_url)
        _fill(args)
    times, statements, size = _scrape_times(args.scrapes)
    print(
        f"/metrics, {args.scrapes} scrapes in-process: median {statistics.median(times):.0f} ms, "
        f"p95 {_percentile(times, 0.95):.0f} ms, max {max(times):.0f} ms; "
        f"{statements} statements and {size:,} bytes per scrape"
    )


if __name__ == "__main__":
    main()
