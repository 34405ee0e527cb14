"""Cold chart requests at two history lengths, interleaved: do the charts cost the screen, not the history? (issue 25)

Usage (from the repository root, PostgreSQL and Redis as in the README's test command)::

    .venv/bin/python -m bench.cold_charts --large 1000000 --small 10000 --rounds 3 --repetitions 5

1. Fills two databases (``<CKPTWEB_BENCH_DATABASE>_<size>``), each with one checkpoint of ``--small``
   or ``--large`` batches and one stateful operator's progress per batch, as bench/pages_at_scale.py
   does (in SQL, then the chart roll-ups built once by the worker's build, as after an upgrade).
2. For each round, ``--repetitions`` times, for each size in turn (small, large, small, large ...)
   and each chart endpoint (the Runtime charts, the batch timeline): empties Redis (the shared
   cache), starts a fresh gunicorn on that size's database, logs in (one request) and times the
   endpoint's first request: cold, empty caches, a fresh process. The small history is the
   baseline, measured in the same minutes as the large one.
3. Prints per round and endpoint the min / median / max milliseconds of each size, the ratio
   large / small pair by pair, and the load average at the start and end of each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ENDPOINTS = {"runtime charts": "charts/runtime.json", "timeline": "charts/timeline.json"}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-cold-charts"))
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5", help="a Redis database of its own (emptied)")
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--port", type=int, default=8807)
    parser.add_argument("--fill", type=int, help=argparse.SUPPRESS)  # internal: fill one database, in a child
    return parser.parse_args()


def _database_name(size: int) -> str:
    return f"{os.environ.get('CKPTWEB_BENCH_DATABASE', 'ckptweb_load')}_{size}"


def _fill_here(args: argparse.Namespace) -> None:
    """In a child whose CKPTWEB_BENCH_DATABASE names the size's database: recreate it and fill it."""
    from bench.pages_at_scale import _fill, _recreate_database

    _recreate_database(args.database_url)
    _fill(argparse.Namespace(**{**vars(args), "batches": args.fill}))


def _fill(args: argparse.Namespace, size: int) -> None:
    env = {**os.environ, "CKPTWEB_BENCH_DATABASE": _database_name(size)}
    command = [sys.executable, "-m", "bench.cold_charts", "--fill", str(size), "--database-url", args.database_url]
    command += ["--workdir", str(args.workdir), "--redis-url", args.redis_url]
    subprocess.run(command, env=env, check=True)


def _time_cold(args: argparse.Namespace, size: int, endpoint: str) -> float:
    """Milliseconds of the endpoint's first request on a fresh gunicorn and an empty Redis."""
    from bench.load import _stop, logged_in_session
    from bench.pages_at_scale import PASSWORD, USER, _time_once, _wait_for

    server = _serve_size(args, size)
    try:
        base = f"http://127.0.0.1:{args.port}"
        _wait_for(base)
        session = logged_in_session(base, USER, PASSWORD)
        return _time_once(base, session, f"/checkpoints/{_checkpoint_id(args, size)}/{endpoint}")
    finally:
        _stop([server])


def _serve_size(args: argparse.Namespace, size: int) -> subprocess.Popen:
    """One gunicorn worker on the database of ``size`` batches, its cache emptied first."""
    from bench.load import _start, gunicorn_command
    from bench.pages_at_scale import _empty_cache, _environment

    _empty_cache(args.redis_url)
    env = {**_environment(args), "CKPTWEB_DATABASE_URL": _size_url(args, size)}
    return _start(gunicorn_command(args.port, 1, timeout_seconds=300), env, args.workdir / "gunicorn.log")


def _size_url(args: argparse.Namespace, size: int) -> str:
    return args.database_url.rsplit("/", 1)[0] + "/" + _database_name(size)


def _checkpoint_id(args: argparse.Namespace, size: int) -> int:
    import psycopg

    with psycopg.connect(_size_url(args, size).replace("postgres://", "postgresql://")) as connection:
        return connection.execute("SELECT id FROM dashboards_checkpoint").fetchone()[0]


def _round(args: argparse.Namespace) -> dict[str, dict[int, list[float]]]:
    """``--repetitions`` cold requests of each endpoint at each size, the sizes interleaved."""
    times: dict[str, dict[int, list[float]]] = {name: {args.small: [], args.large: []} for name in ENDPOINTS}
    for _ in range(args.repetitions):
        for size in (args.small, args.large):
            for name, endpoint in ENDPOINTS.items():
                times[name][size].append(_time_cold(args, size, endpoint))
    return times


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f} / {statistics.median(values):,.0f} / {max(values):,.0f}"


def _report(title: str, times: dict[str, dict[int, list[float]]], loads: list[float], args) -> None:
    print(f"\n{title}: load average (1 min) from {min(loads):.2f} to {max(loads):.2f} (at each round's start and end)")
    for name, by_size in times.items():
        ratios = [large / small for small, large in zip(by_size[args.small], by_size[args.large], strict=True)]
        print(
            f"  {name}: {args.small:,} batches {_spread(by_size[args.small])} ms; "
            f"{args.large:,} batches {_spread(by_size[args.large])} ms (min / median / max of "
            f"{len(ratios)}); ratio {args.large:,} / {args.small:,} pair by pair {_spread_ratio(ratios)}"
        )


def _spread_ratio(ratios: list[float]) -> str:
    return f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}"


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.fill is not None:
        _fill_here(args)
        return
    for size in (args.small, args.large):
        _fill(args, size)
    _measure_rounds(args)


def _measure_rounds(args: argparse.Namespace) -> None:
    """``--rounds`` rounds, each reported with the load average around it, then all of them together."""
    every: dict[str, dict[int, list[float]]] = {name: {args.small: [], args.large: []} for name in ENDPOINTS}
    every_load: list[float] = []
    for number in range(1, args.rounds + 1):
        loads = [os.getloadavg()[0]]
        times = _round(args)
        loads.append(os.getloadavg()[0])
        _report(f"round {number}", times, loads, args)
        every_load += loads
        for name, by_size in times.items():
            for size, values in by_size.items():
                every[name][size] += values
    _report("all rounds", every, every_load, args)


if __name__ == "__main__":
    main()
