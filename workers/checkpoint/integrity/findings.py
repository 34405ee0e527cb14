"""What a check reports: a Finding with its severity, and how a read or parse error becomes one.

Apart from the facts and the rules, because every rule module builds findings and several turn
the same CheckpointError into one the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    TruncatedFileError,
    UnsupportedVersionError,
)

Severity = Literal["error", "warning", "info"]

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or fact) about a checkpoint; ``path`` is relative to the checkpoint root,
    or the sink log's URL followed by the file name."""

    severity: Severity
    code: str
    path: str
    message: str
    restart_impact: str


def _unreadable_file_finding(exc: CheckpointError, path: str, severity: Severity, impact: str) -> Finding:
    """Turn a read or parse error into a finding whose code says what kind of damage it is."""
    return Finding(severity, _error_code(exc), path, _reason(exc), impact)


def _error_code(exc: CheckpointError) -> str:
    if isinstance(exc, IncompleteLogFileError):
        return "log-file-empty"
    if isinstance(exc, TruncatedFileError):
        return "log-file-incomplete"
    if isinstance(exc, UnsupportedVersionError):
        return "log-version-unsupported"
    return "file-corrupt" if isinstance(exc, CorruptFileError) else "file-unreadable"


def _reason(exc: CheckpointError) -> str:
    """The error's message without the leading path, which the finding carries separately."""
    return str(exc).removeprefix(f"{exc.path}: ")
