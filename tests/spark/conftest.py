"""Fixtures of the tests that start real PySpark (marked `spark`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """A quiet local[1] SparkSession, started on first use and stopped at the end of the run.

    For reading checkpoints through Spark's own classes (`pipelines.spark_report`); tests that run
    streaming queries start their own process instead (`python -m pipelines.generate_fixtures`).
    """
    from pipelines.queries import build_session

    session = build_session("ckptweb-tests", master="local[1]")
    yield session
    session.stop()


@pytest.fixture
def listener(spark, live_server, pipeline_token, tmp_path):
    """The shipped progress listener on the session, posting to the live ckptweb; removed and drained after."""
    from pipelines.progress_listener import CkptwebProgressListener

    listener = CkptwebProgressListener(live_server.url, pipeline_token, spool_dir=tmp_path / "spool")
    spark.streams.addListener(listener)
    yield listener
    spark.streams.removeListener(listener)
    listener.close(timeout_seconds=30)


@pytest.fixture
def promtool() -> str:
    """Debian's promtool, which evaluates the shipped alert rules (tests/spark/health_views.py)."""
    import shutil

    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: .ci/system-packages installs Debian's prometheus package")
    return path
