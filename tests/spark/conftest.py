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
