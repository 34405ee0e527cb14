"""Progress reports of a windowed aggregation with random figures (ties among them likely) and
one or two state operators, sent to the ingest API as a pipeline's listener sends them."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

from fixture_paths import OUR_FIXTURES
from kafka_progress import with_kafka_source

INGEST_URL = "/api/ingest/progress/"
TEMPLATE = json.loads((OUR_FIXTURES / "windowed_agg_file_sink" / "spark-report.json").read_text())["progress"][-1]
START_MS = 1_700_000_000_000


def progress_report(batch_id: int, rng: random.Random) -> dict:
    """A report of ``batch_id`` with random figures (ties among them likely) and two operators."""

    def operator(index: int) -> dict:
        return {
            **TEMPLATE["stateOperators"][0],
            "operatorName": f"op{index}",
            "numRowsTotal": rng.choice([5, 5, 7, rng.randrange(1_000)]),
            "numRowsUpdated": rng.randrange(4),
            "memoryUsedBytes": rng.randrange(10_000),
            "customMetrics": {"loadedMapCacheHitCount": rng.randrange(3), "loadedMapCacheMissCount": rng.randrange(3)},
        }

    started = datetime.fromtimestamp((START_MS + batch_id * 1_000) / 1000, tz=UTC)
    report = {
        **TEMPLATE,
        "batchId": batch_id,
        "timestamp": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "batchDuration": rng.choice([300, 300, rng.randrange(100_000)]),
        "numInputRows": rng.randrange(20),
        "inputRowsPerSecond": rng.choice([2.5, rng.uniform(0, 50)]),
        "processedRowsPerSecond": rng.uniform(0, 50),
        "stateOperators": [operator(0), operator(1)] if batch_id % 5 else [operator(0)],
    }
    return with_kafka_source([report])[0]


def post_progress(client, token: str, reports: list[dict]) -> None:
    """Send each report to the ingest API, as the listener does."""
    for report in reports:
        response = client.post(
            INGEST_URL,
            json.dumps({"progress": report}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {token}",
        )
        assert response.status_code in (200, 201), response.content
