"""What the Runtime charts must draw, built from Spark's own progress events (the StreamingQueryProgress
JSON of ``query.recentProgress`` or of a listener), the way Spark's UI reads them
(StreamingQueryStatisticsPage): one point per batch at its ``timestamp``.

    assert_drawn_as_reported(figures, progress)   # figures: the JSON of the runtime-charts endpoint
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import pytest

NO_WATERMARK = "1970-01-01T00:00:00.000Z"


@dataclass(frozen=True)
class Line:
    """The points of one trace: batch start (epoch ms), value, batch id."""

    x: tuple[int, ...]
    y: tuple[float, ...]
    batches: tuple[int, ...]


def epoch_ms(text: str) -> int:
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _line(progress: list[dict], value) -> Line:
    points = [(epoch_ms(p["timestamp"]), v, p["batchId"]) for p in progress if (v := value(p)) is not None]
    return Line(tuple(x for x, _, _ in points), tuple(y for _, y, _ in points), tuple(b for _, _, b in points))


def _rate(progress: dict, key: str) -> float | None:
    value = progress.get(key)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _gap_seconds(progress: dict) -> float | None:
    watermark = progress.get("eventTime", {}).get("watermark")
    if watermark is None or watermark == NO_WATERMARK:
        return None
    return (epoch_ms(progress["timestamp"]) - epoch_ms(watermark)) / 1000


def _hit_ratio(operator: dict) -> float | None:
    metrics = operator.get("customMetrics", {})
    hits, misses = metrics.get("loadedMapCacheHitCount"), metrics.get("loadedMapCacheMissCount")
    return None if hits is None or misses is None or hits + misses == 0 else hits / (hits + misses)


def expected_runtime_series(progress: list[dict]) -> dict[str, dict[str, Line]]:
    """Every Runtime chart's traces as Spark reported the batches (durations in ms: short batches)."""
    phases = sorted({phase for p in progress for phase in p["durationMs"]} - {"triggerExecution"})
    series = {
        "rates": {
            "input rate": _line(progress, lambda p: _rate(p, "inputRowsPerSecond")),
            "process rate": _line(progress, lambda p: _rate(p, "processedRowsPerSecond")),
        },
        "input-rows": {"input rows": _line(progress, lambda p: p["numInputRows"])},
        "batch-duration": {"batch duration": _line(progress, lambda p: p["batchDuration"])},
        "phases": {phase: _line(progress, lambda p, phase=phase: p["durationMs"].get(phase, 0)) for phase in phases},
        "watermark-gap": {"watermark gap": _line(progress, _gap_seconds)},
        "behind-head": _expected_lag_series(progress),
    }
    operators = len(progress[-1]["stateOperators"])
    if operators:
        series.update(_expected_state_series(progress, operators))
    return series


def _expected_lag_series(progress: list[dict]) -> dict[str, Line]:
    """No line: the sources of the recorded runs (rate, rate-per-micro-batch, file) report no head."""
    heads = [source["latestOffset"] for p in progress for source in p["sources"] if source.get("latestOffset")]
    assert heads == [], "a recorded source reported its latestOffset: expect its lag here"
    return {}


def _expected_state_series(progress: list[dict], operators: int) -> dict[str, dict[str, Line]]:
    series = {"state-rows": {}, "state-changes": {}, "state-memory": {}, "state-cache": {}}
    for index in range(operators):
        label = f"{index}: {progress[-1]['stateOperators'][index]['operatorName']}"

        def figure(key, index=index):
            return lambda p: p["stateOperators"][index][key] if len(p["stateOperators"]) > index else None

        series["state-rows"][label] = _line(progress, figure("numRowsTotal"))
        series["state-memory"][label] = _line(progress, figure("memoryUsedBytes"))
        series["state-cache"][label] = _line(
            progress,
            lambda p, index=index: _hit_ratio(p["stateOperators"][index]) if len(p["stateOperators"]) > index else None,
        )
        for change, key in (
            ("updated", "numRowsUpdated"),
            ("removed", "numRowsRemoved"),
            ("dropped by watermark", "numRowsDroppedByWatermark"),
        ):
            series["state-changes"][change if operators == 1 else f"{label} {change}"] = _line(progress, figure(key))
    return series


def drawn_runtime_series(figures: dict) -> dict[str, dict[str, Line]]:
    """The data traces of the Runtime endpoint's figures (marks left out), durations in ms.

    A chart drawn as a sentence (no data of its kind) has no traces.
    """
    return {
        part: {
            trace["name"]: Line(tuple(trace["x"]), _in_ms(figure, part, trace["y"]), tuple(trace["customdata"]))
            for trace in figure["data"]
            if trace.get("yaxis") != "y2"
        }
        for part, figure in figures.items()
    }


UNIT_MS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
UNIT_BYTES = {"B": 1, "KB": 1_024, "MB": 1_024**2, "GB": 1_024**3, "TB": 1_024**4}


def _in_ms(figure: dict, part: str, values: list) -> tuple:
    """Durations back in milliseconds, the watermark gap in seconds and sizes in bytes, whatever unit
    the axis chose."""
    if part in ("batch-duration", "phases"):
        return tuple(round(value * UNIT_MS[figure["layout"]["yaxis"]["title"]["text"]]) for value in values)
    if part == "watermark-gap":
        return tuple(value * UNIT_MS[figure["layout"]["yaxis"]["title"]["text"]] / 1000 for value in values)
    if part == "state-memory":
        return tuple(round(value * UNIT_BYTES[figure["layout"]["yaxis"]["title"]["text"]]) for value in values)
    return tuple(values)


def assert_drawn_as_reported(figures: dict, progress: list[dict]) -> None:
    """Every chart draws, for every batch, what Spark reported; rates within Spark 4's JSON rounding
    (one decimal), since an event log carries them unrounded."""
    drawn = drawn_runtime_series(figures)
    expected = {
        part: {name: line for name, line in lines.items() if line.x}
        for part, lines in expected_runtime_series(progress).items()
    }
    assert drawn.keys() == expected.keys()
    for part, lines in expected.items():
        assert drawn[part].keys() == lines.keys(), part
        for name, line in lines.items():
            got = drawn[part][name]
            assert (got.x, got.batches) == (line.x, line.batches), (part, name)
            assert got.y == pytest.approx(line.y, rel=1e-9, abs=0.051 if part == "rates" else 1e-9), (part, name)


def marks_of(figure: dict) -> dict[str, list[tuple[int, str, object]]]:
    """The marks drawn on a figure: {legend name: [(epoch ms, hover text, click target), ...]}."""
    return {
        trace["name"]: list(zip(trace["x"], trace["hovertext"], trace["customdata"], strict=True))
        for trace in figure["data"]
        if trace.get("yaxis") == "y2"
    }
