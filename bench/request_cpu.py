"""The CPU time a request costs the web process, in-process, for one or more checkouts interleaved.

Usage (from the repository root, PostgreSQL as in the README's test command)::

    git worktree add /tmp/before <commit>
    .venv/bin/python -m bench.request_cpu --repo /tmp/before --repo . --database h_cold_10000000 --rounds 3

With 50 clients on 2 cores a request waits for the CPU of the 49 before it, so its latency is about
25 times its CPU time: this measures that CPU time alone, without a server, a network or a client
in the way. For each round, for each ``--repo`` in turn, for each of PATHS: a fresh Python process
in that checkout sets Django up on ``--database`` (a database bench/pages_at_scale.py or
bench/cold_charts.py filled: one checkpoint, its user ``pages``; pages_at_scale's
``--state-partitions`` fills the state panel) with production's settings (DEBUG off) and a cache
of its own (with ``--redis-url``, that Redis database, emptied before each process, as production
caches sessions, permissions and fragments there), signs in with Django's test client, asks for the path ``--warm-up``
times, then ``--requests`` times, each timed by the wall clock and by the process's CPU clock.
Prints per round, checkout and path the median and p95 wall milliseconds and the mean CPU
milliseconds, then the same over all rounds, with the load average. ``--database`` alone (no
``--repo``) measures this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.load import PRODUCTION_SETTINGS, _percentile, chosen

REPO_DIR = Path(__file__).resolve().parent.parent
# The query page and what it asks for on a first screen, and the list; "{id}" is the checkpoint's.
PATHS = {
    "query page": "/checkpoints/{id}/",
    "health panel": "/checkpoints/{id}/panels/health/",
    "timeline": "/checkpoints/{id}/charts/timeline.json",
    "runtime charts": "/checkpoints/{id}/charts/runtime.json",
    "state heatmap": "/checkpoints/{id}/charts/state-heatmap.json",
    "list": "/",
}
USER = "pages"  # bench/pages_at_scale.py's

# Run in the measured checkout (its directory first on sys.path): Django on the bench's database,
# the requests timed; prints one JSON object of the timings.
CHILD = """
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import django
django.setup()
import ckptweb.wsgi  # what gunicorn loads: the URLconf, the warm-up, gc.freeze()
from django.contrib.auth import get_user_model
from django.test import Client
from dashboards.models import Checkpoint
client = Client()
client.force_login(get_user_model().objects.get(username=os.environ["BENCH_USER"]))
path = os.environ["BENCH_PATH"].format(id=Checkpoint.objects.get().pk)
def timed():
    wall, cpu = time.perf_counter(), time.process_time()
    status = client.get(path).status_code
    if status != 200:
        sys.exit(f"{path} answered {status}")
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
for _ in range(int(os.environ["BENCH_WARM_UP"])):
    timed()
times = [timed() for _ in range(int(os.environ["BENCH_REQUESTS"]))]
print(json.dumps({"wall": [t[0] for t in times], "cpu": [t[1] for t in times]}))
"""


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", type=Path, help="a checkout to measure (repeatable; default: this)")
    parser.add_argument("--database", required=True, help="a filled database's name (one checkpoint)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres", help="its server")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(PATHS), help="comma-separated names of PATHS")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-request-cpu"))
    parser.add_argument(
        "--redis-url", default="", help="a Redis database of its own, as production's cache (emptied); default: none"
    )
    return parser.parse_args()


def _environment(args: argparse.Namespace, repo: Path, path: str) -> dict[str, str]:
    return {
        **{key: value for key, value in os.environ.items() if not key.startswith("CKPTWEB_")},
        **PRODUCTION_SETTINGS,
        "DJANGO_SETTINGS_MODULE": "ckptweb.settings",
        "CKPTWEB_DATABASE_URL": args.database_url.rsplit("/", 1)[0] + "/" + args.database,
        "CKPTWEB_DATA_DIR": str(args.workdir / repo.name),  # the local cache: a process's own
        **({"CKPTWEB_REDIS_URL": args.redis_url} if args.redis_url else {}),
        "CKPTWEB_ALLOWED_HOSTS": "testserver",
        "CKPTWEB_LOG_LEVEL": "WARNING",
        "BENCH_USER": USER,
        "BENCH_PATH": path,
        "BENCH_WARM_UP": str(args.warm_up),
        "BENCH_REQUESTS": str(args.requests),
    }


def _measure(args: argparse.Namespace, repo: Path, path: str) -> dict[str, list[float]]:
    if args.redis_url:  # each process starts from an empty shared cache, as after a deploy
        subprocess.run(
            [sys.executable, "-c", f"import redis; redis.Redis.from_url({args.redis_url!r}).flushdb()"], check=True
        )
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=repo,
        env=_environment(args, repo, path),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{repo}: {path} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _paths(args: argparse.Namespace) -> dict[str, str]:
    return chosen(PATHS, args.only, "path")


def _report(title: str, figures: dict[tuple[str, str], dict[str, list[float]]]) -> None:
    print(f"\n{title}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  {'checkout':<20} {'path':<16} {'requests':>8} {'wall p50':>9} {'wall p95':>9} {'CPU mean':>9} ms")
    for (repo, name), times in figures.items():
        wall, cpu = times["wall"], times["cpu"]
        print(
            f"  {repo:<20} {name:<16} {len(wall):>8} {statistics.median(wall):>9.1f} "
            f"{_percentile(wall, 0.95):>9.1f} {statistics.mean(cpu):>9.1f}"
        )


def main() -> None:
    args = _arguments()
    repos = [repo.resolve() for repo in args.repo or [REPO_DIR]]
    args.workdir.mkdir(parents=True, exist_ok=True)
    every: dict[tuple[str, str], dict[str, list[float]]] = {}
    for number in range(1, args.rounds + 1):
        figures = {}
        for repo in repos:
            for name, path in _paths(args).items():
                figures[(str(repo), name)] = _measure(args, repo, path)
        _report(f"round {number}", figures)
        for key, times in figures.items():
            for kind, values in times.items():
                every.setdefault(key, {"wall": [], "cpu": []})[kind] += values
    _report(f"all {args.rounds} rounds", every)


if __name__ == "__main__":
    main()
