"""workers.checkpoint.eventlog finds Spark's event logs, decodes them, and tails them incrementally.

The logs are the ones PySpark 4.3.0 wrote under tests/fixtures/event_logs (a rolling zstd log
with Spark 4's defaults, a plain single file), compared with what the query itself reported
(`<run>-report.json`). Growth is simulated on copies in tmp_path by writing a real log in parts:
cut anywhere for plain text, at or inside the zstd frames Spark wrote, or across the files of a
rolling directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zstandard

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.errors import CheckpointError, CorruptFileError, TruncatedFileError, UnsupportedCodecError
from workers.checkpoint.eventlog import (
    EventLogPosition,
    codec_of,
    find_event_logs,
    tail_event_log,
)
from workers.checkpoint.lz4block import compress_lz4_block_stream
from workers.checkpoint.progress import (
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    progress_from_dict,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

EVENT_LOGS = OUR_FIXTURES / "event_logs"
RUNS = ("plain", "rolling_zstd")
STREAMING_PREFIX = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$'


def report(run: str) -> dict:
    return json.loads((EVENT_LOGS / f"{run}-report.json").read_text())


def plain_log() -> Path:
    return next((EVENT_LOGS / "plain").iterdir())


def rolling_dir() -> Path:
    return next((EVENT_LOGS / "rolling_zstd").glob("eventlog_v2_*"))


def zstd_file() -> Path:
    return next(rolling_dir().glob("events_1_*.zstd"))


def app_id(run: str) -> str:
    return report(run)["app_id"]


def zstd_frame_ends(data: bytes) -> list[int]:
    """The byte offsets where the zstd frames Spark wrote end (found with zstandard itself)."""
    ends, pos = [], 0
    while pos < len(data):
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        decompressor.decompress(data[pos:])
        pos = len(data) - len(decompressor.unused_data)
        ends.append(pos)
    return ends


def tail_all(storage: CheckpointStorage, position: EventLogPosition | None = None):
    """Tail the one log under the storage root; return its events and the new position."""
    [log] = find_event_logs(storage)
    tail = tail_event_log(storage, log, position)
    return list(tail.events), tail.position


def batch_ids(events) -> list[int]:
    return [event.progress.batch_id for event in events if isinstance(event, QueryProgressEvent)]


def reported_batch_ids(run: str) -> list[int]:
    return [progress["batchId"] for progress in report(run)["progress"]]


# --- finding logs ---------------------------------------------------------------------------------


def test_a_rolling_directory_is_one_log_of_its_events_files():
    [log] = find_event_logs(CheckpointStorage(str(EVENT_LOGS / "rolling_zstd")))
    assert log.name == f"eventlog_v2_{app_id('rolling_zstd')}"
    assert (log.is_rolling, log.is_in_progress) == (True, False)
    assert [(file.index, file.codec) for file in log.files] == [(1, "zstd")]
    assert log.files[0].path == f"{log.name}/events_1_{app_id('rolling_zstd')}.zstd"


def test_a_single_file_is_one_log_without_codec():
    [log] = find_event_logs(CheckpointStorage(str(EVENT_LOGS / "plain")))
    assert (log.name, log.is_rolling, log.is_in_progress) == (app_id("plain"), False, False)
    assert [(file.path, file.codec, file.size) for file in log.files] == [
        (app_id("plain"), None, plain_log().stat().st_size)
    ]


def test_in_progress_logs_are_found_under_their_final_names(tmp_path):
    (tmp_path / "app-1.zstd.inprogress").write_bytes(b"")
    rolling = tmp_path / "eventlog_v2_app-2"
    rolling.mkdir()
    (rolling / "appstatus_app-2.inprogress").write_bytes(b"")
    (rolling / ".appstatus_app-2.inprogress.crc").write_bytes(b"")
    (tmp_path / "not-a-log-dir").mkdir()
    logs = find_event_logs(CheckpointStorage(str(tmp_path)))
    assert [(log.name, log.is_rolling, log.is_in_progress) for log in logs] == [
        ("app-1.zstd", False, True),
        ("eventlog_v2_app-2", True, True),
    ]
    assert logs[0].files[0].key == "app-1.zstd" and logs[0].files[0].codec == "zstd"
    assert logs[1].files == ()


@pytest.mark.parametrize(
    "name, codec",
    [
        ("local-1", None),
        ("local-1.inprogress", None),
        ("app_1.lz4.inprogress", "lz4"),
        ("events_3_app_1.zstd", "zstd"),
        ("events_3_app_1.zstd.compact", "zstd"),
        ("app_1.lzf", "lzf"),
    ],
)
def test_the_codec_is_the_extension_after_the_app_id(name, codec):
    assert codec_of(name) == codec


def test_an_empty_or_missing_directory_has_no_logs(tmp_path):
    assert find_event_logs(CheckpointStorage(str(tmp_path))) == []
    assert find_event_logs(CheckpointStorage(str(tmp_path)), "missing") == []


# --- the committed logs hold what the query reported -----------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_the_event_log_holds_one_progress_per_reported_batch(run):
    events, position = tail_all(CheckpointStorage(str(EVENT_LOGS / run)))
    assert batch_ids(events) == reported_batch_ids(run)
    assert position.completed_index == 1 and position.file is None


@pytest.mark.parametrize("run", RUNS)
def test_event_log_progress_has_the_reported_rows_state_and_durations(run):
    events, _ = tail_all(CheckpointStorage(str(EVENT_LOGS / run)))
    from_log = [event.progress for event in events if isinstance(event, QueryProgressEvent)]
    reported = [progress_from_dict(p, source="report") for p in report(run)["progress"]]
    for logged, spark in zip(from_log, reported, strict=True):
        assert (logged.id, logged.run_id, logged.timestamp) == (spark.id, spark.run_id, spark.timestamp)
        assert logged.num_input_rows == spark.num_input_rows
        assert logged.duration_ms == spark.duration_ms
        assert logged.event_time == spark.event_time
        assert logged.state_operators == spark.state_operators
        assert [s.end_offset for s in logged.sources] == [s.end_offset for s in spark.sources]
        assert logged.sink == spark.sink


@pytest.mark.parametrize("run", RUNS)
def test_the_log_starts_and_terminates_the_reported_query_run(run):
    events, _ = tail_all(CheckpointStorage(str(EVENT_LOGS / run)))
    ids = (report(run)["query_id"], report(run)["run_id"])
    assert isinstance(events[0], QueryStartedEvent) and (events[0].id, events[0].run_id) == ids
    assert isinstance(events[-1], QueryTerminatedEvent) and (events[-1].id, events[-1].run_id) == ids


@pytest.mark.parametrize("run", RUNS)
def test_a_finished_log_is_not_read_again(run):
    storage = CheckpointStorage(str(EVENT_LOGS / run))
    _, position = tail_all(storage)
    reads = storage.calls.read
    events, again = tail_all(storage, position)
    assert (events, again, storage.calls.read) == ([], position, reads)


# --- tailing a growing plain file ----------------------------------------------------------------


def _cut_points(data: bytes) -> list[int]:
    """Every line end of a streaming event, the middle of each streaming line, and a few others."""
    points, start = [], 0
    for line in data.splitlines(keepends=True):
        if line.startswith(STREAMING_PREFIX):
            points += [start + len(line) // 2, start + len(line)]
        start += len(line)
    return points + [0, 1, len(data) // 3]


PLAIN_CUTS = _cut_points(plain_log().read_bytes())


@pytest.mark.parametrize("cut", PLAIN_CUTS)
def test_a_growing_plain_log_yields_each_event_once(tmp_path, cut):
    data = plain_log().read_bytes()
    growing = tmp_path / f"{app_id('plain')}.inprogress"
    growing.write_bytes(data[:cut])
    storage = CheckpointStorage(str(tmp_path))
    first, position = tail_all(storage)
    with growing.open("ab") as out:
        out.write(data[cut:])
    second, position = tail_all(storage, position)
    growing.rename(tmp_path / app_id("plain"))  # the application ended
    third, position = tail_all(storage, position)
    assert batch_ids(first + second + third) == reported_batch_ids("plain")
    assert len(first + second + third) == len(reported_batch_ids("plain")) + 2
    assert third == [] and position.completed_index == 1


def test_a_partly_written_last_line_is_left_for_the_next_tail(tmp_path):
    data = plain_log().read_bytes()
    first_progress = data.index(STREAMING_PREFIX + b"QueryProgressEvent")
    growing = tmp_path / f"{app_id('plain')}.inprogress"
    growing.write_bytes(data[: first_progress + 100])
    events, position = tail_all(CheckpointStorage(str(tmp_path)))
    assert [type(event) for event in events] == [QueryStartedEvent]
    assert (position.file, position.offset, position.lines) == (app_id("plain"), first_progress, 0)


# --- tailing a growing rolling zstd log -----------------------------------------------------------


def _copy_rolling(tmp_path: Path, *, in_progress: bool) -> tuple[Path, str]:
    """Copy the rolling directory without its events files; return it and the events file name."""
    target = tmp_path / rolling_dir().name
    target.mkdir()
    status = f"appstatus_{app_id('rolling_zstd')}" + (".inprogress" if in_progress else "")
    (target / status).write_bytes(b"")
    return target, zstd_file().name


ZSTD_DATA = zstd_file().read_bytes()
ZSTD_FRAME_ENDS = zstd_frame_ends(ZSTD_DATA)
# At frame ends, inside the first, a middle and the last frame, and inside a frame header.
ZSTD_CUTS = sorted(
    {
        ZSTD_FRAME_ENDS[0],
        ZSTD_FRAME_ENDS[len(ZSTD_FRAME_ENDS) // 2],
        ZSTD_FRAME_ENDS[-2],
        ZSTD_FRAME_ENDS[0] // 2,
        (ZSTD_FRAME_ENDS[20] + ZSTD_FRAME_ENDS[21]) // 2,
        ZSTD_FRAME_ENDS[-2] + 3,
        len(ZSTD_DATA) - 1,
    }
)


@pytest.mark.parametrize("cut", ZSTD_CUTS)
def test_a_growing_zstd_file_yields_each_event_once_even_cut_inside_a_frame(tmp_path, cut):
    directory, name = _copy_rolling(tmp_path, in_progress=True)
    (directory / name).write_bytes(ZSTD_DATA[:cut])
    storage = CheckpointStorage(str(tmp_path))
    first, position = tail_all(storage)
    (directory / name).write_bytes(ZSTD_DATA)
    second, position = tail_all(storage, position)
    assert batch_ids(first + second) == reported_batch_ids("rolling_zstd")
    assert position.offset == len(ZSTD_DATA)  # the last frame ends the last line


def test_a_zstd_position_restarts_at_a_frame_end(tmp_path):
    directory, name = _copy_rolling(tmp_path, in_progress=True)
    cut = (ZSTD_FRAME_ENDS[20] + ZSTD_FRAME_ENDS[21]) // 2
    (directory / name).write_bytes(ZSTD_DATA[:cut])
    _, position = tail_all(CheckpointStorage(str(tmp_path)))
    assert position.offset == ZSTD_FRAME_ENDS[20]


def test_a_frame_ending_inside_a_line_is_no_restart_point(tmp_path):
    # Spark ends a frame only when it flushes, after a line; another writer may not: frames of
    # 3000 bytes of the real text, written up to the middle.
    text = plain_log().read_bytes()
    frames = [zstandard.ZstdCompressor().compress(text[i : i + 3000]) for i in range(0, len(text), 3000)]
    growing = tmp_path / f"{app_id('plain')}.zstd.inprogress"
    growing.write_bytes(b"".join(frames[: len(frames) // 2]))
    storage = CheckpointStorage(str(tmp_path))
    first, position = tail_all(storage)
    growing.write_bytes(b"".join(frames))
    second, _ = tail_all(storage, position)
    assert batch_ids(first + second) == reported_batch_ids("plain")


def test_rolled_over_files_are_not_read_again(tmp_path):
    # Spark rolls at 2 MiB or more, so the fixture has one file: split it at a frame end into two.
    directory, name = _copy_rolling(tmp_path, in_progress=True)
    app = app_id("rolling_zstd")
    split = ZSTD_FRAME_ENDS[len(ZSTD_FRAME_ENDS) // 2]
    (directory / f"events_1_{app}.zstd").write_bytes(ZSTD_DATA[:split])
    storage = CheckpointStorage(str(tmp_path))
    first, position = tail_all(storage)

    (directory / f"events_2_{app}.zstd").write_bytes(ZSTD_DATA[split:])
    second, position = tail_all(storage, position)
    assert position.completed_index == 1 and position.file.endswith(f"events_2_{app}.zstd")

    reads = storage.calls.read
    third, position = tail_all(storage, position)
    assert storage.calls.read == reads + 1  # only events_2, still being written

    (directory / f"appstatus_{app}.inprogress").rename(directory / f"appstatus_{app}")
    fourth, position = tail_all(storage, position)
    reads = storage.calls.read
    fifth, _ = tail_all(storage, position)
    assert storage.calls.read == reads
    assert third == fourth == fifth == []
    assert batch_ids(first + second) == reported_batch_ids("rolling_zstd")


def test_a_compacted_file_of_read_files_is_skipped(tmp_path):
    directory, name = _copy_rolling(tmp_path, in_progress=False)
    (directory / name).write_bytes(ZSTD_DATA)
    storage = CheckpointStorage(str(tmp_path))
    _, position = tail_all(storage)
    # The history server replaced events_1 by its compaction.
    (directory / name).rename(directory / f"{name}.compact")
    events, _ = tail_all(storage, position)
    assert events == []


# --- LZ4 (Spark's lz4 codec is lz4-java's LZ4Block stream) ---------------------------------------


def test_a_growing_lz4_log_yields_each_event_once(tmp_path):
    # Spark's own lz4 event log is read in tests/spark; here the plain log's text is framed as
    # LZ4Block (as LZ4BlockOutputStream does) and written in parts, cut inside a block.
    data = compress_lz4_block_stream(plain_log().read_bytes(), block_size=4096)
    growing = tmp_path / f"{app_id('plain')}.lz4.inprogress"
    storage = CheckpointStorage(str(tmp_path))
    events, position = [], None
    for cut in (len(data) // 3, 2 * len(data) // 3, len(data)):
        growing.write_bytes(data[:cut])
        new, position = tail_all(storage, position)
        events += new
    assert batch_ids(events) == reported_batch_ids("plain")
    assert position.offset == 0 and position.lines > 0  # LZ4 logs are decoded from the start


def test_an_lz4_log_cut_inside_a_block_is_truncated_once_complete(tmp_path):
    data = compress_lz4_block_stream(plain_log().read_bytes(), block_size=4096)
    (tmp_path / "app-1.lz4").write_bytes(data[: len(data) // 2])
    with pytest.raises(TruncatedFileError, match="^app-1.lz4: "):
        tail_all(CheckpointStorage(str(tmp_path)))


# --- unsupported codecs, corrupt and truncated logs ------------------------------------------------


@pytest.mark.parametrize("codec", ["snappy", "lzf"])
def test_snappy_and_lzf_logs_are_an_unsupported_codec_error(tmp_path, codec):
    (tmp_path / f"app-1.{codec}").write_bytes(b"\x00" * 16)
    with pytest.raises(UnsupportedCodecError) as raised:
        tail_all(CheckpointStorage(str(tmp_path)))
    assert raised.value.path == f"app-1.{codec}" and raised.value.codec == codec


def test_a_finished_plain_log_cut_inside_a_progress_line_is_truncated(tmp_path):
    data = plain_log().read_bytes()
    last_progress = data.rindex(STREAMING_PREFIX + b"QueryProgressEvent")
    (tmp_path / "app-1").write_bytes(data[: last_progress + 200])
    with pytest.raises(TruncatedFileError) as raised:
        tail_all(CheckpointStorage(str(tmp_path)))
    assert str(raised.value).startswith("app-1: the last line is incomplete")
    assert last_progress < raised.value.offset <= last_progress + 200  # where the JSON breaks off


def test_a_finished_plain_log_cut_inside_another_event_is_read(tmp_path):
    data = plain_log().read_bytes()
    (tmp_path / "app-1").write_bytes(data[:-10])  # inside SparkListenerApplicationEnd
    events, _ = tail_all(CheckpointStorage(str(tmp_path)))
    assert batch_ids(events) == reported_batch_ids("plain")


def test_a_damaged_progress_line_is_corrupt_at_its_byte_offset(tmp_path):
    data = bytearray(plain_log().read_bytes())
    line = data.index(STREAMING_PREFIX + b"QueryProgressEvent")
    batch = data.index(b'"batchId":', line)
    data[batch + 10] = ord("x")
    (tmp_path / "app-1").write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as raised:
        tail_all(CheckpointStorage(str(tmp_path)))
    assert str(raised.value).startswith("app-1: event: invalid JSON")
    assert raised.value.offset == batch + 10


def test_a_finished_zstd_file_cut_inside_a_frame_is_truncated_at_the_frame_start(tmp_path):
    directory, name = _copy_rolling(tmp_path, in_progress=False)
    (directory / name).write_bytes(ZSTD_DATA[: ZSTD_FRAME_ENDS[-2] + 3])
    with pytest.raises(TruncatedFileError) as raised:
        tail_all(CheckpointStorage(str(tmp_path)))
    assert raised.value.path == f"{directory.name}/{name}"
    assert raised.value.offset == ZSTD_FRAME_ENDS[-2]


@pytest.mark.parametrize("flip_at", range(0, len(ZSTD_DATA), len(ZSTD_DATA) // 40))
def test_byte_flips_in_a_zstd_log_raise_only_our_errors(tmp_path, flip_at):
    directory, name = _copy_rolling(tmp_path, in_progress=False)
    damaged = bytearray(ZSTD_DATA)
    damaged[flip_at] ^= 0xFF
    (directory / name).write_bytes(bytes(damaged))
    try:
        tail_all(CheckpointStorage(str(tmp_path)))
    except CheckpointError as error:
        assert str(error).startswith(f"{directory.name}/{name}: ")


@pytest.mark.parametrize(
    "path", sorted(SPARK_TEST_RESOURCES.glob("query-event-logs-version-2.0.*.txt")), ids=lambda path: path.name
)
def test_spark_2_0_event_logs_read_without_events(tmp_path, path):
    shutil.copyfile(path, tmp_path / "app-20161129000000-0000")
    events, position = tail_all(CheckpointStorage(str(tmp_path)))
    assert events == [] and position.completed_index == 1


# --- positions -------------------------------------------------------------------------------------


def test_a_position_survives_a_round_trip_through_json(tmp_path):
    data = plain_log().read_bytes()
    growing = tmp_path / f"{app_id('plain')}.inprogress"
    growing.write_bytes(data[: len(data) // 2])
    storage = CheckpointStorage(str(tmp_path))
    first, position = tail_all(storage)
    stored = json.loads(json.dumps(position.as_dict()))
    growing.write_bytes(data)
    second, _ = tail_all(storage, EventLogPosition.from_dict(stored))
    assert batch_ids(first + second) == reported_batch_ids("plain")


def test_a_position_of_another_log_is_refused():
    storage = CheckpointStorage(str(EVENT_LOGS / "plain"))
    [log] = find_event_logs(storage)
    with pytest.raises(ValueError, match="belongs to the log 'other'"):
        tail_event_log(storage, log, EventLogPosition("other"))


def test_the_committed_event_logs_stay_under_300_kb():
    total = sum(path.stat().st_size for path in EVENT_LOGS.rglob("*") if path.is_file())
    assert total < 300 * 1024
