"""Where the real checkpoints used by the tests live."""

import os
import subprocess
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
OUR_FIXTURES = REPO_DIR / "tests" / "fixtures"
# A PySpark run killed before batch 6's commit: checkpoint/ and the spark-report.json of what Spark read back.
KILLED_MID_BATCH = OUR_FIXTURES / "killed_mid_batch"


def _shared_dir() -> Path:
    """The team's shared/ folder: CKPTWEB_SHARED_DIR, else beside the repository, else beside the
    repository this one was cloned from (a fresh clone in a temporary directory, as CI makes)."""
    if os.environ.get("CKPTWEB_SHARED_DIR"):
        return Path(os.environ["CKPTWEB_SHARED_DIR"])
    beside = REPO_DIR.parent / "shared"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(REPO_DIR), "remote", "get-url", "origin"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if origin and Path(origin).is_dir():  # a local origin, not a URL
        return Path(origin).resolve().parent / "shared"
    return beside


SPARK_TEST_RESOURCES = _shared_dir() / "fixtures" / "spark-test-resources"


def our_fixture_checkpoints() -> list[Path]:
    """Checkpoints written by PySpark through pipelines/generate_fixtures.py, committed in the repo."""
    return sorted(path.parent for path in OUR_FIXTURES.glob("*/checkpoint/offsets"))


def shared_fixture_checkpoints() -> list[Path]:
    """Old-version checkpoints from Spark's own test resources that have an offset log."""
    return sorted(path.parent for path in SPARK_TEST_RESOURCES.glob("*/offsets"))
