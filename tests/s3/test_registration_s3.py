"""Registering a checkpoint on S3 (moto's server mode): the same refusals as on disk, and a store that
cannot be asked refuses the form with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboards.registry.forms import CheckpointForm
from fixture_paths import OUR_FIXTURES

from .conftest import BUCKET

pytestmark = pytest.mark.django_db

SINK_FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink"


def _upload(client, directory: Path, prefix: str) -> None:
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            client.put_object(
                Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(directory).as_posix()}", Body=path.read_bytes()
            )


def _errors(url: str, sink: str = "") -> dict[str, list[str]]:
    form = CheckpointForm(
        {"name": "q", "url": url, "sink_log_url": sink, "is_enabled": True, "sync_interval_seconds": 30}
    )
    form.is_valid()
    return dict(form.errors)


@pytest.fixture
def uploaded(s3_bucket) -> str:
    _upload(s3_bucket, SINK_FIXTURE, "q")
    return f"s3://{BUCKET}/q"


def test_a_checkpoint_on_s3_is_accepted_with_its_sink_given_either_way(uploaded):
    assert _errors(f"{uploaded}/checkpoint", f"{uploaded}/output") == {}
    assert _errors(f"{uploaded}/checkpoint", f"{uploaded}/output/_spark_metadata") == {}


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("typo", "no such file or folder"),
        ("checkpoint/metadata", "this is a file, not a checkpoint folder"),
        ("output", "this is a file sink's output (it holds _spark_metadata), not its checkpoint"),
    ],
)
def test_a_path_on_s3_holding_no_checkpoint_is_refused_naming_it(uploaded, path, reason):
    [message] = _errors(f"{uploaded}/{path}")["url"]
    assert message.startswith(f"{uploaded}/{path}: {reason}")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("typo", "no such folder"),
        ("checkpoint/metadata", "this is a file"),
        ("checkpoint", "no _spark_metadata folder here"),
    ],
)
def test_a_sink_path_on_s3_holding_no_sink_log_is_refused_naming_it(uploaded, path, reason):
    [message] = _errors(f"{uploaded}/checkpoint", f"{uploaded}/{path}")["sink_log_url"]
    assert message.startswith(f"{uploaded}/{path}: {reason}")


def test_a_store_that_cannot_be_reached_refuses_the_form_with_the_reason(uploaded, settings):
    settings.S3_ENDPOINT_URL = "http://127.0.0.1:9"  # discard port: nothing answers
    [message] = _errors(f"{uploaded}/checkpoint")["url"]
    assert message.startswith(f"{uploaded}/checkpoint: cannot be checked: .: cannot list the directory: ")
