"""What the plans say, on every PySpark-written fixture: no impossible figure, and advice that holds.

A plan once read "nothing to purge: the oldest batch is 8 and the threshold is -13". Each action
is planned here on every Spark-written fixture checkpoint with Spark's defaults and with the smallest values a
request may carry, and every text of the plan (summary, notes, preconditions, reasons) is checked:
no negative batch, version or threshold, no range that runs backwards. A "nothing to do" summary
names the value that would change it; planning again with that value must then do something.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from factories import long_stateless_history
from fixture_paths import OUR_FIXTURES, our_fixture_checkpoints, shared_fixture_checkpoints
from workers.checkpoint.maintenance.cleanup import plan_cleanup
from workers.checkpoint.maintenance.compaction import plan_compaction
from workers.checkpoint.maintenance.plan import MaintenancePlan
from workers.checkpoint.maintenance.purge import plan_purge
from workers.checkpoint.maintenance.snapshot import plan_snapshot
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

# Ours (PySpark 4.x) and Spark's own test resources (2.1 to 3.2: one batch only, a hole in the offsets).
CHECKPOINTS = our_fixture_checkpoints() + shared_fixture_checkpoints()


def _name(checkpoint: Path) -> str:
    return checkpoint.parent.name if checkpoint.name == "checkpoint" else checkpoint.name


# A day on: every fixture file is past the sink log's cleanup delay and the query is idle.
LATER = time.time() + 86_400
# A minus sign right before a digit, not inside a name (part-00000-<uuid>, a temporary file).
NEGATIVE = re.compile(r"(?<![\w.])-\d")
RANGE = re.compile(r"\b(\d+)–(\d+)\b")
ADVICE = re.compile(r"(\w+) (-?\d+) or (?:fewer|lower)")


def _texts(plan: MaintenancePlan) -> list[str]:
    return [
        plan.summary,
        *plan.notes,
        *(p.detail for p in plan.preconditions),
        *(w.reason for w in plan.writes),
        *(d.reason for d in plan.deletes),
    ]


def _plans(checkpoint: Path) -> list[tuple[str, MaintenancePlan]]:
    """Every action with Spark's defaults and with the smallest values, on one checkpoint."""
    storage = CheckpointStorage(str(checkpoint))
    plans = []
    for keep in (100, 1):
        plans.append((f"purge keep_batches={keep}", plan_purge(storage, keep_batches=keep, now=LATER)))
    for min_chain in (10, 1):
        plans.append((f"snapshot min_chain={min_chain}", plan_snapshot(storage, min_chain=min_chain, now=LATER)))
    for retain in (100, 1):
        for keep_offsets in (True, False):
            plan = plan_cleanup(storage, min_versions_to_retain=retain, keep_offsets_range=keep_offsets, now=LATER)
            plans.append((f"cleanup retain={retain} keep_offsets_range={keep_offsets}", plan))
    for log_storage, log_dir in _compactible_logs(checkpoint):
        for retain in (100, 1):
            plan = plan_compaction(
                log_storage,
                log_dir,
                checkpoint_storage=storage,
                min_batches_to_retain=retain,
                compact_interval=3,
                now=LATER,
            )
            plans.append((f"compact {log_dir or 'sink'} min_batches_to_retain={retain}", plan))
    return plans


def _compactible_logs(checkpoint: Path) -> list[tuple[CheckpointStorage, str | None]]:
    sources = sorted((checkpoint / "sources").iterdir()) if (checkpoint / "sources").is_dir() else []
    logs = [(CheckpointStorage(str(checkpoint)), f"sources/{source.name}") for source in sources]
    if (checkpoint.parent / "output" / "_spark_metadata").is_dir():
        logs.append((CheckpointStorage(str(checkpoint.parent / "output")), None))
    return logs


@pytest.fixture(scope="module", params=CHECKPOINTS, ids=_name)
def fixture_plans(request):
    return _plans(request.param)


def test_no_plan_text_shows_a_negative_batch_version_or_threshold(fixture_plans):
    for label, plan in fixture_plans:
        for text in _texts(plan):
            assert not NEGATIVE.search(text), f"{label}: {text}"


def test_no_plan_text_shows_a_range_that_runs_backwards(fixture_plans):
    for label, plan in fixture_plans:
        for text in _texts(plan):
            for first, last in RANGE.findall(text):
                assert int(first) < int(last), f"{label}: {text}"


def test_advice_in_a_plan_names_a_value_a_request_may_carry(fixture_plans):
    for label, plan in fixture_plans:
        for (
            _,
            value,
        ) in (match.groups()[:2] for match in ADVICE.finditer(plan.summary)):
            assert int(value) >= 1, f"{label}: {plan.summary}"


def test_every_fixture_has_at_least_one_nothing_to_do_plan_that_says_why():
    # The fixtures keep few batches (Spark ran with minBatchesToRetain 3), so Spark's defaults find nothing.
    for checkpoint in CHECKPOINTS:
        empty = [plan.summary for _, plan in _plans(checkpoint) if plan.is_empty]
        assert empty and all(summary.startswith("nothing") and ": " in summary for summary in empty), checkpoint


def test_purge_with_more_batches_kept_than_stored_says_which_keep_batches_would_purge(tmp_path):
    query = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "rocksdb_changelog_agg/checkpoint", query, copy_function=shutil.copyfile)
    storage = CheckpointStorage(str(query))

    plan = plan_purge(storage, keep_batches=100, now=LATER)

    # Spark kept offsets and commits 8..11; its RocksDB state starts at version 10 (read with batch 9).
    assert plan.summary == (
        "nothing to purge: keeping the last 100 batches keeps batches 8–11 (4 batches), all that is stored; "
        "keeping 3 or fewer would purge from batch 8"
    )
    assert "threshold 0: keeping 100 batches is more than the 12 batches up to 11: all stay" in plan.notes
    assert plan_purge(storage, keep_batches=4, now=LATER).is_empty
    assert {d.path for d in plan_purge(storage, keep_batches=3, now=LATER).deletes} >= {"offsets/8", "commits/8"}


def test_purge_of_a_long_history_says_which_batches_go_and_which_stay(tmp_path):
    query = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "windowed_agg_file_sink/checkpoint", query, copy_function=shutil.copyfile)
    long_stateless_history(query, batches=178)

    plan = plan_purge(CheckpointStorage(str(query)), keep_batches=100, now=LATER)

    assert plan.summary.startswith("purge offsets and commits of batches 0–77 (78 batches): 312 files, ")
    assert plan.summary.endswith("keep batches 78–177 (100 batches) (keep the last 100 committed batches, up to 177)")


def test_a_purge_blocked_by_state_names_the_state_version_and_what_lets_it_go(tmp_path):
    query = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "windowed_agg_file_sink/checkpoint", query, copy_function=shutil.copyfile)
    oldest_version = min(int(p.name.split(".")[0]) for p in (query / "state").rglob("*") if p.name.endswith(".delta"))

    plan = plan_purge(CheckpointStorage(str(query)), keep_batches=1, now=LATER)

    assert plan.summary == (
        "nothing to purge: batch 8, the oldest stored, is still needed: "
        f"state version {oldest_version} is still on disk "
        f"and is read with batch {oldest_version - 1}'s offsets and commits "
        "(a cleanup of old state files lets older batches go)"
    )


def test_the_chain_a_nothing_to_do_snapshot_suggests_allowing_writes_a_snapshot():
    checked = 0
    for checkpoint in CHECKPOINTS:
        storage = CheckpointStorage(str(checkpoint))
        advice = ADVICE.search(plan_snapshot(storage, min_chain=10, now=LATER).summary)
        if advice is None:
            continue
        assert advice.group(1) == "allowing"  # the form says "Longest delta chain allowed"
        assert plan_snapshot(storage, min_chain=int(advice.group(2)), now=LATER).writes, checkpoint
        assert not plan_snapshot(storage, min_chain=int(advice.group(2)) + 1, now=LATER).writes, checkpoint
        checked += 1
    assert checked  # stream_stream_join replays 3 deltas


def test_a_snapshot_of_rocksdb_stores_says_spark_writes_them():
    plan = plan_snapshot(CheckpointStorage(str(OUR_FIXTURES / "rocksdb_changelog_agg/checkpoint")), now=LATER)
    assert plan.summary == "nothing to do: every store is RocksDB's, whose snapshots Spark's RocksDB provider writes"


def test_a_stream_stream_join_snapshot_names_the_longest_chain():
    # Spark wrote snapshots every 2 deltas there (minDeltasForSnapshot 2): chains of 3 deltas at version 12.
    plan = plan_snapshot(
        CheckpointStorage(str(OUR_FIXTURES / "stream_stream_join/checkpoint")), min_chain=10, now=LATER
    )
    assert re.fullmatch(
        r"nothing to do: the longest delta chain is 3 deltas "
        r"\(state/0/\d/[\w-]+ at version 12\), not more than the 10 allowed; "
        r"allowing 2 or fewer would snapshot it",
        plan.summary,
    ), plan.summary


def test_the_min_batches_to_retain_a_nothing_to_expire_suggests_expires_files():
    checked = 0
    for checkpoint in CHECKPOINTS:
        storage = CheckpointStorage(str(checkpoint))
        for log_storage, log_dir in _compactible_logs(checkpoint):
            plan = plan_compaction(
                log_storage,
                log_dir,
                checkpoint_storage=storage,
                min_batches_to_retain=100,
                compact_interval=3,
                now=LATER,
            )
            advice = ADVICE.search(plan.summary)
            if advice is None:
                continue
            assert advice.group(1) == "retaining", plan.summary
            again = plan_compaction(
                log_storage,
                log_dir,
                checkpoint_storage=storage,
                min_batches_to_retain=int(advice.group(2)),
                compact_interval=3,
                now=LATER,
            )
            assert again.deletes, (plan.summary, again.summary)
            checked += 1
    assert checked  # file_source_dedup's source and sink logs


def test_cleanup_kept_by_the_offset_log_says_so_and_how_to_change_it():
    plan = plan_cleanup(
        CheckpointStorage(str(OUR_FIXTURES / "killed_mid_batch/checkpoint")),
        min_versions_to_retain=2,
        keep_offsets_range=True,
        now=LATER,
    )
    # offsets/ starts at batch 3 and the oldest state version on disk is 3 (the fixture's files).
    assert plan.summary == (
        "nothing to do: versions 3–6 on disk must stay loadable "
        "because offsets/ still holds batch 3 (the option to keep the state of every batch still in offsets/); "
        "turn it off, or purge offsets/ first"
    )


def test_a_purge_counts_the_batches_it_keeps_not_the_range_when_one_is_missing():
    # Spark's test checkpoint lacks offsets/3 (offsets 0, 1, 2, 4; commits 0, 1, 2).
    [inconsistent] = [c for c in CHECKPOINTS if c.name == "checkpoint-test-offsetId-commitId-inconsistent"]

    plan = plan_purge(CheckpointStorage(str(inconsistent)), keep_batches=1, now=LATER)

    assert plan.summary.startswith("purge offsets and commits of batches 0–1 (2 batches): 4 files, ")
    assert plan.summary.endswith("keep batches 2–4 (2 batches, with gaps) (keep the last 1 committed batch, up to 2)")
