"""The maintenance form's defaults and previews: the pure functions, and the figures a real sync stores."""

from __future__ import annotations

import pytest

from dashboards.maintenance_page.figures import (
    LogFigures,
    MaintenanceFigures,
    StoreFigures,
    preview_request,
    suggest_parameters,
)
from dashboards.models import Checkpoint
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

RETAIN = "spark.sql.streaming.minBatchesToRetain"


def figures(**overrides) -> MaintenanceFigures:
    overrides.setdefault("conf", {})
    overrides.setdefault("oldest_batch_id", 0)
    overrides.setdefault("latest_batch_id", 177)
    overrides.setdefault("latest_committed_batch_id", 177)
    overrides.setdefault("oldest_state_version", None)
    return MaintenanceFigures(**overrides)


# --- defaults ---


def test_a_min_batches_to_retain_pinned_in_the_offset_log_is_the_default_of_every_retention():
    suggested = suggest_parameters(figures(conf={RETAIN: "10"}))

    assert {
        name: suggested[name].value for name in ("keep_batches", "min_versions_to_retain", "min_batches_to_retain")
    } == {
        "keep_batches": 10,
        "min_versions_to_retain": 10,
        "min_batches_to_retain": 10,
    }
    assert suggested["keep_batches"].source == "spark.sql.streaming.minBatchesToRetain, pinned in the offset log"


def test_without_a_pinned_value_the_retention_is_read_from_what_sparks_purge_left():
    # Spark purged below batch 178 - 10 at the start of batch 178: offsets 168..178 remain.
    suggested = suggest_parameters(figures(oldest_batch_id=168, latest_batch_id=178, latest_committed_batch_id=178))

    assert suggested["keep_batches"].value == 10
    assert suggested["keep_batches"].source == "Spark's own purge left batches 168–178: the query's minBatchesToRetain"


@pytest.mark.parametrize("conf", [{}, {RETAIN: "ten"}, {RETAIN: "0"}, {RETAIN: "-3"}])
def test_an_unpurged_log_without_a_usable_pinned_value_starts_from_sparks_default(conf):
    suggested = suggest_parameters(figures(conf=conf))

    assert suggested["min_versions_to_retain"].value == 100
    assert "Spark's default" in suggested["min_versions_to_retain"].source


def test_min_chain_starts_from_the_pinned_min_deltas_for_snapshot_else_sparks_default():
    assert (
        suggest_parameters(figures(conf={"spark.sql.streaming.stateStore.minDeltasForSnapshot": "5"}))[
            "min_chain"
        ].value
        == 5
    )
    assert suggest_parameters(figures())["min_chain"].value == 10


# --- previews ---


def test_a_purge_preview_names_the_batches_that_go_and_those_that_stay():
    preview = preview_request("purge", {"keep_batches": 100}, figures())

    assert preview.text == (
        "purge offsets and commits of batches 0–77 (78 batches), keep batches 78–177 (100 batches) "
        "(keep the last 100 committed batches, up to 177)"
    )
    assert preview.does_something


def test_a_purge_preview_with_more_batches_kept_than_stored_says_which_value_would_purge():
    preview = preview_request(
        "purge", {"keep_batches": 100}, figures(oldest_batch_id=8, latest_batch_id=11, latest_committed_batch_id=11)
    )

    assert preview.text == (
        "nothing to purge: keeping the last 100 batches keeps batches 8–11 (4 batches), "
        "all that is stored; keeping 3 or fewer would purge from batch 8"
    )
    assert not preview.does_something


def test_a_purge_preview_before_any_commit_says_so():
    preview = preview_request("purge", {"keep_batches": 3}, figures(latest_batch_id=0, latest_committed_batch_id=None))
    assert preview.text == "nothing to purge: no batch is committed yet"


def test_a_snapshot_preview_counts_the_stores_over_the_chain_limit():
    stores = (
        StoreFigures("state/0/0", "hdfs", 40, 3),
        StoreFigures("state/0/1", "hdfs", 40, 12),
        StoreFigures("state/0/2", "hdfs", 40, 0),
    )

    assert preview_request("snapshot", {"min_chain": 10}, figures(stores=stores)).text == (
        "write a snapshot in 1 of 3 stores, whose delta chain of 12 deltas is longer than the 10 allowed"
    )
    assert preview_request("snapshot", {"min_chain": 20}, figures(stores=stores)).text == (
        "nothing to do: the longest delta chain is 12 deltas (state/0/1 at version 40), not more than the 20 allowed; "
        "allowing 11 or fewer would snapshot it"
    )


def test_a_snapshot_preview_of_rocksdb_stores_or_none_says_why_nothing_happens():
    rocksdb = (StoreFigures("state/0/0", "rocksdb", 40, 30),)
    assert preview_request("snapshot", {"min_chain": 10}, figures(stores=rocksdb)).text == (
        "nothing to do: no HDFS-backed store (RocksDB's snapshots are written by Spark's RocksDB provider)"
    )
    assert (
        preview_request("snapshot", {"min_chain": 10}, figures()).text
        == "nothing to do: the last full pass found no state store"
    )


def test_a_cleanup_preview_keeps_the_offset_logs_batches_unless_told_not_to():
    # Committed batch 177 wrote version 178; offsets/ starts at batch 78; state files from version 60.
    state = figures(oldest_batch_id=78, oldest_state_version=60)

    assert preview_request("cleanup", {"min_versions_to_retain": 100, "keep_offsets_range": True}, state).text == (
        "delete the state files of versions 60–77 that no version from 78 to 178 loads "
        "(a delta chain a retained version replays stays)"
    )
    assert preview_request("cleanup", {"min_versions_to_retain": 150, "keep_offsets_range": True}, state).text == (
        "nothing to do: retaining 150 state versions keeps versions 60–178, all that is on disk; "
        "retaining 117 or fewer would retain less than is on disk"
    )


def test_a_cleanup_preview_with_everything_retained_says_which_value_would_change_it():
    state = figures(oldest_batch_id=78, oldest_state_version=100)

    preview = preview_request("cleanup", {"min_versions_to_retain": 100, "keep_offsets_range": False}, state)

    assert preview.text == (
        "nothing to do: retaining 100 state versions keeps versions 100–178, all that is on disk; "
        "retaining 77 or fewer would retain less than is on disk"
    )


def test_a_compact_preview_says_what_the_log_lacks_and_when_spark_would_expire():
    log = LogFigures(
        "sources/0",
        "sources/0",
        10,
        latest_batch_id=57,
        oldest_batch_id=0,
        compact_batch_ids=frozenset({9, 19, 29, 39, 49}),
    )
    missing = LogFigures(
        "sources/0",
        "sources/0",
        10,
        latest_batch_id=57,
        oldest_batch_id=0,
        compact_batch_ids=frozenset({9, 19, 29, 39}),
    )

    assert preview_request(
        "compact", {"log": "sources/0", "min_batches_to_retain": 100}, figures(logs=(log,))
    ).text == (
        "nothing to compact: 49.compact is present; "
        "nothing to expire in sources/0: Spark expires files only from batch 109 on "
        "(compact interval 10, 100 batches to retain) and the log is at batch 57; "
        "retaining 48 or fewer would expire from batch 0"
    )
    preview = preview_request("compact", {"log": "sources/0", "min_batches_to_retain": 20}, figures(logs=(missing,)))
    assert preview.text == (
        "write 49.compact of sources/0, which is missing; "
        "expire batches 0–28 (29 batches) of sources/0 (those past the cleanup delay)"
    )
    assert preview.does_something


def test_a_compact_preview_without_any_log_says_why():
    preview = preview_request("compact", {"log": "", "min_batches_to_retain": 100}, figures())
    assert preview.text.startswith("nothing to do: no compactible log") and not preview.does_something


# --- the figures a real sync stores ---


@pytest.mark.django_db
def test_the_figures_of_a_synced_spark_checkpoint_are_those_of_its_files(copy_checkpoint, django_assert_num_queries):
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    output = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "output", "orders-output")
    checkpoint = make_checkpoint(url=str(directory), sink_log_url=str(output), file_log_compact_interval=3)
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    state_versions = {
        int(p.name.split(".")[0]) for p in (directory / "state").rglob("*") if p.suffix in (".delta", ".snapshot")
    }

    # The inventory pass (one query), the pinned conf, the state partitions, the logs and their compact files.
    with django_assert_num_queries(5):
        found = Checkpoint.objects.maintenance_figures(checkpoint)

    assert (found.oldest_batch_id, found.latest_batch_id, found.latest_committed_batch_id) == (8, 11, 11)
    assert found.oldest_state_version == min(state_versions)
    assert found.conf["spark.sql.streaming.stateStore.compression.codec"] == "lz4"
    assert sorted((s.path, s.provider) for s in found.stores) == [("state/0/0", "hdfs"), ("state/0/1", "hdfs")]
    [sink] = found.logs
    assert (sink.choice, sink.compact_interval, sink.latest_batch_id, sink.oldest_batch_id) == ("sink", 3, 11, 8)
    assert sink.compact_batch_ids == {8, 11}
    # pipelines/generate_fixtures.py ran the query with minBatchesToRetain 3; Spark's purge shows it.
    assert suggest_parameters(found)["keep_batches"].value == 3


@pytest.mark.django_db
def test_the_log_choices_show_the_compact_interval_read_from_each_log(copy_checkpoint):
    from dashboards.maintenance_page.forms import compactible_log_choices

    directory = copy_checkpoint(OUR_FIXTURES / "file_source_dedup" / "checkpoint", "dedup")
    output = copy_checkpoint(OUR_FIXTURES / "file_source_dedup" / "output", "dedup-output")
    checkpoint = make_checkpoint(
        name="dedup", url=str(directory), sink_log_url=str(output), file_log_compact_interval=3
    )
    sync_checkpoint(checkpoint.pk)

    # sources/0 holds 2.compact 3 4 5.compact 6 7; the sink log 11.compact 12 13 14.compact 15 (interval 3).
    assert compactible_log_choices(checkpoint) == [
        ("sources/0", "sources/0: compact interval 3, latest batch 7"),
        ("sink", f"file sink log ({output}): compact interval 3, latest batch 15"),
    ]
