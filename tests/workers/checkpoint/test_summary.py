from __future__ import annotations

import json

from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.summary import summarize_checkpoint

INCONSISTENT = "checkpoint-test-offsetId-commitId-inconsistent"


def test_inconsistent_checkpoint_summary_shows_the_hole_and_the_uncommitted_batch(spark_resources):
    summary = summarize_checkpoint(CheckpointStorage(str(spark_resources / INCONSISTENT)))
    assert summary.as_json() == {
        "query_id": "d4358946-170c-49a7-823b-d8e4e9126616",
        "offsets": {"first": 0, "latest": 4, "count": 4},
        "commits": {"first": 0, "latest": 2, "count": 3},
        "uncommitted": [4],
        "batches": [
            {"batch_id": 0, "timestamp_ms": 1531292029003, "watermark_ms": 0, "committed": True, "sources": [0]},
            {"batch_id": 1, "timestamp_ms": 1531292030005, "watermark_ms": 5000, "committed": True, "sources": [1]},
            {"batch_id": 2, "timestamp_ms": 1531292030005, "watermark_ms": 5000, "committed": True, "sources": [2]},
            {"batch_id": 4, "timestamp_ms": 1531292030005, "watermark_ms": 5000, "committed": False, "sources": [4]},
        ],
        "metadata_logs": [],
        "errors": [],
    }


def test_summary_reads_each_metadata_log_file_once(spark_resources):
    storage = CheckpointStorage(str(spark_resources / INCONSISTENT))
    summarize_checkpoint(storage)
    # metadata (45 bytes) + offsets 0, 1, 2, 4 (229 + 3 * 232) + commits 0-2 (3 * 29).
    assert storage.calls.as_dict() == {
        "list": 2,
        "info": 0,
        "read": 8,
        "bytes_read": 1057,
        "write": 0,
        "bytes_written": 0,
        "delete": 0,
    }


def test_checkpoint_from_before_the_commit_log_has_every_batch_uncommitted(spark_resources):
    document = summarize_checkpoint(CheckpointStorage(str(spark_resources / "checkpoint-version-2.1.0"))).as_json()
    assert document["query_id"] == "dddc5e7f-1e71-454c-8362-de184444fb5a"
    assert document["commits"] == {"first": None, "latest": None, "count": 0}
    assert document["uncommitted"] == [0, 1]
    assert [batch["sources"] for batch in document["batches"]] == [[0], [2]]
    assert document["errors"] == []


def test_join_checkpoint_batch_has_one_offset_per_source(spark_resources):
    document = summarize_checkpoint(
        CheckpointStorage(str(spark_resources / "checkpoint-version-2.4.0-streaming-join"))
    ).as_json()
    assert document["batches"] == [
        {"batch_id": 0, "timestamp_ms": 1548845804202, "watermark_ms": 0, "committed": True, "sources": [0, 0]}
    ]


def test_corrupt_offsets_file_is_an_error_and_other_batches_remain(checkpoint_copy):
    root = checkpoint_copy(INCONSISTENT)
    (root / "offsets" / "2").write_bytes(b'v1\n{"batchWatermarkMs":5000,\n2')
    document = summarize_checkpoint(CheckpointStorage(str(root))).as_json()
    assert [batch["batch_id"] for batch in document["batches"]] == [0, 1, 4]
    assert document["offsets"] == {"first": 0, "latest": 4, "count": 4}
    assert document["uncommitted"] == [4]
    assert document["errors"] == [
        {
            "path": "offsets/2",
            "error": "offsets/2: line 2 (metadata): invalid JSON: "
            "Expecting property name enclosed in double quotes (at byte 28)",
        }
    ]


def test_corrupt_commit_file_is_an_error_but_the_batch_stays_committed(checkpoint_copy):
    root = checkpoint_copy(INCONSISTENT)
    (root / "commits" / "1").write_bytes(b"")
    document = summarize_checkpoint(CheckpointStorage(str(root))).as_json()
    assert [batch["committed"] for batch in document["batches"]] == [True, True, True, False]
    assert document["errors"] == [{"path": "commits/1", "error": "commits/1: Incomplete log file: the file is empty"}]


def test_missing_metadata_file_gives_no_query_id_and_no_error(checkpoint_copy):
    root = checkpoint_copy(INCONSISTENT)
    (root / "metadata").unlink()
    document = summarize_checkpoint(CheckpointStorage(str(root))).as_json()
    assert (document["query_id"], document["errors"]) == (None, [])


def test_corrupt_metadata_file_gives_no_query_id_and_an_error(checkpoint_copy):
    root = checkpoint_copy(INCONSISTENT)
    (root / "metadata").write_bytes(b'{"id":')
    document = summarize_checkpoint(CheckpointStorage(str(root))).as_json()
    assert document["query_id"] is None
    assert document["errors"] == [
        {"path": "metadata", "error": "metadata: metadata: invalid JSON: Expecting value (at byte 6)"}
    ]
    assert len(document["batches"]) == 4


def test_empty_checkpoint_has_an_empty_summary(tmp_path):
    assert summarize_checkpoint(CheckpointStorage(str(tmp_path / "never-started"))).as_json() == {
        "query_id": None,
        "offsets": {"first": None, "latest": None, "count": 0},
        "commits": {"first": None, "latest": None, "count": 0},
        "uncommitted": [],
        "batches": [],
        "metadata_logs": [],
        "errors": [],
    }


def test_sources_are_json_values_raw_strings_or_null(memory_fs):
    memory_fs.pipe("/ckpt/offsets/0", b'v1\n\n{"logOffset":3}\n-\nnot json\n"quoted"')
    document = summarize_checkpoint(CheckpointStorage("memory://ckpt")).as_json()
    assert document["batches"] == [
        {
            "batch_id": 0,
            "timestamp_ms": None,
            "watermark_ms": None,
            "committed": False,
            "sources": [{"logOffset": 3}, None, "not json", "quoted"],
        }
    ]


def test_version_2_offsets_are_summarised_in_file_order(memory_fs):
    memory_fs.pipe("/ckpt/offsets/3", b'v2\n{"batchTimestampMs":1700000000000}\nb:7\na:-')
    memory_fs.pipe("/ckpt/commits/3", b'v2\n{"nextBatchWatermarkMs":0}')
    batch = summarize_checkpoint(CheckpointStorage("memory://ckpt")).as_json()["batches"][0]
    assert batch == {
        "batch_id": 3,
        "timestamp_ms": 1700000000000,
        "watermark_ms": 0,
        "committed": True,
        "sources": [7, None],
    }


def test_summary_document_survives_a_json_round_trip(spark_resources, fixture_checkpoint):
    document = summarize_checkpoint(CheckpointStorage(str(spark_resources / fixture_checkpoint))).as_json()
    assert json.loads(json.dumps(document)) == document
    assert document["errors"] == []
