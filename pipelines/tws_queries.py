"""A transformWithStateInPandas query with every kind of state variable, for the TWS fixtures.

    python -m pipelines.tws_queries OUT_DIR      (tests/fixtures/tws is generated this way)

writes two checkpoints of the same query, each `OUT_DIR/<variant>/checkpoint`: `unsaferow`
(UnsafeRow rows, checkpoint format 1) and `avro_format2` (Avro rows, checkpoint format 2).

Per key (the rate row's value mod 3) the processor keeps:

    count      ValueState   rows seen so far
    recent     ListState    the values of every row seen (a list that grows each batch)
    by_parity  MapState     "even"/"odd" -> rows seen of that parity
    last_seen  ValueState   with a TTL of one hour (so Spark writes TTL column families)

and registers a processing-time timer one day ahead on the key's first row (it never fires
while the fixture runs, so it stays registered). RocksDB, changelog checkpointing, 2 partitions;
`spark.sql.streaming.stateStore.encodingFormat` chooses UnsafeRow or Avro for the state rows.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pipelines.generate_fixtures import _wait_for_batch as wait_for_batch
from pipelines.generate_fixtures import remove_byproducts, session_conf
from pipelines.queries import FIXTURE_START_MS, RateSpec, build_session, rate_events, stop_between_batches

TWS_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.streaming.minBatchesToRetain": "3",
}
VARIANT_CONF = {
    "unsaferow": {"spark.sql.streaming.stateStore.encodingFormat": "unsaferow"},
    "avro_format2": {
        "spark.sql.streaming.stateStore.encodingFormat": "avro",
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    },
}
TWS_RATE = RateSpec(rows_per_batch=7, start_ms=FIXTURE_START_MS, advance_ms=1000)
TWS_BATCHES = 4
TWS_TRIGGER_INTERVAL = "5 seconds"
TTL_MS = 3_600_000
TIMER_DELAY_MS = 86_400_000
KEY_SCHEMA = StructType([StructField("key", LongType())])
OUTPUT_SCHEMA = StructType([StructField("key", LongType()), StructField("count", LongType())])


class EveryStateKind(StatefulProcessor):
    """One variable of each kind, a TTL and a timer (see the module's docstring)."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", StructType([StructField("count", LongType())]))
        self.recent = handle.getListState("recent", StructType([StructField("value", LongType())]))
        self.by_parity = handle.getMapState(
            "by_parity",
            StructType([StructField("parity", StringType())]),
            StructType([StructField("rows", LongType())]),
        )
        self.last_seen = handle.getValueState(
            "last_seen", StructType([StructField("value", LongType())]), ttlDurationMs=TTL_MS
        )

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        import pandas as pd

        values = [int(value) for frame in rows for value in frame["value"]]
        seen = self.count.get()[0] if self.count.exists() else 0
        if not seen:
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + TIMER_DELAY_MS)
        self.count.update((seen + len(values),))
        self.recent.appendList([(value,) for value in values])
        self._count_by_parity(values)
        self.last_seen.update((values[-1],))
        yield pd.DataFrame({"key": [key[0]], "count": [seen + len(values)]})

    def _count_by_parity(self, values: list[int]) -> None:
        """Add the even and the odd values to the MapState's count of each."""
        for parity in ("even", "odd"):
            matching = sum(1 for value in values if (value % 2 == 0) == (parity == "even"))
            if matching:
                before = self.by_parity.getValue((parity,))[0] if self.by_parity.containsKey((parity,)) else 0
                self.by_parity.updateValue((parity,), (before + matching,))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        return iter(())

    def close(self) -> None:
        pass


class WithOneMoreVariable(EveryStateKind):
    """EveryStateKind plus a ValueState ``first_value``: a restart with it evolves the state schema."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.first_value = handle.getValueState("first_value", StructType([StructField("value", LongType())]))

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        frames = list(rows)
        if not self.first_value.exists():
            self.first_value.update((int(frames[0]["value"].iloc[0]),))
        yield from super().handleInputRows(key, iter(frames), timerValues)


def tws_query(spark, base: Path, processor: StatefulProcessor | None = None):
    """rate-micro-batch -> key = value % 3 -> transformWithStateInPandas(EveryStateKind) -> noop sink."""
    keyed = rate_events(spark, TWS_RATE).select((F.col("value") % 3).alias("key"), "value")
    transformed = keyed.groupBy("key").transformWithStateInPandas(
        statefulProcessor=processor or EveryStateKind(),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Update",
        timeMode="ProcessingTime",
    )
    return (
        transformed.writeStream.format("noop")
        .queryName(base.name)
        .outputMode("update")
        .option("checkpointLocation", str(base / "checkpoint"))
    )


def run_tws(spark, base: Path, batches: int = TWS_BATCHES, processor: StatefulProcessor | None = None) -> None:
    """Run the query until `batches` batches are committed, then stop it between two batches.

    A Python processor's batch takes seconds: the trigger interval leaves idle time to stop in.
    """
    query = tws_query(spark, base, processor).trigger(processingTime=TWS_TRIGGER_INTERVAL).start()
    try:
        wait_for_batch(query, batches - 1)
    finally:
        stop_between_batches(query, timeout_seconds=60)
    _check_stopped_between_batches(base)


def _check_stopped_between_batches(base: Path) -> None:
    """Raise when the newest offsets file has no commit: the stop landed inside a batch."""
    logs = [
        sorted(int(p.name) for p in (base / "checkpoint" / log).iterdir() if p.name.isdigit())
        for log in ("offsets", "commits")
    ]
    if logs[0][-1] != logs[1][-1]:
        raise RuntimeError(f"{base.name}: stopped inside batch {logs[0][-1]} (no commit): run again")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--batches", type=int, default=TWS_BATCHES)
    args = parser.parse_args()
    spark = build_session("ckptweb-tws-fixture", conf=TWS_CONF)
    try:
        for variant, conf in VARIANT_CONF.items():
            base = args.out_dir.resolve() / variant
            shutil.rmtree(base, ignore_errors=True)
            with session_conf(spark, conf):
                run_tws(spark, base, args.batches)
            remove_byproducts(base)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
