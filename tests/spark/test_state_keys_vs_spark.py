"""Our state schema and UnsafeRow readers against Spark 4.3.0 itself (real PySpark, marked spark).

* Rows: for every HDFS-backed store of the fixtures, and for a query whose keys and values use
  every type we decode, the rows we rebuild and decode equal what ``spark.read.format("statestore")``
  returns for the same operator, store, partition and batch.
* Schema files v1, v2 (long enough to be chunked) and v3, and operator metadata v2, which no
  fixture holds: Spark's own writers (SchemaHelper, OperatorStateMetadataV2Writer, through py4j)
  write them into a temp dir, and we must read back what Spark's reader reads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from py4j.java_gateway import JavaClass
from pyspark.sql import functions as F

from fixture_paths import OUR_FIXTURES
from spark_state_rows import comparable_rows, spark_rows
from workers.checkpoint.logdir import list_batch_ids, read_offset_seq
from workers.checkpoint.sparktypes import simple_string
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesample import sample_state_rows
from workers.checkpoint.stateschema import (
    find_store_schema,
    parse_operator_state_metadata,
    parse_state_schema_file,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

HDFS_FIXTURES = (
    "windowed_agg_file_sink",
    "file_source_dedup",
    "stream_stream_join",
    "killed_mid_batch",
    "hdfs_zstd_row_checksum",
)
STATE_PACKAGE = "org.apache.spark.sql.execution.streaming.state."
ALL_ROWS = 1_000_000


def _our_rows(storage, store_dir, version: int) -> list:
    conf = read_offset_seq(storage, list_batch_ids(storage, "offsets")[-1]).metadata.conf
    schema = find_store_schema(storage, store_dir.operator, store_dir.store)
    rows = sample_state_rows(
        storage,
        store_dir,
        version,
        limit=ALL_ROWS,
        key_schema=schema.key_schema,
        value_schema=schema.value_schema,
        codec=conf.get("spark.sql.streaming.stateStore.compression.codec"),
        row_checksum=conf.get("spark.sql.streaming.stateStore.rowChecksum.enabled") == "true",
    )
    return comparable_rows(rows, schema)


def _read_state(spark, checkpoint: Path, batch_id: int, store: str):
    reader = spark.read.format("statestore").option("batchId", batch_id).option("operatorId", 0)
    return reader.option("storeName", store).load(str(checkpoint))


def _assert_same_rows_as_spark(spark, checkpoint: Path, batch_id: int) -> int:
    """Compare every store and partition at the state version batch ``batch_id`` committed."""
    storage = CheckpointStorage(str(checkpoint))
    compared = 0
    for store_dir in list_state_store_dirs(storage):
        frame = _read_state(spark, checkpoint, batch_id, store_dir.store)
        expected = spark_rows(frame, store_dir.partition)
        assert _our_rows(storage, store_dir, batch_id + 1) == expected, store_dir.path
        compared += len(expected)
    return compared


@pytest.mark.parametrize("fixture", HDFS_FIXTURES)
def test_decoded_fixture_state_equals_what_sparks_state_reader_returns(spark, fixture, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / fixture / "checkpoint", checkpoint)
    last_commit = list_batch_ids(CheckpointStorage(str(checkpoint)), "commits")[-1]

    assert _assert_same_rows_as_spark(spark, checkpoint, last_commit) > 0
    assert _assert_same_rows_as_spark(spark, checkpoint, last_commit - 1) > 0


# --- a query whose state holds every type the decoder knows ------------------------------------


def _every_type_columns():
    v = F.col("value")
    return [
        (v % 2 == 0).alias("k_bool"),
        (v % 3 - 1).cast("byte").alias("k_byte"),
        (v - 2).cast("short").alias("k_short"),
        (v * -1000).cast("int").alias("k_int"),
        F.date_add(F.lit("2024-02-28").cast("date"), v.cast("int")).alias("k_date"),
        (
            F.lit("2024-01-01 00:00:00").cast("timestamp_ntz") + F.make_dt_interval(v, F.lit(0), F.lit(0), F.lit(0.5))
        ).alias("k_ts_ntz"),
        (v / 3).cast("decimal(10,2)").alias("k_dec"),
        (F.lit("12345678901234567890.123456789").cast("decimal(38,9)") * (v - 3))
        .cast("decimal(38,9)")
        .alias("k_wide_dec"),
        (v / 7).cast("float").alias("k_float"),
        (v / 7).cast("double").alias("k_double"),
        F.concat(F.lit("é\u0000😀"), v.cast("string")).alias("k_str"),
        F.concat(F.lit("b"), v.cast("string")).cast("binary").alias("k_bin"),
        F.struct(v.alias("n"), F.when(v % 2 == 0, F.lit("even")).alias("s")).alias("k_struct"),
        F.array(v, F.when(v % 3 == 0, v), v + 1).alias("k_arr"),
        F.array(F.lit("x"), F.when(v % 2 == 1, v.cast("string"))).alias("k_str_arr"),
        F.make_dt_interval(v, F.lit(1), F.lit(2), F.lit(3.25)).alias("k_dt_interval"),
        F.expr("make_ym_interval(0, cast(value as int))").cast("interval month").alias("k_ym_interval"),
        F.col("timestamp").alias("k_ts"),
        v,
    ]


def _run_every_type_query(spark, checkpoint: Path) -> None:
    # Two state partitions, not the default 200: the machine is small and shared.
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    events = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 6).load()
    columns = events.select(*_every_type_columns())
    v = F.col("value")
    aggregated = columns.groupBy(*[c for c in columns.columns if c.startswith("k_")]).agg(
        F.first(F.create_map(v.cast("string"), F.array(v, F.lit(None).cast("long")))).alias("first_map"),
        F.sum((v / 3).cast("decimal(20,4)")).alias("dec_sum"),
        F.max(F.struct(v, F.array(F.struct(v.alias("x"))))).alias("max_struct"),
        F.first(F.when(v % 2 == 1, v)).alias("maybe_null"),
    )
    query = (
        aggregated.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")


def test_every_decoded_type_and_its_schema_equal_what_sparks_state_reader_returns(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    _run_every_type_query(spark, checkpoint)
    storage = CheckpointStorage(str(checkpoint))
    frame = _read_state(spark, checkpoint, 0, "default")
    schema = find_store_schema(storage, 0)

    assert simple_string(schema.key_schema) == frame.schema["key"].dataType.simpleString()
    assert simple_string(schema.value_schema) == frame.schema["value"].dataType.simpleString()
    # PySpark cannot collect year-month intervals; months as a long are what we decode.
    frame = frame.withColumn("key", F.col("key").withField("k_ym_interval", F.col("key.k_ym_interval").cast("long")))
    compared = 0
    for store_dir in list_state_store_dirs(storage):
        expected = spark_rows(frame, store_dir.partition)
        assert _our_rows(storage, store_dir, 1) == expected
        compared += len(expected)
    assert compared == 6


# --- schema and operator metadata files written by Spark's own writers -------------------------


def _jvm_class(spark, name: str) -> JavaClass:
    return JavaClass(STATE_PACKAGE + name, spark.sparkContext._gateway._gateway_client)


def _struct(spark, json_text: str):
    return spark._jvm.org.apache.spark.sql.types.DataType.fromJson(json_text)


def _scala_list(spark, items):
    java_list = spark._jvm.java.util.ArrayList()
    for item in items:
        java_list.add(item)
    return spark._jvm.scala.jdk.javaapi.CollectionConverters.asScala(java_list).toList()


def _local_fs(spark):
    conf = spark._jsc.hadoopConfiguration()
    return spark._jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getRawFileSystem()


def _write_schema_file(spark, writer_class: str, families, path: Path) -> None:
    out = _local_fs(spark).create(spark._jvm.org.apache.hadoop.fs.Path(str(path)))
    _jvm_class(spark, f"SchemaHelper${writer_class}")().write(_scala_list(spark, families), out)
    out.close()


def _read_back_with_spark(spark, path: Path) -> list:
    """What SchemaHelper's reader returns: per family (name, ids, field names, spec, user key names)."""
    stream = _local_fs(spark).open(spark._jvm.org.apache.hadoop.fs.Path(str(path)))
    reader_factory = getattr(_jvm_class(spark, "SchemaHelper$SchemaReader$"), "MODULE$")
    families = reader_factory.createSchemaReader(stream.readUTF()).read(stream)
    stream.close()
    result = []
    for index in range(families.size()):
        family = families.apply(index)
        spec, user_key = family.keyStateEncoderSpec(), family.userKeyEncoderSchema()
        result.append(
            (
                family.colFamilyName(),
                family.keySchemaId(),
                family.valueSchemaId(),
                list(family.keySchema().fieldNames()),
                list(family.valueSchema().fieldNames()),
                spec.get().json() if spec.isDefined() else None,
                list(user_key.get().fieldNames()) if user_key.isDefined() else None,
            )
        )
    return result


def _as_read_by_us(path: Path) -> list:
    parsed = parse_state_schema_file(path.read_bytes(), source=path.name)
    return [
        (
            f.col_family_name,
            f.key_schema_id,
            f.value_schema_id,
            list(f.key_schema.names),
            list(f.value_schema.names),
            None if f.key_state_encoder_spec is None else json.dumps(f.key_state_encoder_spec, separators=(",", ":")),
            None if f.user_key_encoder_schema is None else list(f.user_key_encoder_schema.names),
        )
        for f in parsed.col_families
    ]


KEY_JSON = (
    '{"type":"struct","fields":[{"name":"k\\u0000é😀","type":"string","nullable":true,"metadata":{}},'
    '{"name":"n","type":"long","nullable":false,"metadata":{}}]}'
)
VALUE_JSON = '{"type":"struct","fields":[{"name":"total","type":"decimal(20,3)","nullable":true,"metadata":{"x":1}}]}'


def _family(spark, name: str, key_id: int, value_id: int, *, with_user_key: bool, key_json: str = KEY_JSON):
    key, value = _struct(spark, key_json), _struct(spark, VALUE_JSON)
    option = spark._jvm.scala.Option
    spec = option.apply(_jvm_class(spark, "NoPrefixKeyStateEncoderSpec")(key))
    user_key = option.apply(value) if with_user_key else option.empty()
    return _jvm_class(spark, "StateStoreColFamilySchema")(name, key_id, key, value_id, value, spec, user_key)


def test_schema_v3_written_by_spark_reads_as_spark_reads_it(spark, tmp_path):
    schema_dir = tmp_path / "state/0/_stateSchema/default"
    schema_dir.mkdir(parents=True)
    path = schema_dir / "2_0d7c5b2e-3f1a-4c4e-9a57-2f4c9a3e1b10"
    families = [
        _family(spark, "countState", 3, 4, with_user_key=True),
        _family(spark, "$ttl_\u0000listState", 0, 0, with_user_key=False),  # NUL -> C0 80 in writeUTF
    ]
    _write_schema_file(spark, "SchemaV3Writer", families, path)
    shutil.copyfile(path, schema_dir / "0_5f0c4d0e-1111-4c4e-9a57-2f4c9a3e1b10")  # an older one

    assert _as_read_by_us(path) == _read_back_with_spark(spark, path)
    found = find_store_schema(CheckpointStorage(str(tmp_path)), 0)
    assert (found.path, found.schema_file.version) == (f"state/0/_stateSchema/default/{path.name}", 3)


def test_schema_v1_written_by_spark_reads_as_spark_reads_it(spark, tmp_path):
    path = tmp_path / "schema"
    _write_schema_file(spark, "SchemaV1Writer", [_family(spark, "default", 0, 0, with_user_key=False)], path)

    assert parse_state_schema_file(path.read_bytes(), source="s").version == 1
    assert _as_read_by_us(path) == _read_back_with_spark(spark, path)


def test_a_chunked_v2_schema_written_by_spark_reads_as_spark_reads_it(spark, tmp_path):
    names = [f"field_{i:04d}_" + "x" * 60 for i in range(1200)]  # 152,400 chars of JSON
    fields = ",".join(f'{{"name":"{n}","type":"long","nullable":true,"metadata":{{}}}}' for n in names)
    key_json = f'{{"type":"struct","fields":[{fields}]}}'
    path = tmp_path / "schema"
    _write_schema_file(
        spark, "SchemaV2Writer", [_family(spark, "default", 0, 0, with_user_key=False, key_json=key_json)], path
    )

    parsed = parse_state_schema_file(path.read_bytes(), source="s")

    assert int.from_bytes(path.read_bytes()[4:8], "big") == 3  # 65535-char chunks of the key schema
    assert list(parsed.col_families[0].key_schema.names) == names
    assert _as_read_by_us(path) == _read_back_with_spark(spark, path)


def test_operator_metadata_v2_written_by_spark_reads_back_field_for_field(spark, tmp_path):
    jvm = spark._jvm
    paths = _scala_list(
        spark, ["file:/ckpt/state/0/_stateSchema/default/0_a", "file:/ckpt/state/0/_stateSchema/default/3_b"]
    )
    store = _jvm_class(spark, "StateStoreMetadataV2")("default", 0, 5, paths)
    stores = spark.sparkContext._gateway.new_array(_jvm_class(spark, "StateStoreMetadataV2"), 1)
    stores[0] = store
    info = _jvm_class(spark, "OperatorInfoV1")(7, "transformWithStateExec")
    properties = '{"timeMode":"NoTime","outputMode":"Update","stateVariables":[{"stateName":"countState"}]}'
    metadata = _jvm_class(spark, "OperatorStateMetadataV2")(info, stores, properties)
    state_dir = tmp_path / "state" / "7"
    writer = _jvm_class(spark, "OperatorStateMetadataV2Writer")(
        jvm.org.apache.hadoop.fs.Path(str(state_dir)), spark._jsc.hadoopConfiguration(), 3
    )
    writer.write(metadata)
    written = state_dir / "_metadata" / "v2" / "3"

    parsed = parse_operator_state_metadata(written.read_bytes(), source="state/7/_metadata/v2/3")

    assert (parsed.version, parsed.operator_info.operator_id) == (2, 7)
    assert parsed.operator_info.operator_name == "transformWithStateExec"
    assert [(s.store_name, s.num_cols_prefix_key, s.num_partitions) for s in parsed.state_store_info] == [
        ("default", 0, 5)
    ]
    assert parsed.state_store_info[0].state_schema_file_paths == (
        "file:/ckpt/state/0/_stateSchema/default/0_a",
        "file:/ckpt/state/0/_stateSchema/default/3_b",
    )
    assert parsed.operator_properties == {
        "timeMode": "NoTime",
        "outputMode": "Update",
        "stateVariables": [{"stateName": "countState"}],
    }
