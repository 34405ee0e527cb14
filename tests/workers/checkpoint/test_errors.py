from __future__ import annotations

import pickle

import pytest

from workers.checkpoint.errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    MissingFileError,
    PathNotAllowedError,
    StorageError,
    TruncatedFileError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)


def test_corrupt_file_error_starts_with_the_path_and_gives_the_byte_offset():
    error = CorruptFileError("commits/41", "expected a version line", offset=0)
    assert str(error) == "commits/41: expected a version line (at byte 0)"
    assert (error.path, error.reason, error.offset) == ("commits/41", "expected a version line", 0)


def test_corrupt_file_error_without_offset_has_no_position():
    assert str(CorruptFileError("metadata", "not UTF-8 text")) == "metadata: not UTF-8 text"


def test_incomplete_log_file_error_says_incomplete_log_file():
    error = IncompleteLogFileError("offsets/3")
    assert str(error).startswith("offsets/3: ")
    assert "Incomplete log file" in str(error)


def test_unsupported_version_error_names_both_versions():
    error = UnsupportedVersionError("offsets/25", found=9, supported=2)
    assert str(error) == "offsets/25: log version v9 is newer than the supported v2"
    assert (error.found, error.supported) == (9, 2)


@pytest.mark.parametrize(
    "error_class", [StorageError, MissingFileError, PathNotAllowedError], ids=lambda cls: cls.__name__
)
def test_path_and_reason_errors_start_with_the_path(error_class):
    error = error_class("offsets/3", "permission denied")
    assert str(error) == "offsets/3: permission denied"
    assert (error.path, error.reason) == ("offsets/3", "permission denied")


@pytest.mark.parametrize(
    ("error_class", "parent"),
    [
        (CorruptFileError, CheckpointError),
        (TruncatedFileError, CorruptFileError),
        (IncompleteLogFileError, CorruptFileError),
        (UnsupportedVersionError, CheckpointError),
        (StorageError, CheckpointError),
        (MissingFileError, StorageError),
        (PathNotAllowedError, CheckpointError),
    ],
    ids=lambda cls: cls.__name__,
)
def test_error_hierarchy_matches_the_architecture_document(error_class, parent):
    assert issubclass(error_class, parent)


@pytest.mark.parametrize(
    "error",
    [
        CorruptFileError("offsets/1", "line 2: invalid JSON", offset=3),
        TruncatedFileError("state/0/0/1.delta", "ends inside a record"),
        IncompleteLogFileError("commits/4"),
        UnsupportedVersionError("offsets/9", found=9, supported=2),
        StorageError("offsets", "cannot list the directory"),
        MissingFileError("commits/7", "no such file"),
        PathNotAllowedError("state/0/0", "the file is a symbolic link to a place outside the allowed roots"),
        UnsupportedCodecError("state/0/0/1.delta", codec="snappy"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_every_error_crosses_a_process_boundary_whole(error):
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.__dict__) == (type(error), str(error), error.__dict__)
