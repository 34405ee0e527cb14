"""A fixture checkpoint synced into the store with its Spark progress, and what Spark says it holds.

Shared by the collector tests (tests/dashboards/test_metrics.py) and the end-to-end scrape by a
real Prometheus (tests/prometheus/). Expected figures come from the fixture's spark-report.json
(what Spark's own classes read back when the fixture was generated) and from walking its files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from dashboards.models import BatchProgress, Checkpoint
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.checkpoint.progress import progress_from_dict
from workers.sync import sync_checkpoint

# Killed after writing offsets/6 and before commits/6: one uncommitted batch, HDFS state.
KILLED = "killed_mid_batch"
# A file source with a compacted sources/0 log and a file sink with a compacted _spark_metadata.
DEDUP = "file_source_dedup"


def register_synced_fixture(copy_checkpoint, fixture: str) -> tuple[Checkpoint, dict, Path]:
    """Copy, register and sync a fixture checkpoint, store its progress reports; return the row, report and copy."""
    base = copy_checkpoint(OUR_FIXTURES / fixture)
    sink = base / "output"
    checkpoint = make_checkpoint(
        name=fixture, url=str(base / "checkpoint"), sink_log_url=str(sink) if sink.is_dir() else ""
    )
    sync_checkpoint(checkpoint.pk)
    report = json.loads((base / "spark-report.json").read_text())
    for progress in report["progress"]:
        BatchProgress.objects.store(progress_from_dict(progress, source="spark-report.json"), origin="listener")
    return Checkpoint.objects.get(pk=checkpoint.pk), report, base


def newest_progress(report: dict) -> dict:
    return max(report["progress"], key=lambda progress: progress["batchId"])


def expected_batch_figures(report: dict) -> dict[str, float]:
    """Per-checkpoint gauges as Spark's offset log, commit log and newest progress report give them."""
    offsets = {entry["batch_id"]: entry for entry in report["offset_log"]}
    committed = {entry["batch_id"] for entry in report["commit_log"]}
    newest = offsets[max(offsets)]
    progress = newest_progress(report)
    operators = progress["stateOperators"]
    return {
        "ckptweb_checkpoint_latest_batch_id": max(offsets),
        "ckptweb_checkpoint_latest_committed_batch_id": max(committed),
        "ckptweb_checkpoint_uncommitted_batches": len(set(offsets) - committed),
        "ckptweb_checkpoint_latest_batch_timestamp_seconds": newest["batch_timestamp_ms"] / 1000,
        "ckptweb_checkpoint_watermark_timestamp_seconds": newest["batch_watermark_ms"] / 1000,
        "ckptweb_checkpoint_watermark_lag_seconds": (newest["batch_timestamp_ms"] - newest["batch_watermark_ms"])
        / 1000,
        "ckptweb_progress_batch_id": progress["batchId"],
        "ckptweb_progress_batch_duration_seconds": progress["batchDuration"] / 1000,
        "ckptweb_progress_input_rows": progress["numInputRows"],
        "ckptweb_progress_processed_rows_per_second": progress["processedRowsPerSecond"],
        "ckptweb_state_operator_rows": sum(op["numRowsTotal"] for op in operators),
        "ckptweb_state_operator_memory_used_bytes": sum(op["memoryUsedBytes"] for op in operators),
        "ckptweb_state_operator_cache_hits_total": sum(
            op["customMetrics"]["loadedMapCacheHitCount"] for op in operators
        ),
        "ckptweb_state_operator_cache_misses_total": sum(
            op["customMetrics"]["loadedMapCacheMissCount"] for op in operators
        ),
    }


def files_on_disk(checkpoint_dir: Path) -> tuple[Counter, Counter]:
    """Files and bytes under the checkpoint by inventory kind, counted by walking the directory."""
    files, size = Counter(), Counter()
    for path in checkpoint_dir.rglob("*"):
        if path.is_file():
            parts = path.relative_to(checkpoint_dir).parts
            kind = "metadata" if len(parts) == 1 else parts[0]
            files[kind] += 1
            size[kind] += path.stat().st_size
    return files, size


def parse_exposition(text: str) -> dict[tuple[str, frozenset], float]:
    """Samples of a Prometheus text exposition keyed by (sample name, label items)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def checkpoint_sample(samples: dict, name: str, checkpoint: str, **labels: str) -> float | None:
    """The value of one per-checkpoint sample, None when absent (other labels must match exactly)."""
    for (sample_name, items), value in samples.items():
        found = dict(items)
        if (
            sample_name == name
            and found.get("checkpoint") == checkpoint
            and all(found.get(k) == v for k, v in labels.items())
        ):
            return value
    return None
