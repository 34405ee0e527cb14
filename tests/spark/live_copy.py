"""Waiting on a live query and copying its checkpoint as `cp -a` would, for tests that run real queries.

from spark.live_copy import batches_done, copy_between_batches, wait_for   # tests/ is on the path
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path


def wait_for(condition, what: str, timeout: float = 240) -> None:
    """Poll ``condition`` until it holds; TimeoutError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def batches_done(query) -> int:
    """The newest batch id the query reported progress for, -1 before its first."""
    return -1 if query.lastProgress is None else query.lastProgress["batchId"]


def copy_between_batches(query, source: Path, target: Path) -> Path:
    """Copy a live checkpoint as a backup taken between two batches would be (every offsets/N has
    its commits/N); one taken mid-batch is a run killed mid-batch, which tests build apart."""
    for _ in range(20):
        wait_for(lambda: not query.status["isTriggerActive"], "a moment between two batches")
        shutil.copytree(source, target)
        if {p.name for p in (target / "offsets").iterdir()} == {p.name for p in (target / "commits").iterdir()}:
            return target
        shutil.rmtree(target)
    raise AssertionError(f"every copy of {source} caught a batch half-written")
