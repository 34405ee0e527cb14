"""The malformed-file corpus (tests/bad_input_corpus.py): typed errors only, bounded, isolated.

1. Each malformed file, read through the public readers and an allowed-root storage, reads or
   raises the CheckpointError its damage calls for, with a message starting with its path.
2. Each is read in a forked child under an address-space limit and an alarm: no hang, no
   unbounded allocation, no crash (a property of the readers, not a speed measurement).
The end-to-end check (a damaged checkpoint beside a healthy one, synced into the database) is
tests/workers/test_bad_input_sync.py: this folder stays free of Django.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal

import pytest

from bad_input_corpus import (
    KINDS,
    BadFile,
    WrittenBadFile,
    bad_input_corpus,
    counts_by_category,
    write_corpus_file,
)
from workers.checkpoint.errors import CheckpointError

CORPUS = bad_input_corpus()
IS_ROOT = os.geteuid() == 0
# Per file: what a decode may add to the address space the process already has, and how long it may take.
ADDRESS_SPACE_HEADROOM_BYTES = 512 * 1024 * 1024
ALARM_SECONDS = 10


def _params(corpus: list[BadFile]) -> list:
    params = []
    for bad in corpus:
        marks = []
        if bad.xfail_reason:
            marks.append(pytest.mark.xfail(strict=True, reason=bad.xfail_reason))
        if bad.needs_non_root:
            marks.append(pytest.mark.skipif(IS_ROOT, reason="root reads mode-000 files"))
        params.append(pytest.param(bad, id=bad.id, marks=marks))
    return params


# --- 1. typed errors naming the file -----------------------------------------------------------


def _names_the_file(path: str, relpath: str) -> bool:
    """The file itself, the directory whose listing failed, or (a link to a directory) a path below it."""
    return path == relpath or relpath.startswith(f"{path}/") or path.startswith(f"{relpath}/")


def _check_outcome(written: WrittenBadFile) -> None:
    bad = written.bad
    try:
        written.open_and_read()
    except CheckpointError as exc:
        if bad.expected is None:
            return
        assert isinstance(exc, bad.expected), f"{type(exc).__name__}: {exc}"
        assert _names_the_file(exc.path, written.names), str(exc)
        assert str(exc).startswith(f"{exc.path}: "), str(exc)
        assert exc.reason.strip(), "the error gives no reason"
        return
    assert bad.expected is None, f"read fine, expected {bad.expected.__name__}"


@pytest.mark.parametrize("bad", _params(CORPUS))
def test_each_malformed_file_reads_or_raises_its_checkpoint_error_naming_the_file(bad, tmp_path):
    _check_outcome(write_corpus_file(bad, tmp_path))


def test_the_corpus_holds_at_least_300_files_covering_every_category():
    counts = counts_by_category(CORPUS, is_root=IS_ROOT)
    assert sum(counts.values()) >= 300, counts
    assert set(counts) >= {
        "truncated",
        "flipped_bytes",
        "wrong_magic",
        "bad_lengths",
        "unknown_version",
        "invalid_utf8",
        "invalid_json",
        "empty",
        "enormous",
        "deep_nesting",
        "symlinks",
        "unreadable",
    }
    assert {bad.kind for bad in CORPUS} == set(KINDS)


# --- 2. bounded time and memory ------------------------------------------------------------------


def _virtual_memory_bytes() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmSize:"))
    return int(line.split()[1]) * 1024


def _read_in_a_limited_child(written: WrittenBadFile, address_space_limit: int) -> str:
    """Read one file in a forked child; return "ok", "crash", "out of memory" or the killing signal.

    SIGALRM keeps its default action (terminate), so a hang inside C code is ended too.
    """
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 70
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_AS, (address_space_limit, address_space_limit))
            signal.alarm(ALARM_SECONDS)
            try:
                written.open_and_read()
                code = 0
            except CheckpointError:
                code = 0
            except MemoryError:
                code = 2
            except BaseException:  # noqa: BLE001  (any other exception is the crash we count)
                code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return {0: "ok", 2: "out of memory", 3: "crash"}.get(os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self/status"), reason="needs fork and /proc")
def test_every_malformed_file_is_read_within_an_alarm_and_an_address_space_limit(tmp_path):
    limit = _virtual_memory_bytes() + ADDRESS_SPACE_HEADROOM_BYTES
    failures = {}
    for bad in CORPUS:
        if bad.needs_non_root and IS_ROOT:
            continue
        written = write_corpus_file(bad, tmp_path)
        outcome = _read_in_a_limited_child(written, limit)
        if outcome != "ok":
            failures[bad.id] = outcome
        shutil.rmtree(tmp_path / "allowed", ignore_errors=True)  # the 100 MB files go at once
    assert failures == {}


EVENT_LOG_LINE_BYTES = 200 * 1024 * 1024  # under eventlog.MAX_EVENT_LOG_FILE_BYTES (256 MB)


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self/status"), reason="needs fork and /proc")
def test_an_event_log_line_just_under_the_read_limit_is_decoded_within_the_address_space_limit(tmp_path):
    from bad_input_corpus import EVENT_LINE_PREFIX

    log = tmp_path / "allowed" / "events" / "local-1"
    log.parent.mkdir(parents=True)
    with log.open("wb") as out:
        out.write(EVENT_LINE_PREFIX + b'{"id":"')
        for _ in range(EVENT_LOG_LINE_BYTES >> 20):
            out.write(b"y" * (1 << 20))
        out.write(b'"}}\n')
    kind = KINDS["event_log"]
    written = WrittenBadFile(
        BadFile("enormous", "event_log", "200MB-line", None, None),
        tmp_path / "allowed",
        tmp_path / "allowed",
        kind.relpath,
        kind.read,
    )
    assert _read_in_a_limited_child(written, _virtual_memory_bytes() + ADDRESS_SPACE_HEADROOM_BYTES) == "ok"
