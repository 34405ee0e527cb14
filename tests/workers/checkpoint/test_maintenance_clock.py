"""Reading the storage's clock by stamping a file (maintenance/clock.py), on a local checkpoint.

The skewed clocks themselves are tested against an S3 endpoint an hour off (tests/s3/test_clock_skew.py).
"""

from __future__ import annotations

import os
import shutil
import time

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.inventory import is_temporary_name
from workers.checkpoint.maintenance.actions import plan_action
from workers.checkpoint.maintenance.clock import clock_from_stamp, read_storage_clock
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def test_a_local_filesystem_agrees_with_this_clock_and_the_probe_leaves_nothing(tmp_path):
    storage = CheckpointStorage(str(tmp_path))

    reading = read_storage_clock(storage)

    assert abs(reading.offset) <= reading.uncertainty < 1, reading
    assert os.listdir(tmp_path) == []
    assert (storage.calls.write, storage.calls.delete) == (1, 1)


def test_a_stamp_dates_the_file_between_sending_and_the_answer_and_whole_seconds_widen_the_doubt():
    fine, whole = clock_from_stamp(100.0, 100.2, 3700.25), clock_from_stamp(100.0, 100.2, 3700.0)
    assert round(fine.offset, 6) == 3600.15 and round(whole.offset, 6) == 3599.9
    assert whole.uncertainty - fine.uncertainty > 0.9
    # "now" is taken at the early end: a file dated at the stamp is never older than it can be.
    assert fine.now(100.1) <= 3700.25


def test_a_plan_says_which_clock_it_measured_ages_on(tmp_path):
    root = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "windowed_agg_file_sink/checkpoint", root, copy_function=shutil.copyfile)

    storage = CheckpointStorage(str(root))
    plan = plan_action("purge", storage, {"keep_batches": 1}, now=time.time(), quiet_seconds=300)

    (clock,) = [p for p in plan.preconditions if p.name == "storage-clock"]
    assert clock.ok and clock.detail.startswith(f"the clock of {storage.url} agrees with this worker's"), clock
    assert not any("clock" in note for note in plan.notes), plan.notes  # the notes say what cannot be undone
    assert not [name for name in os.listdir(root) if is_temporary_name(name)]
