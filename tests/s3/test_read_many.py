"""CheckpointStorage.read_many on S3 (moto's server, each request delayed): the results, errors and
counts of one read_bytes per file, with several GETs in flight."""

from __future__ import annotations

import errno

import boto3
import pytest

from bench.s3_server import DelayedS3Server
from workers.checkpoint.errors import CorruptFileError, MissingFileError, PathNotAllowedError
from workers.checkpoint.readahead import ReadAhead, read_ahead
from workers.checkpoint.storage.checkpointstorage import REMOTE_READS_IN_FLIGHT, CheckpointStorage

from .conftest import bucket_at

BUCKET = "reads"
FILES = {f"q/offsets/{n}": f'v1\n{{"batch":{n}}}\n'.encode() * (n + 1) for n in range(40)}


@pytest.fixture(scope="module")
def delayed_s3():
    server = DelayedS3Server(delay_seconds=0.02).start()
    with pytest.MonkeyPatch.context() as patch, bucket_at(server.endpoint, BUCKET, patch) as client:
        for key, body in FILES.items():
            client.put_object(Bucket=BUCKET, Key=key, Body=body)
        yield server
    server.stop()


def _storage(server: DelayedS3Server) -> CheckpointStorage:
    # A new client each time: s3fs caches filesystem instances by their options.
    return CheckpointStorage(
        f"s3://{BUCKET}/q",
        storage_options={
            "endpoint_url": server.endpoint,
            "skip_instance_cache": True,
            "config_kwargs": {"max_pool_connections": REMOTE_READS_IN_FLIGHT},
        },
    )


def _described(result) -> tuple:
    return (type(result).__name__, str(result)) if isinstance(result, Exception) else ("bytes", result)


def test_read_many_gives_what_read_bytes_gives_file_by_file(delayed_s3):
    names = [*(f"offsets/{n}" for n in range(40)), "offsets/99", "offsets/../x"]
    together, one_by_one = _storage(delayed_s3), _storage(delayed_s3)
    assert together.reads_concurrently

    results = together.read_many(names, max_bytes=300)
    expected = {}
    for name in names:
        try:
            expected[name] = one_by_one.read_bytes(name, max_bytes=300)
        except (MissingFileError, CorruptFileError, PathNotAllowedError) as exc:
            expected[name] = exc

    assert {name: _described(result) for name, result in results.items()} == {
        name: _described(result) for name, result in expected.items()
    }
    # The file sizes grow with n: the small ones are read whole, the rest refused, by name.
    assert results["offsets/0"] == FILES["q/offsets/0"]
    assert isinstance(results["offsets/39"], CorruptFileError)
    assert isinstance(results["offsets/99"], MissingFileError)
    assert str(results["offsets/99"]) == "offsets/99: no such file"
    assert isinstance(results["offsets/../x"], PathNotAllowedError)
    assert together.calls.as_dict() == one_by_one.calls.as_dict()


def test_read_many_keeps_several_gets_in_flight_and_no_more_than_its_limit(delayed_s3):
    storage = _storage(delayed_s3)
    storage.list_dir("offsets")  # the client's first call sets up its session alone
    delayed_s3.reset_counts()
    results = storage.read_many([f"offsets/{n}" for n in range(40)], max_bytes=None)
    assert [results[f"offsets/{n}"] for n in range(40)] == list(FILES.values())
    assert delayed_s3.requests == 40
    assert 2 <= delayed_s3.max_in_flight <= REMOTE_READS_IN_FLIGHT


def test_a_read_ahead_serves_each_file_once_then_reads_from_storage(delayed_s3):
    storage = _storage(delayed_s3)
    source = read_ahead(storage, ["offsets/1", "offsets/98"])
    assert isinstance(source, ReadAhead) and len(source) == 2
    assert source.read_bytes("offsets/1") == FILES["q/offsets/1"]
    with pytest.raises(MissingFileError, match="^offsets/98: no such file$"):
        source.read_bytes("offsets/98")
    assert len(source) == 0
    reads = storage.calls.read
    assert source.read_bytes("offsets/1") == FILES["q/offsets/1"]  # read again, from storage
    assert storage.calls.read == reads + 1


def test_a_local_storage_reads_nothing_ahead(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_bytes(b"v1\n")
    storage = CheckpointStorage(str(tmp_path))
    assert not storage.reads_concurrently
    assert read_ahead(storage, ["offsets/0"]) is storage
    assert storage.calls.read == 0
    assert storage.read_many(["offsets/0", "offsets/1"])["offsets/0"] == b"v1\n"
    assert isinstance(storage.read_many(["offsets/1"])["offsets/1"], MissingFileError)


def test_an_empty_object_and_a_range_past_the_end_read_as_empty_as_on_disk(delayed_s3, tmp_path):
    # S3 answers a range starting at or past an object's end with 416; on disk such a read is b"".
    boto3.client("s3", endpoint_url=delayed_s3.endpoint, region_name="us-east-1").put_object(
        Bucket=BUCKET, Key="q/commits/0", Body=b""
    )
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_bytes(b"")
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "2").write_bytes(FILES["q/offsets/2"])
    remote, local = _storage(delayed_s3), CheckpointStorage(str(tmp_path))
    size = len(FILES["q/offsets/2"])
    for storage in (remote, local):
        assert storage.read_bytes("commits/0") == b""
        assert storage.read_many(["commits/0"]) == {"commits/0": b""}
        assert storage.read_range("offsets/2", size) == b""
        assert storage.read_range("offsets/2", size + 10) == b""
        assert storage.read_range("offsets/2", size - 3) == FILES["q/offsets/2"][-3:]
        with pytest.raises(MissingFileError):
            storage.read_range("commits/9", 5)


def test_while_the_store_is_unreachable_each_file_is_a_storage_error_and_nothing_more_is_asked(delayed_s3):
    from worker_process import free_port

    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    storage = CheckpointStorage(
        f"s3://{BUCKET}/q",
        storage_options={
            "endpoint_url": nobody,
            "skip_instance_cache": True,
            "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}},
        },
    )
    results = storage.read_many(["offsets/0", "offsets/1"])
    assert {type(result).__name__ for result in results.values()} == {"StorageError"}
    assert all(str(result).startswith(f"{name}: cannot read the file") for name, result in results.items())
    assert (storage.calls.read, storage.calls.info) == (2, 0)


def test_a_denied_read_is_a_storage_error_without_asking_for_the_size(delayed_s3, monkeypatch):
    # Denied is an OSError too (EACCES), but not the one a range past the end gives (EINVAL).
    storage = _storage(delayed_s3)
    denied = PermissionError(errno.EACCES, "Access Denied")
    monkeypatch.setattr(storage._fs, "cat_ranges", lambda paths, *args, **kwargs: [denied for _ in paths])
    results = storage.read_many(["offsets/0"])
    assert str(results["offsets/0"]) == "offsets/0: cannot read the file: permission denied"
    assert (storage.calls.read, storage.calls.info) == (1, 0)
