"""pipelines/generate_event_log_fixture.py reproduces tests/fixtures/event_logs, and tailing works live.

One module-scoped run of the generator (real PySpark, three short applications: the committed
rolling zstd and plain runs plus an LZ4 single-file run) writes into a temporary directory while
this process tails the logs every half second with workers.checkpoint.eventlog, as a worker would.
The fresh logs must have the committed shape, the reports the same deterministic values, and the
tails must have seen every reported batch exactly once, some of them while Spark was still
writing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, REPO_DIR
from pipelines.generate_event_log_fixture import EXTRA_RUN_NAMES, RUN_NAMES
from workers.checkpoint.errors import MissingFileError
from workers.checkpoint.eventlog import EventLogPosition, find_event_logs, tail_event_log
from workers.checkpoint.progress import QueryProgressEvent, StreamingQueryProgress, progress_from_dict
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

COMMITTED = OUR_FIXTURES / "event_logs"
ALL_RUNS = RUN_NAMES + EXTRA_RUN_NAMES
GENERATOR_TIMEOUT_SECONDS = 900
TAIL_INTERVAL_SECONDS = 0.5


@dataclass
class LiveTail:
    """What tailing a run's log directory while Spark wrote it produced."""

    events: list = field(default_factory=list)
    positions: dict[str, EventLogPosition] = field(default_factory=dict)
    progress_seen_in_progress: int = 0

    def poll(self, directory: Path) -> None:
        storage = CheckpointStorage(str(directory))
        for log in find_event_logs(storage):
            try:
                tail = tail_event_log(storage, log, self.positions.get(log.name))
            except MissingFileError:
                continue  # `.inprogress` renamed between the listing and the read: next time
            self.positions[log.name] = tail.position
            self.events += tail.events
            if log.is_in_progress:
                self.progress_seen_in_progress += sum(isinstance(e, QueryProgressEvent) for e in tail.events)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> tuple[Path, dict[str, LiveTail]]:
    """A fresh tree written by the generator, and the live tails of each run's logs."""
    out_dir = tmp_path_factory.mktemp("regenerated-event-logs")
    only = [argument for name in ALL_RUNS for argument in ("--only", name)]
    command = [sys.executable, "-m", "pipelines.generate_event_log_fixture", str(out_dir), *only]
    tails = {name: LiveTail() for name in ALL_RUNS}
    with subprocess.Popen(command, cwd=REPO_DIR, stderr=subprocess.PIPE, text=True) as generator:
        try:
            deadline = time.monotonic() + GENERATOR_TIMEOUT_SECONDS
            while generator.poll() is None and time.monotonic() < deadline:
                _poll_all(out_dir, tails)
                time.sleep(TAIL_INTERVAL_SECONDS)
        finally:
            timed_out = generator.poll() is None
            if timed_out:
                generator.kill()
        stderr = generator.stderr.read()
    assert not timed_out, (
        f"the event log generator ran past {GENERATOR_TIMEOUT_SECONDS} s and was killed:\n{stderr[-4000:]}"
    )
    assert generator.returncode == 0, stderr[-4000:]
    _poll_all(out_dir, tails)  # what was written after the last poll
    return out_dir, tails


def _poll_all(out_dir: Path, tails: dict[str, LiveTail]) -> None:
    for name, tail in tails.items():
        if (out_dir / name).is_dir():
            tail.poll(out_dir / name)


def _report(tree: Path, name: str) -> dict:
    return json.loads((tree / f"{name}-report.json").read_text())


def _file_kinds(tree: Path, name: str) -> set[str]:
    """Every file of a run's log directory, with the application id masked."""
    app_id = _report(tree, name)["app_id"]
    return {
        re.sub(re.escape(app_id), "<appId>", path.relative_to(tree / name).as_posix())
        for path in (tree / name).rglob("*")
        if path.is_file()
    }


def _deterministic(progress: StreamingQueryProgress | dict) -> dict:
    """The values of a progress that the rate source fixes, whatever the machine's speed."""
    if isinstance(progress, dict):
        progress = progress_from_dict(progress, source="report")
    return {
        "batch_id": progress.batch_id,
        "num_input_rows": progress.num_input_rows,
        "event_time": progress.event_time,
        "offsets": [(s.start_offset, s.end_offset) for s in progress.sources],
        "sink_rows": progress.sink.num_output_rows,
        "state_rows": [(o.num_rows_total, o.num_rows_updated, o.num_rows_removed) for o in progress.state_operators],
    }


@pytest.mark.parametrize("name", RUN_NAMES)
def test_regenerated_logs_have_the_committed_files(regenerated, name):
    tree, _ = regenerated
    assert _file_kinds(tree, name) == _file_kinds(COMMITTED, name)


@pytest.mark.parametrize("name", RUN_NAMES)
def test_regenerated_reports_hold_the_committed_batches(regenerated, name):
    tree, _ = regenerated
    fresh, committed = _report(tree, name), _report(COMMITTED, name)
    assert fresh.keys() == committed.keys()
    assert (fresh["spark_version"], fresh["event_log_conf"]) == (
        committed["spark_version"],
        committed["event_log_conf"],
    )
    # The generator stops as soon as the last wanted batch is reported; a loaded machine may
    # still finish one more. The batches both runs have must agree.
    assert len(committed["progress"]) <= len(fresh["progress"]) <= len(committed["progress"]) + 1
    assert [_deterministic(p) for p in fresh["progress"][: len(committed["progress"])]] == [
        _deterministic(p) for p in committed["progress"]
    ]


@pytest.mark.parametrize("name", ALL_RUNS)
def test_tailing_while_spark_wrote_saw_every_reported_batch_once(regenerated, name):
    tree, tails = regenerated
    seen = [event.progress for event in tails[name].events if isinstance(event, QueryProgressEvent)]
    reported = _report(tree, name)["progress"]
    assert [p.batch_id for p in seen] == [p["batchId"] for p in reported]
    assert [_deterministic(p) for p in seen] == [_deterministic(p) for p in reported]


@pytest.mark.parametrize("name", ALL_RUNS)
def test_some_progress_was_read_from_a_log_still_being_written(regenerated, name):
    _, tails = regenerated
    assert tails[name].progress_seen_in_progress > 0


def test_the_lz4_run_wrote_one_lz4_file(regenerated):
    tree, _ = regenerated
    [log] = find_event_logs(CheckpointStorage(str(tree / "single_lz4")))
    assert [file.codec for file in log.files] == ["lz4"] and not log.is_in_progress
