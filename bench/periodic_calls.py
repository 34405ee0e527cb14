"""Benchmark: the storage calls a checkpoint costs per hour of periodic syncs, long history against short.

Usage (from the repository root)::

    .venv/bin/python -m bench.periodic_calls --workdir DIR [--long 100000] [--short 100]
        [--partitions 200] [--minutes 30] [--interval 10] [--rounds 3]

1. Starts moto's S3 server on loopback in a process of its own (bench/s3_server.py: moto's CPU
   then does not compete with the syncs for one interpreter lock) and writes two checkpoints of the same
   query (bench/growing_checkpoint.py: a file source, dropDuplicates on ``--partitions`` HDFS state
   partitions, a file sink; every file a copy of one PySpark wrote), one ``--long`` batches into its
   history and one ``--short``, each as Spark's retention leaves it (the newest 100 offsets and
   commits, the compactible logs' files of the last 10 minutes of batches (Spark's cleanup delay) and
   from the previous compact on, the newest 100 state versions with a snapshot every 10).
   Registers both (a first sync: the full walk), on a fresh SQLite database.
2. Per round, ``--minutes`` of the ``--interval``-second schedule a checkpoint gets: each step, one
   new batch in each checkpoint (with the deletions Spark's retention makes) and a sync of each,
   the long history then the short one (interleaved), at a clock that advances ``--interval``
   seconds per step, so that the probes (CKPTWEB_INSPECT_INTERVAL_SECONDS), the state follow
   (CKPTWEB_STATE_FOLLOW_MIN_SECONDS) and the full walk's schedule (CKPTWEB_FULL_WALK_INTERVAL_SECONDS)
   come due as they would in that time. The S3 requests of each sync are counted by kind.
3. Prints per round and checkpoint the LIST, GET and HEAD requests, scaled to an hour, and the ratio
   long / short of LIST + GET; the full walk's own requests (registration) per checkpoint; and, at
   the end, whether the state and log figures the syncs followed equal what a full walk then finds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import boto3
from botocore.config import Config

from bench.growing_checkpoint import WRITERS, GrowingCheckpoint
from bench.s3_server import DelayedS3Server, S3ServerProcess, serve_s3_for_django

BUCKET = "periodic"
COUNTED_KINDS = ("LIST", "GET", "HEAD")
# Spark's spark.sql.streaming.minBatchesToRetain: offsets/ and commits/ keep this many batches.
SPARK_RETAINED_BATCHES = 100
# spark.sql.streaming.fileSink.log.cleanupDelay and fileSource.log.cleanupDelay: 10 minutes.
SPARK_CLEANUP_DELAY_SECONDS = 600
PROGRESS_EVERY_STEPS = 60  # a line every 10 simulated minutes at the default interval
# What the state panel shows of a partition and of a compactible log.
LOG_FIGURES = ("path", "latest_batch_id", "live_entries", "latest_compact_bytes")


@dataclass
class History:
    """One checkpoint of the run: its writer, its row's id, the next batch id, and its counts."""

    name: str
    query: GrowingCheckpoint
    checkpoint_id: int
    next_batch: int
    sync_ms: list[float] = field(default_factory=list)


def _start(
    server: DelayedS3Server | S3ServerProcess, clock: Clock, name: str, batches: int, partitions: int
) -> tuple[History, Counter]:
    """Write ``batches`` batches of history under ``name``/, register it; returns it and its full walk's calls."""
    from dashboards.models import Checkpoint
    from workers.sync import sync_checkpoint

    # As many pooled connections as the checkpoint has writers (urllib3 warns of each one dropped).
    client = boto3.client(
        "s3", endpoint_url=server.endpoint, region_name="us-east-1", config=Config(max_pool_connections=WRITERS)
    )
    query = GrowingCheckpoint(client, BUCKET, name, partitions=partitions, retained_batches=SPARK_RETAINED_BATCHES)
    started = time.perf_counter()
    objects = query.start(batches)
    print(f"{name}: {batches} batches, {objects} objects written in {time.perf_counter() - started:.0f} s")
    checkpoint = Checkpoint.objects.create(
        name=name, url=f"s3://{BUCKET}/{name}/checkpoint", sink_log_url=f"s3://{BUCKET}/{name}/output"
    )
    before = Counter(server.requests_by_kind)
    run = sync_checkpoint(checkpoint.pk, now=clock.at(0))
    if run.status != run.Status.OK:
        raise SystemExit(f"{name}: the registration sync ended {run.status}: {run.message}")
    return History(name, query, checkpoint.pk, batches), Counter(server.requests_by_kind) - before


@dataclass(frozen=True)
class Clock:
    """The simulated time of the run: step ``n`` is ``n * interval`` seconds after ``start``."""

    start: datetime
    interval: int

    def at(self, step: int, later_seconds: int = 0) -> datetime:
        return self.start + timedelta(seconds=step * self.interval + later_seconds)


def _one_round(
    server: DelayedS3Server | S3ServerProcess, histories: list[History], clock: Clock, first_step: int, steps: int
) -> dict:
    """``steps`` steps of one batch and one sync per history; returns name -> requests by kind."""
    from workers.sync import sync_checkpoint

    counts = {history.name: Counter() for history in histories}
    for step in range(first_step, first_step + steps):
        for history in histories:
            history.query.run_batch(history.next_batch)
            history.next_batch += 1
            before = Counter(server.requests_by_kind)
            started = time.perf_counter()
            run = sync_checkpoint(history.checkpoint_id, now=clock.at(step))
            history.sync_ms.append((time.perf_counter() - started) * 1000)
            if run.status != run.Status.OK:
                raise SystemExit(f"{history.name}: the sync at step {step} ended {run.status}: {run.message}")
            counts[history.name] += Counter(server.requests_by_kind) - before
        if (step - first_step + 1) % PROGRESS_EVERY_STEPS == 0:
            print(f"  {step - first_step + 1} of {steps} steps, load average {_load()}", flush=True)
    return counts


def followed_figures(checkpoint_id: int) -> tuple[list, list]:
    """The state partitions' and the compactible logs' figures as the page shows them."""
    from dashboards.models import MetadataLog, StatePartition
    from workers.state_partitions import VERSION_FIGURES

    state = StatePartition.objects.filter(checkpoint_id=checkpoint_id).order_by("partition")
    logs = MetadataLog.objects.filter(checkpoint_id=checkpoint_id).order_by("path")
    return list(state.values_list(*VERSION_FIGURES, "rows", "rows_version")), list(logs.values_list(*LOG_FIGURES))


def _followed_equals_a_full_walk(history: History, clock: Clock, step: int) -> bool:
    """One more batch synced when the state follow and the probe are due, then a full walk: same figures?"""
    from django.utils import timezone

    from dashboards.models import Checkpoint
    from workers.sync import sync_checkpoint

    history.query.run_batch(history.next_batch)
    sync_checkpoint(history.checkpoint_id, now=clock.at(step, 400))
    followed = followed_figures(history.checkpoint_id)
    Checkpoint.objects.filter(pk=history.checkpoint_id).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(history.checkpoint_id, now=clock.at(step, 410))
    walked = followed_figures(history.checkpoint_id)
    if followed != walked:
        print(f"{history.name}: followed {followed}\n{history.name}: full walk {walked}")
    return followed == walked and len(walked[0]) > 0


def _per_hour(count: int, minutes: float) -> int:
    return round(count * 60 / minutes)


def _report_round(number: int, counts: dict, names: tuple[str, str], minutes: float) -> float:
    long, short = (counts[name] for name in names)
    ratio = (long["LIST"] + long["GET"]) / max(1, short["LIST"] + short["GET"])
    for name in names:
        figures = ", ".join(f"{kind} {_per_hour(counts[name][kind], minutes)}" for kind in COUNTED_KINDS)
        print(f"round {number}, {name}: per hour {figures}")
    print(f"round {number}: LIST + GET ratio {names[0]} / {names[1]} {ratio:.3f}  (load average {_load()})")
    return ratio


def _load() -> str:
    return " ".join(f"{figure:.2f}" for figure in os.getloadavg())


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--long", type=int, default=100_000, help="batches in the long history")
    parser.add_argument("--short", type=int, default=100, help="batches in the short history (the baseline)")
    parser.add_argument("--partitions", type=int, default=200, help="state partitions of each checkpoint")
    parser.add_argument("--minutes", type=float, default=30, help="minutes of syncs per round")
    parser.add_argument("--interval", type=int, default=10, help="seconds between syncs (and batches)")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def _rounds(
    server: DelayedS3Server | S3ServerProcess, histories: list[History], clock: Clock, args: argparse.Namespace
) -> int:
    """Run the rounds and print their figures; returns the steps run."""
    names = (histories[0].name, histories[1].name)
    steps = round(args.minutes * 60 / args.interval)
    ratios = []
    for number in range(1, args.rounds + 1):
        counts = _one_round(server, histories, clock, 1 + (number - 1) * steps, steps)
        ratios.append(_report_round(number, counts, names, args.minutes))
    print(
        f"LIST + GET ratio {names[0]} / {names[1]}, min / median / max of {args.rounds} rounds: "
        f"{min(ratios):.3f} / {statistics.median(ratios):.3f} / {max(ratios):.3f}"
    )
    for history in histories:
        ms = sorted(history.sync_ms)
        print(
            f"{history.name}: sync wall ms min / median / max {ms[0]:.0f} / {statistics.median(ms):.0f} / {ms[-1]:.0f}"
        )
    return args.rounds * steps


def main() -> None:
    args = _arguments()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-periodic-calls-"))
    server = serve_s3_for_django(workdir, BUCKET, own_process=True)
    from django.utils import timezone

    clock = Clock(timezone.now(), args.interval)
    boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    print(f"load average at the start {_load()}")
    histories = []
    for batches in (args.long, args.short):
        history, walk = _start(server, clock, f"h{batches}", batches, args.partitions)
        print(f"{history.name}: the registration's full walk: " + ", ".join(f"{k} {walk[k]}" for k in COUNTED_KINDS))
        histories.append(history)
    steps = _rounds(server, histories, clock, args)
    exact = {h.name: _followed_equals_a_full_walk(h, clock, 1 + steps) for h in histories}
    server.stop()
    print(f"followed figures equal a full walk's: {exact}; load average at the end {_load()}")
    if not all(exact.values()):
        raise SystemExit("the followed state or log figures differ from a full walk's")


if __name__ == "__main__":
    main()
