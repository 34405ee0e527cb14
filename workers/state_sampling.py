"""Decode sample rows of one state partition, on request from the partition page.

The web process never reads storage: the page creates a StateSample row and queues this; the
worker lists the partition's directory, finds the store's schema, rebuilds the map at the
requested version and stores up to SAMPLE_ROWS decoded rows (or the reason it could not).
"""

from __future__ import annotations

import base64
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from dashboards.models import StateSample
from workers.checkpoint.errors import CheckpointError, MissingFileError
from workers.checkpoint.rocksdbloadchain import state_unique_ids_by_version
from workers.checkpoint.sparktypes import simple_string
from workers.checkpoint.statecolumns import column_names
from workers.checkpoint.stateinventory import DEFAULT_STORE_NAME, StateFileInfo, StateStoreDir
from workers.checkpoint.statesample import sample_state_rows, versions_on_storage
from workers.checkpoint.stateschema import find_store_schema
from workers.checkpoint.statesummary import state_conf
from workers.state_partitions import stored_state_commits
from workers.storage_options import open_storage

SAMPLE_ROWS = 50


def take_state_sample(sample_id: int) -> StateSample | None:
    """Fill in the sample's rows, files and schemas, or its error; None when the row is gone."""
    sample = StateSample.objects.select_related("partition__checkpoint").filter(pk=sample_id).first()
    if sample is None:
        return None
    try:
        _decode_into(sample)
    except CheckpointError as exc:
        sample.error = str(exc)
    sample.finished_at = timezone.now()
    sample.save()
    return sample


def _decode_into(sample: StateSample) -> None:
    partition = sample.partition
    checkpoint = partition.checkpoint
    storage = open_storage(checkpoint.url)
    entries = storage.list_dir(partition.path)
    sample.files = [[info.name, info.size] for info in entries if not info.is_dir]
    if partition.load_bytes and partition.load_bytes > settings.STATE_ROWS_MAX_BYTES:
        raise CheckpointError(
            partition.path, f"not decoded: loading it reads {partition.load_bytes} bytes (CKPTWEB_STATE_ROWS_MAX_BYTES)"
        )
    schema = find_store_schema(storage, partition.operator, partition.store)
    if schema is None:
        raise CheckpointError(partition.path, "no state schema file: Spark wrote none (before 3.1) or not yet")
    sample.key_schema, sample.value_schema = simple_string(schema.key_schema), simple_string(schema.value_schema)
    sample.columns = {"key": column_names(schema.key_schema), "value": column_names(schema.value_schema)}
    conf = state_conf(checkpoint.batches.latest_conf())
    store_dir = StateStoreDir(
        partition.operator,
        partition.partition,
        partition.store,
        partition.path,
        tuple(StateFileInfo(info.name, info.size, info.is_dir) for info in entries),
    )

    def decode(version: int) -> list:
        return sample_state_rows(
            storage,
            store_dir,
            version,
            limit=SAMPLE_ROWS,
            key_schema=schema.key_schema,
            value_schema=schema.value_schema,
            codec=conf.codec,
            row_checksum=conf.row_checksum,
            unique_id=_state_unique_id(partition, version),
            max_read_bytes=settings.STATE_ROWS_MAX_BYTES,
        )

    try:
        rows = decode(sample.version)
    except MissingFileError as gone:
        requested, sample.version = (
            sample.version,
            _newest_committed_version(store_dir, sample.version, checkpoint.latest_committed_batch_id, gone),
        )
        rows = decode(sample.version)
        sample.note = (
            f"Version {requested}, the newest the last sync knew of, was cleaned up by Spark's maintenance "
            f"({gone}); these rows are of version {sample.version} (after batch {sample.version - 1}), "
            "the newest committed version on storage."
        )
    sample.rows = [{"key": _json_ready(row.key), "value": _json_ready(row.value)} for row in rows]


def _newest_committed_version(
    store_dir: StateStoreDir, requested: int, latest_committed_batch_id: int | None, gone: MissingFileError
) -> int:
    """The newest version after ``requested`` that is on storage and whose batch the syncs stored
    as committed (batch N commits version N + 1; a RocksDB format-2 version needs its commit's
    unique id); raises when there is none."""
    committed = -1 if latest_committed_batch_id is None else latest_committed_batch_id + 1
    newer = [v for v in versions_on_storage(store_dir) if requested < v <= committed]
    if not newer:
        raise CheckpointError(
            store_dir.path,
            f"version {requested} was cleaned up by Spark's maintenance ({gone}) and no newer committed "
            "version is on storage yet: sync the checkpoint, then decode again",
        )
    return newer[-1]


def _state_unique_id(partition, version: int) -> str | None:
    """The unique id of a RocksDB checkpoint-format-2 version, from the stored commit log.

    The commit log lists each partition's store ids in store order: only the default store's
    place is certain (as in statesummary); other stores use the only id their files carry.
    """
    if partition.store != DEFAULT_STORE_NAME:
        return None
    commits = stored_state_commits(partition.checkpoint)
    return state_unique_ids_by_version(commits, operator=partition.operator, partition=partition.partition).get(version)


def _json_ready(value: Any) -> Any:
    """Decoded UnsafeRow values as JSON: times as ISO-8601, decimals as text, bytes as base64."""
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return value
