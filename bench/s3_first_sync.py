"""Benchmark: the first sync of a checkpoint on S3, reads kept in flight against one GET at a time.

Usage (from the repository root)::

    .venv/bin/python -m bench.s3_first_sync [--workdir DIR] [--batches 1000] [--delay-ms 20] [--repeat 1]

1. Starts moto's S3 server on loopback (bench/s3_server.py) and uploads a checkpoint of
   ``--batches`` committed batches (bench/checkpoint_history.py: files copied from a
   PySpark-written fixture).
2. Delays every request by ``--delay-ms`` (a sleep: the round trip of a real store, which serves
   many requests at once; moto's own CPU time comes on top).
3. ``--repeat`` times, alternating: a first sync with one GET at a time
   (``REMOTE_READS_IN_FLIGHT = 1``, how the sync read before it read ahead) and one with the
   default, each on a new Checkpoint row in a fresh SQLite database in DIR. Prints each sync's
   time, the requests the server saw and the most it had in flight, and the ratio of the best
   times (one at a time / in flight).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import boto3

from bench.checkpoint_history import read_template, write_batches
from bench.s3_server import DelayedS3Server, serve_s3_for_django

BUCKET = "bench"


def _upload(client, directory: Path, prefix: str) -> int:
    files = [path for path in sorted(directory.rglob("*")) if path.is_file()]
    for path in files:
        client.put_object(
            Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(directory).as_posix()}", Body=path.read_bytes()
        )
    return len(files)


def _first_sync(server: DelayedS3Server, url: str, name: str, in_flight: int) -> dict:
    from dashboards.models import Checkpoint
    from workers.checkpoint.storage import checkpointstorage as storage_module
    from workers.sync import sync_checkpoint

    storage_module.REMOTE_READS_IN_FLIGHT = in_flight
    Checkpoint.objects.filter(url=url).delete()  # each sync is a first one
    checkpoint = Checkpoint.objects.create(name=name, url=url)
    server.reset_counts()
    started = time.perf_counter()
    run = sync_checkpoint(checkpoint.pk)
    elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "requests": server.requests,
        "max_in_flight": server.max_in_flight,
        "status": str(run.status),
        "batches": run.new_batches,
        "reads": run.read_calls,
        "lists": run.list_calls,
    }


def _upload_history(server: DelayedS3Server, workdir: Path, batches: int) -> int:
    """Write ``batches`` batches and upload them under history/; return the objects uploaded."""
    client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    history = workdir / f"history-{batches}"
    write_batches(history, range(batches), read_template())
    return _upload(client, history, "history")


def _time_first_syncs(server: DelayedS3Server, repeat: int) -> dict[int, list[dict]]:
    """Reads in flight (one, and the default) -> the figures of each of ``repeat`` first syncs."""
    from workers.checkpoint.storage.checkpointstorage import REMOTE_READS_IN_FLIGHT

    results: dict[int, list[dict]] = {1: [], REMOTE_READS_IN_FLIGHT: []}
    for run in range(repeat):
        for in_flight in results:
            figures = _first_sync(server, f"s3://{BUCKET}/history", f"s3-{in_flight}-{run}", in_flight)
            results[in_flight].append(figures)
            print(f"reads in flight {in_flight:>2}: {figures}")
    return results


def _report(results: dict[int, list[dict]], repeat: int) -> None:
    from workers.checkpoint.storage.checkpointstorage import REMOTE_READS_IN_FLIGHT

    best = {in_flight: min(figures["seconds"] for figures in runs) for in_flight, runs in results.items()}
    for in_flight, seconds in best.items():
        print(f"first sync, {in_flight:>2} reads in flight: best of {repeat} {seconds:.2f} s")
    print(f"ratio one at a time / {REMOTE_READS_IN_FLIGHT} in flight: {best[1] / best[REMOTE_READS_IN_FLIGHT]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-s3-first-sync-"))
    server = serve_s3_for_django(workdir, BUCKET)
    files = _upload_history(server, workdir, args.batches)
    print(
        f"{args.batches} batches, {files} objects on s3://{BUCKET}/history; each request delayed {args.delay_ms:g} ms"
    )
    server.delay_seconds = args.delay_ms / 1000
    results = _time_first_syncs(server, args.repeat)
    server.stop()
    _report(results, args.repeat)


if __name__ == "__main__":
    main()
