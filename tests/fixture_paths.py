"""Where the real checkpoints used by the tests live."""
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
OUR_FIXTURES = REPO_DIR / "tests" / "fixtures"
SPARK_TEST_RESOURCES = REPO_DIR.parent / "shared" / "fixtures" / "spark-test-resources"


def our_fixture_checkpoints() -> list[Path]:
    """Checkpoints written by PySpark through pipelines/generate_fixtures.py, committed in the repo."""
    return sorted(path.parent for path in OUR_FIXTURES.glob("*/checkpoint/offsets"))


def shared_fixture_checkpoints() -> list[Path]:
    """Old-version checkpoints from Spark's own test resources that have an offset log."""
    return sorted(path.parent for path in SPARK_TEST_RESOURCES.glob("*/offsets"))
