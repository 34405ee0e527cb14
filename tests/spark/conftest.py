"""Fixtures of the tests that start real PySpark (marked `spark`)."""

from __future__ import annotations

import logging

import pytest

# py4j logs at INFO from __del__ while the interpreter shuts down, after pytest closed the stream.
logging.getLogger("py4j").setLevel(logging.WARNING)


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
