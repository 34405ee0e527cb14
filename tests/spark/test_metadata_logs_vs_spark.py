"""The compactible-log summaries of `inspect_checkpoint` equal what Spark's own classes make of the logs.

For every file source log (`sources/<i>`) and file sink log (`_spark_metadata`) among the PySpark
fixtures and Spark's old-version fixtures: the derived compact interval, the latest batch, which
batches are compactions and the number of live entries come from Spark's FileStreamSinkLog /
FileStreamSourceLog over py4j (pipelines/spark_metadata_logs.py). For the sinks, the files Spark's
reader of the output directory picks (through the same log) are counted too.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from pipelines.spark_metadata_logs import read_spark_metadata_log
from workers.checkpoint.metadatalog import read_metadata_log
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.summary import summarize_checkpoint

pytestmark = pytest.mark.spark

SHARED_LOGS = [
    (SPARK_TEST_RESOURCES / "file-sink-log-version-2.1.0", "sink"),
    (SPARK_TEST_RESOURCES / "file-source-log-version-2.1.0", "source"),
]


def _our_logs() -> list[tuple[Path, str]]:
    sinks = [(path, "sink") for path in OUR_FIXTURES.glob("*/output/_spark_metadata")]
    sources = [(path, "source") for path in OUR_FIXTURES.glob("*/checkpoint/sources/*") if path.is_dir()]
    return sorted(sinks + sources)


LOGS = _our_logs() + SHARED_LOGS


def _summary_of(log_dir: Path, kind: str) -> dict:
    """What `summarize_checkpoint` says about a fixture's log (read directly for Spark's bare logs)."""
    if log_dir.name == "_spark_metadata":
        summary = summarize_checkpoint(CheckpointStorage(str(log_dir.parent)), sink_log=CheckpointStorage(str(log_dir)))
        [entry] = [log for log in summary.as_json()["metadata_logs"] if log["kind"] == "sink"]
        return entry
    if log_dir.parent.name == "sources":
        summary = summarize_checkpoint(CheckpointStorage(str(log_dir.parent.parent)))
        [entry] = [log for log in summary.as_json()["metadata_logs"] if log["path"] == f"sources/{log_dir.name}"]
        return entry
    return read_metadata_log(CheckpointStorage(str(log_dir.parent)), log_dir.name, kind=kind).as_json()


def test_the_fixtures_hold_source_and_sink_logs_with_compactions():
    kinds = {kind for _, kind in _our_logs()}
    assert kinds == {"sink", "source"}


@pytest.mark.parametrize(("log_dir", "kind"), LOGS, ids=lambda value: str(value).split("fixtures/")[-1])
def test_log_summary_equals_what_spark_reads(spark, log_dir, kind):
    ours = _summary_of(log_dir, kind)
    theirs = read_spark_metadata_log(spark, str(log_dir), kind)

    assert {key: ours[key] for key in theirs} == theirs
    assert ours["compact_batches"], "every fixture log has been compacted at least once"


def _relocated_output(output: Path, target: Path) -> Path:
    """Copy a sink's output to ``target``, pointing its log's absolute file paths at the copy.

    The sink log names each data file by its absolute URL as written when the fixture was
    generated; Spark's reader of the output finds files through those URLs only.
    """
    shutil.copytree(output, target)
    written_at = re.compile(rb'"path":"file:[^"]*/output/')
    for log_file in (target / "_spark_metadata").iterdir():
        if not log_file.name.startswith("."):
            log_file.write_bytes(written_at.sub(b'"path":"' + target.as_uri().encode() + b"/", log_file.read_bytes()))
    return target


@pytest.mark.parametrize(
    "output", sorted(p.parent for p in OUR_FIXTURES.glob("*/output/_spark_metadata")), ids=lambda p: p.parent.name
)
def test_sink_live_entries_equal_the_files_spark_reads_from_the_output(spark, output, tmp_path):
    copy = _relocated_output(output, tmp_path / "output")
    ours = _summary_of(copy / "_spark_metadata", "sink")
    files = spark.read.format("json").load(str(copy)).inputFiles()

    assert ours["live_entries"] == len(files)
    assert all(path.startswith(copy.as_uri()) for path in files)
