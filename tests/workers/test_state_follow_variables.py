"""The state follow of a transformWithState query: each newly committed batch moves every state
variable's figures to its version, equal to what a full pass finds (tests/fixtures/tws).

The copy's last commits (batch 3, state version 4; or batches 2 and 3) are held back, then given
back as a running query writes them. A store with column families is read cold once (and at each
version with a zip), then followed from its key set, reading only the new changelogs; a key set
that would pass the byte limit is not kept, and each version is read cold, as the note says. A
damaged changelog or schema file of such a store is a note naming the file on the partitions it
stops, and the sync goes on.
"""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest

from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint, planned_at
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

HELD_BACK = 3


def _figures(checkpoint: Checkpoint) -> list[tuple]:
    return list(
        checkpoint.state_partitions.order_by("partition").values_list("partition", "rows", "rows_version", "variables")
    )


@pytest.mark.parametrize("variant", ["unsaferow", "avro_format2"])
def test_a_new_commit_moves_every_variable_to_what_a_full_pass_finds(copy_checkpoint, settings, tmp_path, variant):
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    root = copy_checkpoint(OUR_FIXTURES / "tws" / variant / "checkpoint", variant)
    aside = tmp_path / "held-commit"
    shutil.move(root / "commits" / str(HELD_BACK), aside)
    checkpoint = make_checkpoint(name=variant, url=str(root))
    first = planned_at(root, HELD_BACK) + timedelta(seconds=1)
    sync_checkpoint(checkpoint.pk, now=first)
    before = _figures(checkpoint)

    shutil.move(aside, root / "commits" / str(HELD_BACK))
    run = sync_checkpoint(checkpoint.pk, now=first + timedelta(seconds=5))
    followed = _figures(checkpoint)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=None)
    sync_checkpoint(checkpoint.pk)

    assert run.kind == SyncRun.Kind.PROBE and run.new_commits == 1
    assert {row[2] for row in before} == {HELD_BACK} and {row[2] for row in followed} == {HELD_BACK + 1}
    # Batch 3 appended 7 rows to the lists: their elements grow by 7 over the partitions.
    recent = [
        sum(v["values"] for _, _, _, variables in rows for v in variables if v["name"] == "recent")
        for rows in (before, followed)
    ]
    assert recent[1] - recent[0] == 7
    assert followed == _figures(checkpoint)


def test_a_damaged_changelog_or_schema_file_is_a_note_naming_it_and_the_sync_goes_on(copy_checkpoint, tmp_path):
    root = copy_checkpoint(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint", "damaged")
    changelog = root / "state" / "0" / "1" / f"{HELD_BACK + 1}.changelog"
    changelog.write_bytes(changelog.read_bytes()[:-9])
    checkpoint = make_checkpoint(name="damaged", url=str(root))

    run = sync_checkpoint(checkpoint.pk)
    (first, second) = checkpoint.state_partitions.order_by("partition")

    assert run.status == SyncRun.Status.OK
    assert first.rows == 5 and len(first.variables) == 9
    assert second.rows is None and second.variables == []
    assert second.note.startswith(f"state/0/1/{HELD_BACK + 1}.changelog: ")

    (schema,) = (root / "state" / "0" / "_stateSchema" / "default").glob("0_*")
    schema.write_bytes(schema.read_bytes()[:40])
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=None)
    sync_checkpoint(checkpoint.pk)

    notes = set(checkpoint.state_partitions.values_list("note", flat=True))
    assert all(note.startswith(f"state/0/_stateSchema/default/{schema.name}: ") for note in notes), notes


@pytest.fixture
def two_held_back(copy_checkpoint, settings, tmp_path):
    """The unsaferow copy without its commits of batches 2 and 3, registered and synced once (at
    version 2), and a function giving one back and syncing as the running query would."""
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    root = copy_checkpoint(OUR_FIXTURES / "tws" / "unsaferow" / "checkpoint", "tws")
    aside = tmp_path / "held-commits"
    aside.mkdir()
    for batch_id in (2, 3):
        shutil.move(root / "commits" / str(batch_id), aside / str(batch_id))
    checkpoint = make_checkpoint(name="tws", url=str(root))
    first = planned_at(root, HELD_BACK) + timedelta(seconds=1)
    sync_checkpoint(checkpoint.pk, now=first)

    def give_back(batch_id: int) -> SyncRun:
        shutil.move(aside / str(batch_id), root / "commits" / str(batch_id))
        return sync_checkpoint(checkpoint.pk, now=first + timedelta(seconds=batch_id))

    return checkpoint, give_back


def test_a_sync_that_follows_a_store_with_column_families_reads_only_the_new_changelogs(two_held_back):
    checkpoint, give_back = two_held_back
    give_back(2)  # version 3 has a zip: read cold, and the key sets are kept
    partitions = checkpoint.state_partitions.count()

    run = give_back(3)
    followed = _figures(checkpoint)

    # offsets/4 (missing: the end of the probe) and commits/3, then per partition 4.changelog
    # read and 4.zip looked up: no listing, no zip or SST read.
    assert (run.list_calls, run.read_calls, run.info_calls) == (0, 2 + partitions, partitions)
    assert {row[2] for row in followed} == {4} and set(checkpoint.state_partitions.values_list("note", flat=True)) == {
        ""
    }
    assert followed == _full_pass_figures(checkpoint)


def test_a_key_set_that_would_pass_the_byte_limit_is_not_kept_and_the_note_says_so(
    two_held_back, settings, monkeypatch
):
    checkpoint, give_back = two_held_back
    settings.STATE_ROWS_MAX_BYTES = 1024 * 1024  # the load chains fit; the key sets, at 1 MB a key, do not
    monkeypatch.setattr("workers.state_follow.FAMILY_KEY_BYTES", 1024 * 1024)

    give_back(2)
    notes_after_cold_read = set(checkpoint.state_partitions.values_list("note", flat=True))
    give_back(3)

    notes = set(checkpoint.state_partitions.values_list("note", flat=True))
    assert all(note.startswith("read cold at version 3: a key set of its ") for note in notes_after_cold_read)
    assert all(note.startswith("read cold at version 4: a key set of its ") for note in notes), notes
    assert all("CKPTWEB_STATE_ROWS_MAX_BYTES (1048576)" in note for note in notes)
    assert not list(settings.STATE_KEYS_DIR.rglob("*.keys"))
    assert _figures(checkpoint) == _full_pass_figures(checkpoint)


def _full_pass_figures(checkpoint: Checkpoint) -> list[tuple]:
    Checkpoint.objects.filter(pk=checkpoint.pk).update(last_inspected_at=None)
    sync_checkpoint(checkpoint.pk)
    return _figures(checkpoint)


def test_a_store_whose_variables_the_full_pass_could_not_count_is_read_cold_with_them(two_held_back):
    checkpoint, give_back = two_held_back
    # As when the committed version's files were gone at the full pass: rows and variables unknown.
    checkpoint.state_partitions.update(rows=None, variables=[], note="version 3 cannot be loaded")

    give_back(2)

    assert _figures(checkpoint) == _full_pass_figures(checkpoint)
    assert all(row[3] and row[2] == 3 for row in _figures(checkpoint))
