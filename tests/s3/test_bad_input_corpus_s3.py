"""The malformed-file corpus read from S3 (moto's server) gives what it gives read from disk.

An object store answers some reads differently from a disk (a range read of an empty object is a
416, not b""), so every corpus file that can live on S3 is read both ways and the outcomes, the
value read or the error's class and message, must be equal. Left out: the cases laid out with
symbolic links or file modes (S3 has neither) and the two 100 MB lines (the local corpus test
reads those).
"""

from __future__ import annotations

import pytest

from bad_input_corpus import BadFile, bad_input_corpus, write_corpus_file
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

from .conftest import bucket_at

BUCKET = "corpus"
ON_S3 = [
    bad for bad in bad_input_corpus() if bad.place is None and not bad.needs_non_root and bad.category != "enormous"
]


@pytest.fixture(scope="module")
def corpus_bucket(moto_endpoint):
    with pytest.MonkeyPatch.context() as patch, bucket_at(moto_endpoint, BUCKET, patch) as client:
        yield client


def _outcome(read, storage: CheckpointStorage) -> tuple[str, str]:
    try:
        return "read", repr(read(storage))
    except CheckpointError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("bad", [pytest.param(bad, id=bad.id) for bad in ON_S3])
def test_each_malformed_file_on_s3_reads_as_it_does_on_disk(bad: BadFile, corpus_bucket, moto_endpoint, tmp_path):
    written = write_corpus_file(bad, tmp_path)
    prefix = bad.id.replace("/", "__")
    for path in written.root.rglob("*"):
        if path.is_file():
            corpus_bucket.put_object(
                Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(written.root).as_posix()}", Body=path.read_bytes()
            )
    remote = CheckpointStorage(
        f"s3://{BUCKET}/{prefix}", allowed_roots=[f"s3://{BUCKET}"], storage_options={"endpoint_url": moto_endpoint}
    )

    on_disk = _outcome(written.read, CheckpointStorage(str(written.root), allowed_roots=[str(written.allowed_root)]))
    assert _outcome(written.read, remote) == on_disk
