"""What `inspect_checkpoint --json` must say, built from what Spark itself read (spark-report.json)."""

from __future__ import annotations

import json


def expected_summary(report: dict) -> dict:
    """What `summarize_checkpoint(...).as_json()` must say, built from Spark's reading."""
    committed = {entry["batch_id"] for entry in report["commit_log"]}
    offsets = [entry["batch_id"] for entry in report["offset_log"]]
    return {
        "query_id": report["stream_metadata_id"],
        "uncommitted": [batch_id for batch_id in offsets if batch_id not in committed],
        "batches": [
            {
                "batch_id": entry["batch_id"],
                "timestamp_ms": entry["batch_timestamp_ms"],
                "watermark_ms": entry["batch_watermark_ms"],
                "committed": entry["batch_id"] in committed,
                "sources": [_json_or_text(offset) for offset in entry["offsets"]],
            }
            for entry in report["offset_log"]
        ],
        "errors": [],
    }


def _json_or_text(offset: str | None):
    if offset is None:
        return None
    try:
        return json.loads(offset)
    except ValueError:
        return offset
