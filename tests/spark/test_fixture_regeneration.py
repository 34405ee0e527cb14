"""pipelines/generate_fixtures.py reproduces tests/fixtures, and what Spark reported holds together.

One module-scoped run of the generator (real PySpark, a few minutes) writes a fresh tree into a
temporary directory. The committed tree and the fresh one must hold the same queries and the same
kinds of files (snapshots, compactions, a batch killed before its commit); each spark-report.json
must agree with itself and with the files beside it; and our reader, `workers.checkpoint`, must
read from the fresh checkpoints what Spark read back from them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from expected_summaries import expected_summary
from fixture_paths import OUR_FIXTURES, REPO_DIR, SPARK_TEST_RESOURCES, shared_fixture_checkpoints
from pipelines.generate_fixtures import KILL_BATCH_ID, QUERY_CONF, QUERY_NAMES
from pipelines.spark_report import read_spark_report

pytestmark = pytest.mark.spark

GENERATOR_TIMEOUT_SECONDS = 1200
FILE_SINK_QUERIES = ("windowed_agg_file_sink", "file_source_dedup", "stream_stream_join")
FILE_SOURCE_QUERIES = ("file_source_dedup",)
KILLED = "killed_mid_batch"
HDFS_QUERIES = tuple(name for name in QUERY_NAMES if not name.startswith("rocksdb_"))
ROCKSDB_QUERIES = tuple(name for name in QUERY_NAMES if name.startswith("rocksdb_"))
CHECKPOINT_V2 = "rocksdb_checkpoint_v2_dedup"
# Defaults of the confs that QUERY_CONF changes for single queries (SQLConf, Spark 4.3).
SESSION_DEFAULTS = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
}
INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    """A fresh tree written by the generator (one run for the whole module)."""
    out_dir = tmp_path_factory.mktemp("regenerated-fixtures")
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.generate_fixtures", str(out_dir)],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=GENERATOR_TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out_dir


@pytest.fixture(params=["committed", "regenerated"])
def tree(request) -> Path:
    """The committed tests/fixtures, then the freshly generated tree."""
    if request.param == "committed":
        return OUR_FIXTURES
    return request.getfixturevalue("regenerated")


# --- helpers: file names as Spark writes them --------------------------------------------------

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_KIND_PATTERNS = (
    (re.compile(r"^\.(.+)\.crc$"), lambda m: f".{_file_kind(m.group(1))}.crc"),  # Hadoop checksum
    (re.compile(r"^(.+)\.crc$"), lambda m: f"{_file_kind(m.group(1))}.crc"),  # Spark 4.1+ checksum sidecar
    (re.compile(r"^\d+$"), lambda m: "<N>"),
    (re.compile(r"^\d+\.(compact|delta|snapshot|zip|changelog)$"), lambda m: f"<N>.{m.group(1)}"),
    (re.compile(rf"^\d+_{_UUID}\.(zip|changelog)$"), lambda m: f"<N>_<uuid>.{m.group(1)}"),  # checkpoint v2
    (re.compile(rf"^\d+-{_UUID}\.(sst|log)$"), lambda m: f"<n>-<uuid>.{m.group(1)}"),  # RocksDB SSTs/, logs/
    (re.compile(r"^part-\d+-[0-9a-f-]{36}-c\d+(\..+)$"), lambda m: f"part-*{m.group(1)}"),
)


def _file_kind(name: str) -> str:
    for pattern, kind in _KIND_PATTERNS:
        match = pattern.match(name)
        if match:
            return kind(match)
    return name


def _is_temporary(name: str) -> bool:
    """Spark's in-flight temp files (`.<name>.<uuid>[.TID<n>].tmp`): leftovers depend on timing."""
    return name.endswith(".tmp") or name.endswith(".tmp.crc")


def file_kinds(root: Path) -> set[str]:
    """Every file under `root` as `<dir>/<kind>`: batch ids, uuids and partition numbers masked."""
    return {
        f"{path.parent.relative_to(root).as_posix()}/{_file_kind(path.name)}"
        for path in root.rglob("*")
        if path.is_file() and not _is_temporary(path.name)
    }


def batch_ids(log_dir: Path, suffix: str = "") -> list[int]:
    """The batch ids of the files named `<N><suffix>` in `log_dir`, sorted."""
    pattern = re.compile(rf"^(\d+){re.escape(suffix)}$")
    return sorted(int(m.group(1)) for p in log_dir.iterdir() if (m := pattern.match(p.name)))


_STATE_VERSION_FILE = re.compile(rf"^\d+(_{_UUID})?\.(delta|snapshot|zip|changelog)$")


def state_store_dirs(checkpoint: Path) -> list[Path]:
    """Every directory holding the files of one state store (one per operator, partition, store)."""
    return sorted({path.parent for path in (checkpoint / "state").rglob("*") if _STATE_VERSION_FILE.match(path.name)})


def state_files(store: Path, kind: str) -> list[str]:
    """Names of the `<N>.<kind>` / `<N>_<uuid>.<kind>` files of one state store directory."""
    return sorted(p.name for p in store.iterdir() if _STATE_VERSION_FILE.match(p.name) and p.suffix == f".{kind}")


def load_report(tree: Path, name: str) -> dict:
    return json.loads((tree / name / "spark-report.json").read_text())


def _iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


# --- the fresh tree has the committed shape ----------------------------------------------------


def test_regeneration_writes_the_committed_queries(regenerated):
    # tests/fixtures also holds fixtures of other generators (event_logs/): a query has a report.
    committed = sorted(path.parent.name for path in OUR_FIXTURES.glob("*/spark-report.json"))
    fresh = sorted(path.name for path in regenerated.iterdir() if path.is_dir())
    assert committed == fresh == sorted(QUERY_NAMES)


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_regenerated_files_are_of_the_committed_kinds(regenerated, name):
    assert file_kinds(regenerated / name) == file_kinds(OUR_FIXTURES / name)


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_regeneration_leaves_no_spark_byproducts(regenerated, name):
    byproducts = {"spark-warehouse", "metastore_db", "derby.log"}
    assert [p for p in (regenerated / name).rglob("*") if p.name in byproducts] == []
    fresh, committed = ((tree / name).iterdir() for tree in (regenerated, OUR_FIXTURES))
    assert sorted(p.name for p in fresh) == sorted(p.name for p in committed)


@pytest.mark.parametrize("name", HDFS_QUERIES)
def test_every_hdfs_state_store_has_deltas_and_a_snapshot(tree, name):
    stores = state_store_dirs(tree / name / "checkpoint")
    assert stores, "no state store files"
    assert [store for store in stores if not (state_files(store, "delta") and state_files(store, "snapshot"))] == []


def _conf_of(name: str, key: str) -> str | None:
    return QUERY_CONF.get(name, {}).get(f"spark.sql.streaming.stateStore.{key}")


@pytest.mark.parametrize("name", ROCKSDB_QUERIES)
def test_every_rocksdb_state_store_has_zips_sst_files_and_changelogs_if_enabled(tree, name):
    stores = state_store_dirs(tree / name / "checkpoint")
    has_changelogs = _conf_of(name, "rocksdb.changelogCheckpointing.enabled") == "true"
    assert stores
    for store in stores:
        assert len(state_files(store, "zip")) >= 2, store
        assert (len(state_files(store, "changelog")) >= 2) is has_changelogs, store
        assert list((store / "SSTs").glob("*.sst")), store


@pytest.mark.parametrize("name", ROCKSDB_QUERIES + ("hdfs_zstd_row_checksum",))
def test_state_cleanup_removed_the_first_versions(tree, name):
    # minBatchesToRetain=3 over 12 batches: maintenance deleted the files of versions 1..5.
    for store in state_store_dirs(tree / name / "checkpoint"):
        versions = [
            int(re.match(r"\d+", file.name).group()) for file in store.iterdir() if _STATE_VERSION_FILE.match(file.name)
        ]
        assert min(versions) > 5, store


def test_checkpoint_v2_state_files_carry_the_unique_ids_of_the_commit_log(tree):
    # Spark's maintenance thread deletes old changelogs on its own clock, apart from the purge of
    # the commit log: a commit may outlive its changelog. Every changelog still there must carry
    # the id its commit names, and the latest commit's changelogs are never gone.
    checkpoint = tree / CHECKPOINT_V2 / "checkpoint"
    stores = state_store_dirs(checkpoint)
    changelogs = {store.name: state_files(store, "changelog") for store in stores}
    ids_by_version = {}
    for batch_id in batch_ids(checkpoint / "commits"):
        lines = (checkpoint / "commits" / str(batch_id)).read_text().splitlines()
        assert lines[0] == "v2"
        unique_ids = json.loads(lines[1])["stateUniqueIds"]["0"]
        assert len(unique_ids) == len(stores) == 2
        ids_by_version[batch_id + 1] = [ids[0] for ids in unique_ids]
    for partition, names in changelogs.items():
        for name in names:
            version, unique_id = name.removesuffix(".changelog").split("_", 1)
            if int(version) in ids_by_version:
                assert ids_by_version[int(version)][int(partition)] == unique_id, name
    latest = max(ids_by_version)
    assert [f"{latest}_{ids_by_version[latest][int(p)]}.changelog" in names for p, names in changelogs.items()] == [
        True
    ] * len(stores)


@pytest.mark.parametrize("name", ROCKSDB_QUERIES)
def test_rocksdb_commit_version_and_state_file_names_follow_the_checkpoint_format(tree, name):
    checkpoint = tree / name / "checkpoint"
    commit_versions = {
        (checkpoint / "commits" / str(b)).read_text().split("\n")[0] for b in batch_ids(checkpoint / "commits")
    }
    has_ids = any("_" in file for store in state_store_dirs(checkpoint) for file in state_files(store, "zip"))
    is_format_2 = _conf_of(name, "checkpointFormatVersion") == "2"
    assert (commit_versions, has_ids) == (({"v2"}, True) if is_format_2 else ({"v1"}, False))


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_offset_log_records_the_state_store_conf_of_the_query(tree, name):
    # Per-query confs are set only while the query runs: the next query sees the defaults again.
    # Spark 4.3 does not record changelogCheckpointing nor checkpointFormatVersion in the offsets
    # conf (OffsetSeqMetadata.relevantSQLConfs); format 2 shows as commit log v2 instead.
    expected = {**SESSION_DEFAULTS, **QUERY_CONF.get(name, {})}
    for entry in load_report(tree, name)["offset_log"]:
        assert {key: entry["conf"][key] for key in SESSION_DEFAULTS} == {key: expected[key] for key in SESSION_DEFAULTS}


def test_stream_stream_join_has_the_four_named_stores_per_partition(tree):
    stores = state_store_dirs(tree / "stream_stream_join" / "checkpoint")
    assert sorted({store.name for store in stores}) == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    assert len(stores) == 8


@pytest.mark.parametrize("name", FILE_SINK_QUERIES)
def test_file_sink_log_has_compaction_files(tree, name):
    assert batch_ids(tree / name / "output" / "_spark_metadata", ".compact")


@pytest.mark.parametrize("name", FILE_SOURCE_QUERIES)
def test_file_source_log_has_compaction_files(tree, name):
    assert batch_ids(tree / name / "checkpoint" / "sources" / "0", ".compact")


def test_killed_query_ends_with_an_offsets_entry_without_commit(tree):
    checkpoint = tree / KILLED / "checkpoint"
    assert batch_ids(checkpoint / "offsets")[-1] == KILL_BATCH_ID
    assert KILL_BATCH_ID not in batch_ids(checkpoint / "commits")
    assert batch_ids(checkpoint / "commits")[-1] == KILL_BATCH_ID - 1


def test_killed_batch_had_already_written_its_state(tree):
    # The foreachBatch wrote its output before sleeping, so state version KILL_BATCH_ID + 1 exists
    # although commits/KILL_BATCH_ID does not: state ahead of the commit log.
    for store in state_store_dirs(tree / KILLED / "checkpoint"):
        assert (store / f"{KILL_BATCH_ID + 1}.delta").is_file()


@pytest.mark.parametrize("name", [n for n in QUERY_NAMES if n != KILLED])
def test_other_queries_end_with_a_committed_batch(tree, name):
    checkpoint = tree / name / "checkpoint"
    assert batch_ids(checkpoint / "offsets")[-1] == batch_ids(checkpoint / "commits")[-1]


# --- spark-report.json agrees with itself and with the files -----------------------------------


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_report_ids_match_the_checkpoint(tree, name):
    report = load_report(tree, name)
    checkpoint = tree / name / "checkpoint"
    assert report["spark_version"] == "4.3.0"
    assert report["query_id"] == report["stream_metadata_id"] == json.loads((checkpoint / "metadata").read_text())["id"]
    assert [e["batch_id"] for e in report["offset_log"]] == batch_ids(checkpoint / "offsets")
    assert [e["batch_id"] for e in report["commit_log"]] == batch_ids(checkpoint / "commits")
    assert [e for e in report["offset_log"] + report["commit_log"] if "error" in e] == []


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_report_progress_belongs_to_the_query_and_its_batches(tree, name):
    report = load_report(tree, name)
    progress_ids = [p["batchId"] for p in report["progress"]]
    assert {p["id"] for p in report["progress"]} == {report["query_id"]}
    assert progress_ids == list(range(progress_ids[0], progress_ids[-1] + 1))
    assert set(progress_ids) >= {e["batch_id"] for e in report["commit_log"]}


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_report_progress_agrees_with_the_offset_log(tree, name):
    report = load_report(tree, name)
    progress = {p["batchId"]: p for p in report["progress"]}
    checked = 0
    for entry in report["offset_log"]:
        if entry["batch_id"] not in progress:
            continue
        batch = progress[entry["batch_id"]]
        assert [source["endOffset"] for source in batch["sources"]] == [json.loads(o) for o in entry["offsets"]]
        # A query without a watermark (the streaming limit) reports none; its offset log says 0.
        watermark = batch.get("eventTime", {}).get("watermark")
        assert (_iso_ms(watermark) if watermark else 0) == entry["batch_watermark_ms"]
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_each_commit_announces_the_next_batch_watermark(tree, name):
    report = load_report(tree, name)
    watermarks = {e["batch_id"]: e["batch_watermark_ms"] for e in report["offset_log"]}
    pairs = [
        (c["next_batch_watermark_ms"], watermarks[c["batch_id"] + 1])
        for c in report["commit_log"]
        if c["batch_id"] + 1 in watermarks
    ]
    assert pairs
    assert all(announced == used for announced, used in pairs)


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_offset_log_metadata_is_ordered_and_keeps_the_session_conf(tree, name):
    entries = load_report(tree, name)["offset_log"]
    timestamps = [e["batch_timestamp_ms"] for e in entries]
    assert timestamps == sorted(timestamps)
    assert {e["conf"]["spark.sql.shuffle.partitions"] for e in entries} == {"2"}
    assert {e["version"] for e in entries} == {1}


def test_killed_query_report_has_no_progress_nor_commit_for_the_killed_batch(tree):
    report = load_report(tree, KILLED)
    assert report["offset_log"][-1]["batch_id"] == KILL_BATCH_ID
    assert KILL_BATCH_ID not in {e["batch_id"] for e in report["commit_log"]}
    assert report["progress"][-1]["batchId"] == KILL_BATCH_ID - 1


# --- our reader reads what Spark read ----------------------------------------------------------


def assert_reader_agrees_with_spark(checkpoint: Path, report: dict) -> None:
    from workers.checkpoint.logdir import read_commit, read_offset_seq
    from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
    from workers.checkpoint.summary import summarize_checkpoint

    storage = CheckpointStorage(str(checkpoint))
    summary = summarize_checkpoint(storage).as_json()
    assert {key: summary[key] for key in ("query_id", "uncommitted", "batches", "errors")} == expected_summary(report)
    for entry in report["offset_log"]:
        offset_seq = read_offset_seq(storage, entry["batch_id"])
        assert offset_seq.version == entry["version"]
        assert list(offset_seq.offsets) == entry["offsets"]
        assert (offset_seq.metadata.conf if offset_seq.metadata else {}) == entry["conf"]
    for entry in report["commit_log"]:
        commit = read_commit(storage, entry["batch_id"])
        assert (commit.version, commit.next_batch_watermark_ms) == (entry["version"], entry["next_batch_watermark_ms"])


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_our_reader_reads_what_spark_read_from_the_regenerated_checkpoint(regenerated, name):
    report = load_report(regenerated, name)
    assert report["query_id"] == report["stream_metadata_id"]
    assert_reader_agrees_with_spark(regenerated / name / "checkpoint", report)


@pytest.mark.parametrize("checkpoint", shared_fixture_checkpoints(), ids=lambda path: path.name)
def test_our_reader_reads_what_spark_reads_from_the_old_spark_checkpoints(spark, checkpoint):
    assert_reader_agrees_with_spark(checkpoint, read_spark_report(spark, str(checkpoint)))


def test_spark_reports_the_hole_in_the_inconsistent_checkpoint(spark):
    report = read_spark_report(spark, str(INCONSISTENT))
    assert report["stream_metadata_id"] == "d4358946-170c-49a7-823b-d8e4e9126616"
    assert [e["batch_id"] for e in report["offset_log"]] == [0, 1, 2, 4]
    assert [e["batch_id"] for e in report["commit_log"]] == [0, 1, 2]
    assert [e["offsets"] for e in report["offset_log"]] == [["0"], ["1"], ["2"], ["4"]]
