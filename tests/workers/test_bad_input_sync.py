"""A checkpoint made of malformed corpus files beside a healthy one, both registered and synced.

The damaged one gets one issue per file, naming the file and the reason, shown on its health
panel; its readable batches are stored; the healthy one syncs fully (other checkpoints unaffected).
The corpus itself is tests/bad_input_corpus.py.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from bad_input_corpus import KINDS, bad_input_corpus
from dashboards.models import SyncRun
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

CORPUS = {bad.id: bad for bad in bad_input_corpus()}

HEALTHY = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"
# Corpus entries planted in a copy of HEALTHY, by the path they replace.
PLANTED = {
    "offsets/9": ("invalid_utf8/offsets/0-ff", "not UTF-8"),
    "offsets/11": ("unknown_version/offsets/v99", "log version v99 is newer than the supported"),
    "commits/8": ("empty/commits/0-bytes", "Incomplete log file"),
    "commits/10": ("deep_nesting/commits/objects", "invalid JSON"),
    "metadata": ("invalid_json/metadata/2", "invalid JSON"),
}


def _plant(directory, relpath: str, corpus_id: str) -> None:
    bad = CORPUS[corpus_id]
    target = directory / relpath
    target.write_bytes(bad.damage(KINDS[bad.kind].seed.read_bytes()))


def _batch_ids_on_disk(directory) -> list[int]:
    return sorted(int(p.name) for p in (directory / "offsets").iterdir() if p.name.isdigit())


def test_a_checkpoint_of_malformed_files_gets_one_issue_per_file_and_leaves_a_healthy_one_alone(
    copy_checkpoint, viewer_client
):

    damaged_dir = copy_checkpoint(HEALTHY, "damaged")
    for relpath, (corpus_id, _) in PLANTED.items():
        _plant(damaged_dir, relpath, corpus_id)
    healthy_dir = copy_checkpoint(HEALTHY, "healthy")
    damaged = make_checkpoint(name="damaged", url=str(damaged_dir))
    healthy = make_checkpoint(name="healthy", url=str(healthy_dir))

    damaged_run = sync_checkpoint(damaged.pk)
    healthy_run = sync_checkpoint(healthy.pk)

    issues = {issue.path: issue for issue in damaged.issues.open()}
    assert set(issues) == set(PLANTED)
    for path, (_, reason) in PLANTED.items():
        assert issues[path].reason.startswith(f"{path}: "), issues[path].reason
        assert reason in issues[path].reason
    assert damaged_run.status == SyncRun.Status.PARTIAL
    # The readable batches of the damaged checkpoint are stored all the same.
    stored = sorted(damaged.batches.values_list("batch_id", flat=True))
    assert stored == [b for b in _batch_ids_on_disk(damaged_dir) if f"offsets/{b}" not in PLANTED]

    assert healthy_run.status == SyncRun.Status.OK
    assert not healthy.issues.exists()
    assert sorted(healthy.batches.values_list("batch_id", flat=True)) == _batch_ids_on_disk(healthy_dir)
    committed = sorted(int(p.name) for p in (healthy_dir / "commits").iterdir() if p.name.isdigit())
    assert sorted(healthy.batches.filter(is_committed=True).values_list("batch_id", flat=True)) == committed

    panel = viewer_client.get(reverse("dashboards:checkpoint-health-panel", args=[damaged.pk])).content.decode()
    for path, issue in issues.items():
        assert escape(path) in panel and escape(issue.reason) in panel
