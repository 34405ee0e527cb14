"""An S3 endpoint on loopback: moto's server mode, which speaks the real S3 protocol over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import boto3
import pytest

from bench.s3_server import DelayedS3Server

BUCKET = "ckpt"


@pytest.fixture(scope="session")
def moto_server() -> DelayedS3Server:
    """moto's server, answering at once unless a test sets ``delay_seconds`` (then it must reset it)."""
    server = DelayedS3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_endpoint(moto_server) -> str:
    return moto_server.endpoint


TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def bucket_at(endpoint: str, bucket: str, patch: pytest.MonkeyPatch) -> Iterator:
    """A new bucket (its boto3 client), with credentials only in the environment, as boto reads them;
    emptied and deleted afterwards."""
    for name, value in TEST_CREDENTIALS.items():
        patch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    try:
        yield client
    finally:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:  # up to 1,000 a page, one request each
                client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        client.delete_bucket(Bucket=bucket)


@pytest.fixture
def s3_bucket(moto_endpoint, checkpoint_roots, monkeypatch, settings):
    """An empty bucket, allowed as a checkpoint root."""
    settings.S3_ENDPOINT_URL = moto_endpoint
    settings.CHECKPOINT_ROOTS = [*settings.CHECKPOINT_ROOTS, f"s3://{BUCKET}"]
    with bucket_at(moto_endpoint, BUCKET, monkeypatch) as client:
        yield client
