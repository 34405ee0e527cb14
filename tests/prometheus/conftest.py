"""Debian's prometheus and promtool for the tests in this folder (installed by .ci/system-packages).

Without them the tests skip on a developer's machine and fail in CI (CI=true), where a skip
would hide that the install step is missing.
"""

from __future__ import annotations

import os
import shutil

import pytest


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed: .ci/system-packages installs Debian's prometheus package"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def prometheus_binary() -> str:
    return _binary("prometheus")


@pytest.fixture
def promtool() -> str:
    return _binary("promtool")
