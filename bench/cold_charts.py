"""Cold and warm requests of the query page and its charts at two history lengths, interleaved:
do they cost the screen, not the history? (issue 25)

Usage (from the repository root, PostgreSQL and Redis as in the README's test command)::

    .venv/bin/python -m bench.cold_charts --large 10000000 --small 10000 --rounds 3 --repetitions 5 --warm 100

1. Fills two databases (``<CKPTWEB_BENCH_DATABASE>_<size>``), each with one checkpoint of ``--small``
   or ``--large`` batches and one stateful operator's progress per batch, as bench/pages_at_scale.py
   does (in SQL, then the chart roll-ups built once by the worker's build, as after an upgrade).
   ``--reuse`` keeps a database that already holds its size's batches (a 10M fill takes a while).
2. For each round, ``--repetitions`` times, for each size in turn (small, large, small, large ...)
   and each endpoint of ENDPOINTS (the query page and every chart it asks for): empties Redis (the
   shared cache), starts a fresh gunicorn on that size's database, logs in (one request) and times
   the endpoint's first request: cold, empty caches, a fresh process; then ``--warm`` requests of
   the same endpoint one after the other in that process: warm. The small history is the
   baseline, measured in the same minutes as the large one.
3. Prints per round, endpoint and size the min / median / max milliseconds of the cold requests,
   the median and p95 of the warm ones, the ratios large / small (cold pair by pair; warm p95) and
   cold p95 / warm p95, and the load average at the start and end of each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

# What the query page asks for, below /checkpoints/<id>/; "{middle}" is the middle batch of the
# history (a zoomed range of 1,000 batches there). The fill has no state partitions, metadata log or
# inventory: those charts answer their empty states, whose cost does not depend on the history.
ENDPOINTS = {
    "query page": "",
    "timeline": "charts/timeline.json",
    "timeline zoomed": "charts/timeline.json?from={middle}&to={middle_end}",
    "runtime charts": "charts/runtime.json",
    "runtime charts zoomed": "charts/runtime.json?from={middle}&to={middle_end}",
    "state heatmap": "charts/state-heatmap.json",
    "inventory chart": "charts/inventory.json",
    "batch table": "panels/batches/",
    "health panel": "panels/health/",
}
ZOOM_BATCHES = 1000


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ckptweb-cold-charts"))
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5", help="a Redis database of its own (emptied)")
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--warm", type=int, default=100, help="requests after the cold one, in the same process")
    parser.add_argument("--only", default=",".join(ENDPOINTS), help="comma-separated names of ENDPOINTS")
    parser.add_argument("--reuse", action="store_true", help="keep a database that holds its size's batches")
    parser.add_argument("--port", type=int, default=8807)
    parser.add_argument("--fill", type=int, help=argparse.SUPPRESS)  # internal: fill one database, in a child
    return parser.parse_args()


def _database_name(size: int) -> str:
    return f"{os.environ.get('CKPTWEB_BENCH_DATABASE', 'ckptweb_load')}_{size}"


def _fill_here(args: argparse.Namespace) -> None:
    """In a child whose CKPTWEB_BENCH_DATABASE names the size's database: recreate it and fill it."""
    from bench.pages_at_scale import _fill, _recreate_database

    _recreate_database(args.database_url)
    # No state rows: the heatmap and state panel draw their empty states (bench/request_cpu.py measures them filled).
    _fill(argparse.Namespace(**{**vars(args), "batches": args.fill, "state_partitions": 0}))


def _fill(args: argparse.Namespace, size: int) -> None:
    env = {**os.environ, "CKPTWEB_BENCH_DATABASE": _database_name(size)}
    command = [sys.executable, "-m", "bench.cold_charts", "--fill", str(size), "--database-url", args.database_url]
    command += ["--workdir", str(args.workdir), "--redis-url", args.redis_url]
    subprocess.run(command, env=env, check=True)


def _filled(args: argparse.Namespace, size: int) -> bool:
    """Whether the size's database already holds one checkpoint of ``size`` batches with its roll-ups."""
    import psycopg

    try:
        with psycopg.connect(_size_url(args, size).replace("postgres://", "postgresql://")) as connection:
            row = connection.execute(
                "SELECT latest_batch_id, timeline_rollups_built FROM dashboards_checkpoint"
            ).fetchall()
    except psycopg.Error:
        return False
    # A bench of 50 clients (bench/pages_at_scale.py --reuse) may have added a few live batches.
    return len(row) == 1 and row[0][0] is not None and size - 1 <= row[0][0] < size + 1000 and row[0][1]


def _time_endpoint(args: argparse.Namespace, size: int, endpoint: str) -> tuple[float, list[float]]:
    """Milliseconds of the endpoint's first request on a fresh gunicorn and an empty Redis, then of
    ``--warm`` more requests in that process."""
    from bench.load import _stop, logged_in_session
    from bench.pages_at_scale import PASSWORD, USER, _time_once, _wait_for

    middle = size // 2
    url = f"/checkpoints/{_checkpoint_id(args, size)}/" + endpoint.format(
        middle=middle, middle_end=middle + ZOOM_BATCHES - 1
    )
    server = _serve_size(args, size)
    try:
        base = f"http://127.0.0.1:{args.port}"
        _wait_for(base)
        session = logged_in_session(base, USER, PASSWORD)
        cold = _time_once(base, session, url)
        return cold, [_time_once(base, session, url) for _ in range(args.warm)]
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


Samples = dict[str, dict[int, dict[str, list[float]]]]  # endpoint -> size -> "cold" / "warm" -> ms


def _no_samples(args: argparse.Namespace) -> Samples:
    return {name: {size: {"cold": [], "warm": []} for size in (args.small, args.large)} for name in _endpoints(args)}


def _endpoints(args: argparse.Namespace) -> dict[str, str]:
    from bench.load import chosen

    return chosen(ENDPOINTS, args.only, "endpoint")


def _round(args: argparse.Namespace) -> Samples:
    """``--repetitions`` cold (and warm) runs of each endpoint at each size, the sizes interleaved."""
    times = _no_samples(args)
    for _ in range(args.repetitions):
        for size in (args.small, args.large):
            for name, endpoint in _endpoints(args).items():
                cold, warm = _time_endpoint(args, size, endpoint)
                times[name][size]["cold"].append(cold)
                times[name][size]["warm"] += warm
    return times


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f} / {statistics.median(values):,.0f} / {max(values):,.0f}"


def _p95(values: list[float]) -> float:
    from bench.load import _percentile

    return _percentile(values, 0.95)


def _report(title: str, times: Samples, loads: list[float], args) -> None:
    print(f"\n{title}: load average (1 min) from {min(loads):.2f} to {max(loads):.2f} (at each round's start and end)")
    small, large = args.small, args.large
    for name, by_size in times.items():
        print(f"  {name}:")
        for size in (small, large):
            cold, warm = by_size[size]["cold"], by_size[size]["warm"]
            warm_text = (
                f"warm p50 {statistics.median(warm):,.1f} p95 {_p95(warm):,.1f} ms of {len(warm)}" if warm else ""
            )
            ratio = f"; cold p95 / warm p95 {_p95(cold) / _p95(warm):.2f}" if warm else ""
            print(
                f"    {size:>12,} batches: cold {_spread(cold)} ms (min / median / max of {len(cold)}), "
                f"p95 {_p95(cold):,.0f} ms; {warm_text}{ratio}"
            )
        pairs = [b / a for a, b in zip(by_size[small]["cold"], by_size[large]["cold"], strict=True)]
        warm_ratio = (
            f"; warm p95 {_p95(by_size[large]['warm']) / _p95(by_size[small]['warm']):.2f}"
            if by_size[small]["warm"]
            else ""
        )
        print(f"    ratio {large:,} / {small:,}: cold pair by pair {_spread_ratio(pairs)}{warm_ratio}")


def _spread_ratio(ratios: list[float]) -> str:
    return f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}"


def main() -> None:
    args = _arguments()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.fill is not None:
        _fill_here(args)
        return
    for size in (args.small, args.large):
        if args.reuse and _filled(args, size):
            print(f"{_database_name(size)}: kept, it holds {size:,} batches (--reuse)")
        else:
            _fill(args, size)
    _measure_rounds(args)


def _measure_rounds(args: argparse.Namespace) -> None:
    """``--rounds`` rounds, each reported with the load average around it, then all of them together."""
    every = _no_samples(args)
    every_load: list[float] = []
    for number in range(1, args.rounds + 1):
        loads = [os.getloadavg()[0]]
        times = _round(args)
        loads.append(os.getloadavg()[0])
        _report(f"round {number}", times, loads, args)
        every_load += loads
        for name, by_size in times.items():
            for size, samples in by_size.items():
                for kind, values in samples.items():
                    every[name][size][kind] += values
    _report("all rounds", every, every_load, args)


if __name__ == "__main__":
    main()
