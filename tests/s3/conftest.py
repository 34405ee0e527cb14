"""An S3 endpoint on loopback: moto's server mode, which speaks the real S3 protocol over HTTP."""
from __future__ import annotations

import boto3
import pytest
from moto.server import ThreadedMotoServer
from worker_process import free_port

BUCKET = "ckpt"


@pytest.fixture(scope="session")
def moto_endpoint() -> str:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(moto_endpoint, checkpoint_roots, monkeypatch, settings):
    """An empty bucket, allowed as a checkpoint root; credentials only in the environment, as boto reads them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    settings.S3_ENDPOINT_URL = moto_endpoint
    settings.CHECKPOINT_ROOTS = [*settings.CHECKPOINT_ROOTS, f"s3://{BUCKET}"]
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)
