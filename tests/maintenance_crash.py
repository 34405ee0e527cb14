"""Kill an apply_* mid-way, as a crashed worker would be killed, for the crash-safety tests.

The apply runs in a forked child whose step hook SIGKILLs the child before its ``kill_at``-th
storage step: no exception handler, no ``finally``, nothing flushed. The test then looks at what
the child left on disk.
"""

from __future__ import annotations

import multiprocessing
import os
import signal

from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

CHILD_TIMEOUT_SECONDS = 60


def count_steps(apply, storage_url: str, plan) -> int:
    """How many times ``apply`` calls its step hook carrying out ``plan`` (kill points 0..n-1)."""
    calls = []
    apply(CheckpointStorage(storage_url), plan, on_step=lambda *step: calls.append(step))
    return len(calls)


def apply_killed_at(apply, storage_url: str, plan, kill_at: int) -> int:
    """Apply ``plan`` in a forked child that SIGKILLs itself at hook call ``kill_at``; its exit code."""

    def child() -> None:
        calls = iter(range(1 << 30))

        def hook(operation, path, done, total):
            if next(calls) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        apply(CheckpointStorage(storage_url), plan, on_step=hook)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(CHILD_TIMEOUT_SECONDS)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise AssertionError(
            f"the child applying the plan neither ended nor reached step {kill_at} within {CHILD_TIMEOUT_SECONDS} s"
        )
    return process.exitcode
