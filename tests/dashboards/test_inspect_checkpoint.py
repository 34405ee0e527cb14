"""`manage.py inspect_checkpoint`: agrees with what Spark reported, and needs no database."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from expected_summaries import expected_summary
from fixture_paths import OUR_FIXTURES, REPO_DIR, SPARK_TEST_RESOURCES, our_fixture_checkpoints

INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"


def inspect(url: Path | str) -> dict:
    out = StringIO()
    call_command("inspect_checkpoint", str(url), "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("checkpoint", our_fixture_checkpoints(), ids=lambda p: p.parent.name)
def test_summary_of_each_pyspark_fixture_equals_what_spark_read_back(checkpoint: Path):
    report = json.loads((checkpoint.parent / "spark-report.json").read_text())
    summary = inspect(checkpoint)

    assert {key: summary[key] for key in ("query_id", "uncommitted", "batches", "errors")} == expected_summary(report)
    assert summary["query_id"] == report["query_id"]


def test_the_fixtures_include_a_batch_killed_before_its_commit():
    assert our_fixture_checkpoints(), f"no PySpark fixtures under {OUR_FIXTURES}: run make fixtures"
    assert any(inspect(checkpoint)["uncommitted"] for checkpoint in our_fixture_checkpoints())


def test_summary_of_the_inconsistent_spark_fixture():
    summary = inspect(INCONSISTENT)
    assert summary["offsets"] == {"first": 0, "latest": 4, "count": 4}
    assert summary["commits"] == {"first": 0, "latest": 2, "count": 3}
    assert summary["uncommitted"] == [4]
    assert [b["sources"] for b in summary["batches"]] == [[0], [1], [2], [4]]


def test_the_command_touches_no_database():
    # A database URL nothing listens on: any query would fail the command.
    env = {"CKPTWEB_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "manage.py", "inspect_checkpoint", str(INCONSISTENT), "--json"],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["query_id"] == "d4358946-170c-49a7-823b-d8e4e9126616"


def test_an_unreadable_file_is_listed_with_its_reason_and_the_rest_summarised(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    (directory / "offsets" / "1").write_bytes(b"v7\nwhatever")
    summary = inspect(directory)
    assert [b["batch_id"] for b in summary["batches"]] == [0, 2, 4]
    assert summary["errors"] == [{"path": "offsets/1", "error": summary["errors"][0]["error"]}]
    assert "offsets/1" in summary["errors"][0]["error"] and "v7" in summary["errors"][0]["error"]


def test_the_shared_spark_fixtures_are_beside_the_repository():
    # Tests parametrized over them would silently run on nothing without this.
    assert SPARK_TEST_RESOURCES.is_dir(), f"{SPARK_TEST_RESOURCES} is missing: clone the repo beside shared/"


SINK_FIXTURE = OUR_FIXTURES / "file_source_dedup"


def test_the_file_source_log_is_summarised_and_the_sink_log_only_when_asked():
    without_sink = inspect(SINK_FIXTURE / "checkpoint")
    assert [(log["kind"], log["path"]) for log in without_sink["metadata_logs"]] == [("source", "sources/0")]

    with_sink = _inspect_args(SINK_FIXTURE / "checkpoint", "--sink-log", SINK_FIXTURE / "output")
    sink = with_sink["metadata_logs"][1]
    assert sink["kind"] == "sink"
    assert sink["path"] == (SINK_FIXTURE / "output" / "_spark_metadata").as_uri()
    assert set(sink) == {
        "path",
        "kind",
        "version",
        "compact_interval",
        "latest_batch",
        "compact_batches",
        "live_entries",
        "latest_compact_bytes",
    }


def test_the_sink_log_may_be_given_as_the_log_directory_itself():
    by_output = _inspect_args(SINK_FIXTURE / "checkpoint", "--sink-log", SINK_FIXTURE / "output")
    by_log = _inspect_args(SINK_FIXTURE / "checkpoint", "--sink-log", SINK_FIXTURE / "output" / "_spark_metadata")
    assert by_output["metadata_logs"] == by_log["metadata_logs"]


def test_a_sink_log_without_batch_files_is_reported_as_an_error(tmp_path):
    (tmp_path / "_spark_metadata").mkdir()
    summary = _inspect_args(SINK_FIXTURE / "checkpoint", "--sink-log", tmp_path)
    assert summary["errors"] == [
        {
            "path": f"{tmp_path.as_uri()}/_spark_metadata",
            "error": f"{tmp_path.as_uri()}/_spark_metadata: no file sink log batch files here",
        }
    ]


def _bad_paths(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each bad argument: the command's arguments and the message it must exit with."""
    (tmp_path / "file").write_bytes(b"v1\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_bytes(b"x")
    checkpoint = str(SINK_FIXTURE / "checkpoint")
    missing, file, folder = (tmp_path / name for name in ("missing", "file", "folder"))
    return {
        "missing": ([str(missing)], f"{missing.as_uri()}: no such file or folder"),
        "file": ([str(file)], f"{file.as_uri()}: this is a file, not a checkpoint folder"),
        "no checkpoint": (
            [str(folder)],
            f"{folder.as_uri()}: no metadata file and no offsets/, commits/ or state/ folder: not a Spark checkpoint",
        ),
        "sink output given as checkpoint": (
            [str(SINK_FIXTURE / "output")],
            f"{(SINK_FIXTURE / 'output').as_uri()}: this is a file sink's output",
        ),
        "sink log missing": ([checkpoint, "--sink-log", str(missing)], f"{missing.as_uri()}: no such folder"),
        "sink log a file": ([checkpoint, "--sink-log", str(file)], f"{file.as_uri()}: this is a file"),
        "sink log absent": (
            [checkpoint, "--sink-log", str(folder)],
            f"{folder.as_uri()}: no _spark_metadata folder here",
        ),
    }


BAD_PATH_CASES = (
    "missing",
    "file",
    "no checkpoint",
    "sink output given as checkpoint",
    "sink log missing",
    "sink log a file",
    "sink log absent",
)


@pytest.mark.parametrize("case", BAD_PATH_CASES)
def test_a_path_holding_no_checkpoint_exits_with_status_1_naming_it(tmp_path, case):
    args, message = _bad_paths(tmp_path)[case]
    result = subprocess.run(
        [sys.executable, "manage.py", "inspect_checkpoint", *args],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert f"CommandError: {message}" in result.stderr
    assert result.stdout == ""


def test_a_query_that_ran_no_batch_is_summarised_with_a_warning(tmp_path):
    (tmp_path / "metadata").write_bytes(b'{"id":"7f2f8253-89e7-4971-8c29-64755cc9983d"}')
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    out, err = StringIO(), StringIO()
    call_command("inspect_checkpoint", str(tmp_path), "--json", stdout=out, stderr=err)
    assert json.loads(out.getvalue())["query_id"] == "7f2f8253-89e7-4971-8c29-64755cc9983d"
    assert err.getvalue() == (
        f"warning: {tmp_path.as_uri()}: the query has not run a batch yet (no offsets/<N> file); "
        "its batches appear once Spark writes them\n"
    )


def test_the_text_output_names_each_metadata_log():
    out = StringIO()
    call_command("inspect_checkpoint", str(SINK_FIXTURE / "checkpoint"), stdout=out)
    assert "source log:  sources/0: latest batch 7, interval 3, compactions [2, 5]" in out.getvalue()


def _inspect_args(*args) -> dict:
    out = StringIO()
    call_command("inspect_checkpoint", *map(str, args), "--json", stdout=out)
    return json.loads(out.getvalue())


def test_integrity_findings_are_returned_with_severity_file_and_restart_impact():
    findings = inspect(INCONSISTENT)["findings"]
    gap = next(finding for finding in findings if finding["code"] == "offsets-gap")
    assert (gap["severity"], gap["path"]) == ("error", "offsets/3")
    assert gap["restart_impact"]
    assert set(gap) == {"severity", "code", "path", "message", "restart_impact"}


def _rows_spark_reported(report: dict) -> list[int]:
    """numRowsTotal per stateful operator in the progress of the newest committed batch."""
    committed = max(entry["batch_id"] for entry in report["commit_log"])
    progress = next(p for p in report["progress"] if p["batchId"] == committed)
    return [operator["numRowsTotal"] for operator in progress["stateOperators"]]


# One store per operator, so Spark's per-operator numRowsTotal is that store's row count (a
# stream-stream join reports one figure for its four stores).
SINGLE_STORE_FIXTURES = [
    path for path in our_fixture_checkpoints() if path.parent.name not in ("stream_stream_join", "rocksdb_stream_join")
]


@pytest.mark.parametrize("checkpoint", SINGLE_STORE_FIXTURES, ids=lambda p: p.parent.name)
def test_state_rows_at_the_restart_version_equal_what_spark_reported(checkpoint: Path):
    report = json.loads((checkpoint.parent / "spark-report.json").read_text())
    state = inspect(checkpoint)["state"]
    assert [store["rows"] for store in state] == _rows_spark_reported(report)
    assert {store["provider"] for store in state} <= {"hdfs", "rocksdb"}


def test_state_of_a_join_lists_each_of_its_four_stores():
    state = inspect(OUR_FIXTURES / "stream_stream_join" / "checkpoint")["state"]
    assert [store["store"] for store in state] == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    assert all(store["partitions"] == 2 and store["bytes_on_disk"] > 0 for store in state)


def test_rocksdb_join_rows_of_its_value_stores_add_up_to_what_spark_reported():
    checkpoint = OUR_FIXTURES / "rocksdb_stream_join" / "checkpoint"
    report = json.loads((checkpoint.parent / "spark-report.json").read_text())
    state = inspect(checkpoint)["state"]
    # numRowsTotal of a join counts the stored input rows: the two keyWithIndexToValue stores.
    values = [store["rows"] for store in state if store["store"].endswith("keyWithIndexToValue")]
    assert [sum(values)] == _rows_spark_reported(report)
    assert {store["provider"] for store in state} == {"rocksdb"}


def test_the_configured_compact_interval_applies_until_a_log_has_a_compaction(tmp_path):
    from factories import write_sink_log

    write_sink_log(tmp_path / "sink" / "_spark_metadata", range(2))

    default = _inspect_args(INCONSISTENT, "--sink-log", tmp_path / "sink")["metadata_logs"][0]
    configured = _inspect_args(INCONSISTENT, "--sink-log", tmp_path / "sink", "--compact-interval", "5")[
        "metadata_logs"
    ][0]

    assert (default["compact_interval"], configured["compact_interval"]) == (10, 5)


@pytest.mark.parametrize("variant", ["unsaferow", "avro_format2"])
def test_a_transform_with_state_store_lists_its_variables_at_the_committed_version(variant):
    # pipelines/tws_queries.py: 4 batches (version 4), 3 keys, 28 values appended to the lists.
    (store,) = inspect(OUR_FIXTURES / "tws" / variant / "checkpoint")["state"]
    variables = {v["name"]: v for v in store["variables"]}

    assert {name: (v["kind"], v["rows"]) for name, v in variables.items() if not v["internal"]} == {
        "count": ("ValueState", 3),
        "recent": ("ListState", 3),
        "by_parity": ("MapState", 6),
        "last_seen": ("ValueState", 3),
    }
    assert variables["recent"]["values"] == 28
    assert {tuple(v["versions"]) for v in variables.values()} == {(4,)}
    assert variables["$procTimers_keyToTimestamp"]["internal"] and variables["count"]["bytes"] > 0
