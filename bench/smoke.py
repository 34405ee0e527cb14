"""Every benchmark at a tiny size, one after the other, so that none of them stops running unseen.

Usage (from the repository root; what the benches need: PostgreSQL and Redis as in the README's
test command, Java 17 and PySpark, Debian's chromium and wrk)::

    .venv/bin/python -m bench.smoke [--workdir DIR] [--only bench.sync_calls,...] [--lanes 2]

Runs each module of SMOKE_RUNS as ``python -m <module> <arguments>`` in a work dir of its own
under DIR (a temp dir by default), with its output in ``DIR/<module>.log``, in ``--lanes``
parallel lanes (the benches wait on Spark, servers and browsers more than they compute); prints
each run's exit status and wall time, and the last lines of the output of those that failed.
Each bench has a PostgreSQL database and a Redis database of its own, so lanes never share one. Exits 1 when one
failed or ran past RUN_TIMEOUT_SECONDS. The figures mean nothing at these sizes: what is checked
is that each bench still runs to its end, which a renamed import or a missing tool breaks first.
A new bench goes into SMOKE_RUNS (tests/test_bench_smoke.py fails until it does).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_SECONDS = 600
FAILED_OUTPUT_LINES = 30
# Redis databases of the smoke's own, one per bench that takes one (the page benches empty the one
# they are given): "{redis}" in SMOKE_RUNS.
FIRST_REDIS_DATABASE = 11
# CKPTWEB_BENCH_DATABASE of each bench: the benches that fill PostgreSQL (re)create the database it names.
BENCH_DATABASE_PREFIX = "ckptweb_smoke_"

# module -> its arguments at a tiny size; "{workdir}" is the run's own work dir, "{base}" the smoke's,
# "{redis}" the bench's own Redis database.
# The ports are moved out of the way of a bench someone runs at full size meanwhile. state_follow
# measures the state state_rows built (the same "variable" dir), so PySpark builds it once; the
# snapshot cases' version choice is tested in tests/test_bench_state_rows.py and, on states PySpark
# writes, tests/spark/test_staterows_fast_vs_spark.py.
SMOKE_RUNS: dict[str, tuple[str, ...]] = {
    "bench.checkpoint_history": ("{workdir}/history", "--batches", "20", "--state-partitions", "2"),
    "bench.first_sync": ("--workdir", "{workdir}", "--batches", "20", "--repeat", "1"),
    "bench.sync_calls": ("--workdir", "{workdir}", "--short", "10", "--long", "20", "--repeat", "1"),
    "bench.s3_first_sync": ("--workdir", "{workdir}", "--batches", "10", "--delay-ms", "1", "--repeat", "1"),
    "bench.periodic_calls": (
        *("--workdir", "{workdir}", "--long", "200", "--short", "20", "--partitions", "2"),
        *("--minutes", "1", "--rounds", "1"),
    ),
    "bench.runtime_charts": ("--batches", "200", "--repeats", "1"),
    "bench.metrics_at_scale": (
        "--workdir",
        "{workdir}",
        "--checkpoints",
        "5",
        "--batches-each",
        "10",
        "--scrapes",
        "2",
    ),
    "bench.list_at_scale": (
        *("--workdir", "{workdir}", "--checkpoints", "5", "--batches-each", "10", "--seconds", "1", "--rounds", "1"),
        *("--visits", "1", "--port", "8867", "--redis-url", "{redis}"),
    ),
    "bench.pages_at_scale": (
        *("--workdir", "{workdir}", "--batches", "200", "--clients", "2", "--seconds", "1"),
        *("--gunicorn-workers", "1", "--live-batches", "1", "--port", "8866", "--redis-url", "{redis}"),
    ),
    "bench.cold_charts": (
        *("--workdir", "{workdir}", "--large", "200", "--small", "100", "--rounds", "1", "--repetitions", "1"),
        *("--warm", "2", "--port", "8868", "--redis-url", "{redis}"),
    ),
    # The database bench.cold_charts filled (CKPTWEB_BENCH_DATABASE of the smoke's cold_charts, its large size).
    "bench.request_cpu": (
        *("--database", BENCH_DATABASE_PREFIX + "cold_charts_200", "--requests", "2", "--warm-up", "1"),
        *("--rounds", "1", "--workdir", "{workdir}"),
    ),
    "bench.load": (
        *("--workdir", "{workdir}", "--checkpoints", "4", "--batches", "5", "--interval", "5", "--users", "8"),
        *("--seconds", "2", "--workers", "1", "--concurrency", "1", "--gunicorn-workers", "1"),
        *("--port", "8865", "--redis-url", "{redis}"),
    ),
    "bench.page_load": ("--workdir", "{workdir}", "--repo", ".", "--visits", "1", "--port", "8850"),
    "bench.state_rows": (
        "--workdir",
        "{base}/state",
        "--rows-per-batch",
        "2000",
        "--repeat",
        "1",
        "--cases",
        "variable",
    ),
    "bench.state_follow": ("--workdir", "{base}/state", "--rows-per-batch", "2000", "--repeat", "1"),
    "bench.restart_after_snapshot": ("--workdir", "{workdir}", "--batches", "3", "--keys", "100", "--repeat", "1"),
    "bench.screenshots": ("--workdir", "{workdir}", "--out", "{workdir}/images", "--port", "8860", "--batches", "2"),
    "bench.soak_demo": ("--workdir", "{workdir}", "--seconds", "4", "--checkpoints", "4", "--port", "8811"),
    "bench.web_memory": (
        *("--workdir", "{workdir}", "--requests", "60", "--checkpoints", "1", "--batches", "20"),
        *("--batch-every", "20", "--sample-every", "20", "--warm-up", "20", "--port", "8848"),
    ),
    "bench.worker_memory": (
        *("--workdir", "{workdir}", "--minutes", "0.05", "--sample-seconds", "2", "--checkpoints", "2"),
        *("--interval", "2"),
    ),
}


# A bench runs after another, in the same lane: state_follow reads what state_rows built, request_cpu
# the database cold_charts filled; the two that each start a whole demo (PySpark queries, a worker,
# beat, a server) took twice their time alone when side by side in two lanes (104 and 109 s,
# 2026-11-28), so they share one.
RUNS_AFTER = {
    "bench.state_follow": "bench.state_rows",
    "bench.soak_demo": "bench.screenshots",
    "bench.request_cpu": "bench.cold_charts",  # measures the database cold_charts filled
}
# Started first, longest first, so that the lanes end together (their times on an idle machine,
# docs/testing.md: 63, 50, 37 + the follow, 23, 22, 21 and 18 s; the others 0.1 to 13 s).
SLOWEST = (
    "bench.screenshots",
    "bench.state_rows",
    "bench.pages_at_scale",
    "bench.page_load",
    "bench.list_at_scale",
    "bench.restart_after_snapshot",
)


def redis_url(module: str) -> str:
    """The bench's own Redis database, among those of the benches that take one."""
    takers = [name for name, arguments in SMOKE_RUNS.items() if any("{redis}" in a for a in arguments)]
    return f"redis://127.0.0.1:6379/{FIRST_REDIS_DATABASE + takers.index(module)}" if module in takers else ""


def command_for(module: str, base: Path) -> list[str]:
    workdir, redis = base / module, redis_url(module)
    arguments = (argument.format(workdir=workdir, base=base, redis=redis) for argument in SMOKE_RUNS[module])
    return [sys.executable, "-m", module, *arguments]


def environment_for(module: str) -> dict[str, str]:
    return {**os.environ, "CKPTWEB_BENCH_DATABASE": BENCH_DATABASE_PREFIX + module.removeprefix("bench.")}


def run_one(module: str, base: Path) -> tuple[int | None, float]:
    """Run one bench in ``base/<module>``; return its exit status (None: timed out) and wall time."""
    log, started = base / f"{module}.log", time.monotonic()
    with log.open("w") as output:
        process = subprocess.Popen(
            command_for(module, base),
            cwd=REPO_DIR,
            env=environment_for(module),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            status = process.wait(timeout=RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)  # the bench and whatever it started (gunicorn, Spark, chromium)
            process.wait()
            status = None
    return status, time.monotonic() - started


def lane_units(modules: list[str]) -> list[list[str]]:
    """The benches grouped into what one lane runs in a row (a bench after the one it reads), slowest first."""
    units = [[module] for module in modules if RUNS_AFTER.get(module) not in modules]
    for module in modules:
        if RUNS_AFTER.get(module) in modules:
            next(unit for unit in units if RUNS_AFTER[module] in unit).append(module)
    return sorted(units, key=lambda unit: SLOWEST.index(unit[0]) if unit[0] in SLOWEST else len(SLOWEST))


def describe(module: str, status: int | None, seconds: float) -> str:
    outcome = "ok" if status == 0 else f"FAILED ({'timed out' if status is None else f'exit {status}'})"
    return f"{module:<30} {outcome:<22} {seconds:6.1f} s"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--only", default=",".join(SMOKE_RUNS), help="comma-separated modules of SMOKE_RUNS")
    parser.add_argument("--lanes", type=int, default=2, help="benches run at once (default 2)")
    return parser.parse_args(argv)


def _print_failed_logs(base: Path, failed: list[str]) -> None:
    """The last lines of each failed bench's log."""
    for module in failed:
        lines = (base / f"{module}.log").read_text(errors="replace").splitlines()
        print(f"\n== {module}, the end of {base / f'{module}.log'}:", *lines[-FAILED_OUTPUT_LINES:], sep="\n")


def run_unit(unit: list[str], base: Path) -> list[str]:
    """Run the unit's benches in a row; return those that failed (the rest of the unit still runs)."""
    failed = []
    for module in unit:
        status, seconds = run_one(module, base)
        print(describe(module, status, seconds), flush=True)
        if status != 0:
            failed.append(module)
    return failed


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-bench-smoke-"))
    base.mkdir(parents=True, exist_ok=True)
    modules = args.only.split(",")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.lanes) as lanes:
        failed = [
            module for done in lanes.map(lambda unit: run_unit(unit, base), lane_units(modules)) for module in done
        ]
    _print_failed_logs(base, failed)
    print(
        f"\n{len(modules)} benches in {args.lanes} lanes in {time.monotonic() - started:.0f} s;"
        f" load average {os.getloadavg()}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
