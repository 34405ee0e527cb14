"""Counts with their nouns, as plan summaries and findings write them."""

import pytest

from workers.checkpoint.wording import plural


@pytest.mark.parametrize(
    ("count", "noun", "nouns", "text"),
    [
        (0, "file", "", "0 files"),
        (1, "file", "", "1 file"),
        (2, "snapshot", "", "2 snapshots"),
        (1, "batch", "batches", "1 batch"),
        (3, "batch", "batches", "3 batches"),
        (12_500, "delta", "", "12,500 deltas"),
    ],
)
def test_plural_puts_the_noun_that_goes_with_the_count(count, noun, nouns, text):
    assert plural(count, noun, nouns) == text
