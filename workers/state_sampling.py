"""Decode sample rows of one state partition, on request from the partition page.

The web process never reads storage: the page creates a StateSample row and queues this; the
worker lists the partition's directory, finds the store's schema, rebuilds the map at the
requested version and stores up to SAMPLE_ROWS decoded rows (or the reason it could not).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from types import SimpleNamespace
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
from workers.checkpoint.statevariablerows import ENCODING_FORMAT_CONF, sample_state_variable_rows, undecoded_reason
from workers.checkpoint.statevariables import read_state_variables, read_writer_schemas
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
    storage = open_storage(partition.checkpoint.url)
    entries = storage.list_dir(partition.path)
    sample.files = [[info.name, info.size] for info in entries if not info.is_dir]
    if partition.load_bytes and partition.load_bytes > settings.STATE_ROWS_MAX_BYTES:
        raise CheckpointError(
            partition.path, f"not decoded: loading it reads {partition.load_bytes} bytes (CKPTWEB_STATE_ROWS_MAX_BYTES)"
        )
    store_dir = _store_dir_of(partition, entries)
    rows = _decode_committed_version(sample, store_dir, _decoder(sample, storage, store_dir))
    sample.rows = [{"key": _json_ready(row.key), "value": _json_ready(row.value)} for row in rows]


def _store_dir_of(partition, entries) -> StateStoreDir:
    """The partition's store directory as the library describes it, from the listing just made."""
    return StateStoreDir(
        partition.operator,
        partition.partition,
        partition.store,
        partition.path,
        tuple(StateFileInfo(info.name, info.size, info.is_dir) for info in entries),
    )


def _decoder(sample: StateSample, storage, store_dir: StateStoreDir) -> Callable[[int], list]:
    """The decoder of the partition's rows: by state variable, or with the store's one schema."""
    latest_conf = sample.partition.checkpoint.batches.latest_conf()
    conf = state_conf(latest_conf)
    if sample.partition.variables:
        return _variable_decoder(sample, storage, store_dir, conf.codec, latest_conf.get(ENCODING_FORMAT_CONF))
    return _store_decoder(sample, storage, store_dir, conf)


def _decode_committed_version(sample: StateSample, store_dir: StateStoreDir, decode: Callable[[int], list]) -> list:
    """The rows of ``sample.version``, or of the newest committed version when Spark cleaned that one up."""
    try:
        return decode(sample.version)
    except MissingFileError as gone:
        latest_committed = sample.partition.checkpoint.latest_committed_batch_id
        requested, sample.version = (
            sample.version,
            _newest_committed_version(store_dir, sample.version, latest_committed, gone),
        )
        rows = decode(sample.version)
        cleaned_up = (
            f"Version {requested}, the newest the last sync knew of, was cleaned up by Spark's maintenance "
            f"({gone}); these rows are of version {sample.version} (after batch {sample.version - 1}), "
            "the newest committed version on storage."
        )
        sample.note = " ".join(filter(None, (cleaned_up, sample.note)))
        return rows


def _store_decoder(sample: StateSample, storage, store_dir: StateStoreDir, conf) -> Callable[[int], list]:
    """Rows of a store without column families, decoded with its one key and value schema."""
    partition = sample.partition
    schema = _store_schema(sample, storage)

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

    return decode


def _store_schema(sample: StateSample, storage):
    """The store's key and value schema, also written into the sample (as text and as columns)."""
    partition = sample.partition
    schema = find_store_schema(storage, partition.operator, partition.store)
    if schema is None:
        raise CheckpointError(partition.path, "no state schema file: Spark wrote none (before 3.1) or not yet")
    sample.key_schema, sample.value_schema = simple_string(schema.key_schema), simple_string(schema.value_schema)
    sample.columns = {"key": column_names(schema.key_schema), "value": column_names(schema.value_schema)}
    return schema


def _variable_decoder(
    sample: StateSample, storage, store_dir: StateStoreDir, codec: str | None, encoding: str | None
) -> Callable[[int], list]:
    """Rows of a transformWithState store: up to SAMPLE_ROWS over its variables (timers and TTL
    indexes included, ``default`` left out), one column for the variable, its grouping key, a
    MapState's user key and the value (a ListState's as the list)."""
    partition = sample.partition
    variables = _decodable_variables(sample, storage)
    read_rows = _variable_rows_reader(storage, store_dir, partition, codec=codec, encoding=encoding)
    sample.columns = {"key": ["variable", "key"], "value": ["user key", "value"]}

    def decode(version: int) -> list:
        rows: list[SimpleNamespace] = []
        for variable in variables:
            if len(rows) >= SAMPLE_ROWS:
                break
            unique_id = _state_unique_id(partition, version)
            decoded = read_rows(version, variable, limit=SAMPLE_ROWS - len(rows), unique_id=unique_id)
            rows.extend(_variable_row(variable, row) for row in decoded)
        return rows

    return decode


def _variable_rows_reader(storage, store_dir: StateStoreDir, partition, *, codec: str | None, encoding: str | None):
    """``sample_state_variable_rows`` of this store, with what stays the same at every version."""
    return partial(
        sample_state_variable_rows,
        storage,
        store_dir,
        codec=codec,
        encoding=encoding,
        writer_schemas=read_writer_schemas(storage, partition.operator, partition.store),
        max_read_bytes=settings.STATE_ROWS_MAX_BYTES,
    )


def _decodable_variables(sample: StateSample, storage) -> list:
    """The store's state variables but ``default``, less those that cannot be decoded (the sample's
    note says why)."""
    partition = sample.partition
    described = [v for v in read_state_variables(storage, partition.operator, partition.store) if v.kind != "default"]
    sample.note = "; ".join(reason for v in described if (reason := undecoded_reason(v)) is not None)
    return [v for v in described if undecoded_reason(v) is None]


def _variable_row(variable, row) -> SimpleNamespace:
    """One sample row: the variable and its grouping key, and a MapState's user key and the value."""
    return SimpleNamespace(
        key={"variable": variable.name, "key": row.key},
        value={"user key": row.user_key, "value": row.value},
    )


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
    """Decoded state values as JSON: times as ISO-8601, decimals as text, bytes as base64."""
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
