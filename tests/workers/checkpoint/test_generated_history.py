"""bench/checkpoint_history.py writes checkpoints the library reads like a Spark-written one."""

from __future__ import annotations

from bench.checkpoint_history import read_template, write_batches, write_state_history
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.statesummary import read_checkpoint_state
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.summary import summarize_checkpoint


def test_a_generated_history_with_state_has_no_error_and_the_retained_chain(tmp_path):
    write_batches(tmp_path, range(300), read_template())
    write_state_history(tmp_path, 3, 300, retained=100)
    storage = CheckpointStorage(str(tmp_path))

    summary = summarize_checkpoint(storage)
    findings = check_checkpoint(storage)
    state = read_checkpoint_state(storage)

    assert [f for f in findings if f.severity == "error"] == []
    assert (summary.offset_ids, summary.commit_ids, summary.errors) == (tuple(range(300)), tuple(range(300)), ())
    assert [(p.partition, p.latest_version, p.snapshot_version, p.delta_chain, p.rows_version) for p in state] == [
        (partition, 300, 201, 99, 300) for partition in range(3)
    ]
    assert all(p.rows and p.rows > 0 for p in state)
