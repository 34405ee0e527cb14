"""bench.s3_server.S3ServerProcess: moto in a process of its own (bench/periodic_calls.py), whose
request counts by kind are read over HTTP and reset, as the in-process server's are."""

from __future__ import annotations

import boto3
import pytest

from bench.s3_server import S3ServerProcess

from .conftest import TEST_CREDENTIALS


def test_the_server_process_counts_each_kind_of_request_and_resets_its_counts(monkeypatch):
    for name, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    server = S3ServerProcess()
    try:
        client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="counted")
        server.reset_counts()
        client.put_object(Bucket="counted", Key="a/1", Body=b"x")
        client.get_object(Bucket="counted", Key="a/1")["Body"].read()
        client.head_object(Bucket="counted", Key="a/1")
        client.list_objects_v2(Bucket="counted", Prefix="a/")
        with pytest.raises(client.exceptions.ClientError):
            client.head_object(Bucket="counted", Key="a/2")

        assert server.requests_by_kind == {"PUT": 1, "GET": 1, "HEAD": 2, "LIST": 1}
        server.reset_counts()
        assert server.requests_by_kind == {}
    finally:
        server.stop()
