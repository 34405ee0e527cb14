"""workers.checkpoint.rocksdbstate on the RocksDB checkpoints PySpark 4.3.0 wrote.

Expectations come from what Spark reported beside the files (spark-report.json: per batch
numRowsTotal / numRowsUpdated / numRowsRemoved), from the commit log Spark wrote, from the file
system (SST names and sizes), and from Spark's load rules stated as literals. The v2/v4 changelog
framing (column families, transformWithState) cannot be produced without pandas, so those cases
are bytes built here from StateStoreChangelogWriterV2's layout.
"""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import CheckpointError, CorruptFileError, TruncatedFileError, UnsupportedVersionError
from workers.checkpoint.logdir import read_commit
from workers.checkpoint.lz4block import compress_lz4_block_stream
from workers.checkpoint.rocksdbchangelog import (
    ChangelogRecord,
    LineageItem,
    parse_changelog,
    parse_changelog_content,
    sniff_changelog_version,
)
from workers.checkpoint.rocksdbloadchain import resolve_load_chain, state_unique_ids_by_version
from workers.checkpoint.rocksdbstate import (
    list_rocksdb_store_files,
    read_changelog,
    read_rocksdb_version,
    read_rocksdb_zip,
    summarize_rocksdb_store,
)
from workers.checkpoint.rocksdbzip import parse_rocksdb_checkpoint_metadata, parse_rocksdb_zip
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

FORMAT1 = "rocksdb_changelog_agg"
FORMAT2 = "rocksdb_checkpoint_v2_dedup"
FIXTURES = (FORMAT1, FORMAT2)


def storage_of(name: str, root: Path = OUR_FIXTURES) -> CheckpointStorage:
    return CheckpointStorage(str(root / name / "checkpoint"))


def report_of(name: str) -> dict:
    return json.loads((OUR_FIXTURES / name / "spark-report.json").read_text())


def state_operator_progress(name: str) -> dict[int, dict]:
    """Batch id -> Spark's progress of the one stateful operator."""
    return {p["batchId"]: p["stateOperators"][0] for p in report_of(name)["progress"]}


def unique_ids(storage: CheckpointStorage, name: str, partition: int) -> dict[int, str]:
    commits = {entry["batch_id"]: read_commit(storage, entry["batch_id"]) for entry in report_of(name)["commit_log"]}
    return state_unique_ids_by_version(commits, operator=0, partition=partition)


def summaries(name: str, root: Path = OUR_FIXTURES):
    storage = storage_of(name, root)
    return [
        summarize_rocksdb_store(storage, store, codec="lz4", unique_ids=unique_ids(storage, name, store.partition))
        for store in list_state_store_dirs(storage)
    ]


def version_files(store_dir: Path, suffix: str) -> list[Path]:
    return sorted(p for p in store_dir.iterdir() if p.name.endswith(suffix) and not p.name.startswith("."))


# --- inventory -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_store_files_are_sorted_into_zips_changelogs_and_sst_files(name):
    storage = storage_of(name)
    for store in list_state_store_dirs(storage):
        files = list_rocksdb_store_files(storage, store)
        directory = OUR_FIXTURES / name / "checkpoint" / store.path
        assert sorted(f.name for f in files.zips) == sorted(p.name for p in version_files(directory, ".zip"))
        assert sorted(f.name for f in files.changelogs) == sorted(
            p.name for p in version_files(directory, ".changelog")
        )
        assert [f.name for f in files.sst_files] == sorted(p.name for p in (directory / "SSTs").glob("[0-9]*.sst"))
        assert (files.unknown, files.log_files) == ((), ())
        assert files.checkpoint_format == (2 if name == FORMAT2 else 1)


def test_format_2_file_ids_are_the_unique_ids_of_the_commit_log():
    storage = storage_of(FORMAT2)
    for store in list_state_store_dirs(storage):
        files = list_rocksdb_store_files(storage, store)
        ids = unique_ids(storage, FORMAT2, store.partition)
        assert len(ids) == 4
        assert all(files.find("changelog", version, uid) for version, uid in ids.items())


@pytest.mark.parametrize("name", FIXTURES)
def test_every_zip_lists_sst_files_present_with_the_sizes_on_disk(name):
    storage = storage_of(name)
    checked = 0
    for store in list_state_store_dirs(storage):
        for zip_file in list_rocksdb_store_files(storage, store).zips:
            metadata = read_rocksdb_zip(storage, f"{store.path}/{zip_file.name}")
            assert metadata.sst_files and metadata.log_files == ()
            for sst in metadata.sst_files:
                path = OUR_FIXTURES / name / "checkpoint" / store.path / "SSTs" / sst.dfs_file_name
                assert path.stat().st_size == sst.size_bytes
                assert sst.dfs_file_name.startswith(sst.local_file_name.removesuffix(".sst") + "-")
                checked += 1
            assert (metadata.column_family_mapping, metadata.num_internal_keys, metadata.max_column_family_id) == (
                {},
                0,
                0,
            )
    assert checked >= 4


@pytest.mark.parametrize("name", FIXTURES)
def test_zip_row_counts_add_up_to_the_total_spark_reported_for_that_batch(name):
    progress = state_operator_progress(name)
    per_version: dict[int, list[int]] = {}
    for summary in summaries(name):
        for state in summary.versions:
            if state.num_rows is not None:
                assert state.num_rows_source == f"numKeys of {state.chain.snapshot.name}"
                per_version.setdefault(state.version, []).append(state.num_rows)
    complete = {version: rows for version, rows in per_version.items() if len(rows) == 2}
    assert len(complete) >= 2
    assert {v: sum(rows) for v, rows in complete.items()} == {v: progress[v - 1]["numRowsTotal"] for v in complete}


@pytest.mark.parametrize("name", FIXTURES)
def test_changelog_puts_and_deletes_are_the_updates_and_removals_spark_reported(name):
    storage, progress, changes = storage_of(name), state_operator_progress(name), {}
    for store in list_state_store_dirs(storage):
        for changelog in list_rocksdb_store_files(storage, store).changelogs:
            data = storage.read_bytes(f"{store.path}/{changelog.name}")
            records = parse_changelog(data, source=changelog.name, codec="lz4").records
            counts = changes.setdefault(changelog.version, [0, 0])
            counts[0] += sum(r.record_type == "put" for r in records)
            counts[1] += sum(r.record_type == "delete" for r in records)
    assert len(changes) >= 3
    assert changes == {v: [progress[v - 1]["numRowsUpdated"], progress[v - 1]["numRowsRemoved"]] for v in changes}


# --- changelog formats ---------------------------------------------------------------------------


def test_format_1_changelogs_are_v1_and_format_2_changelogs_carry_their_lineage():
    storage = storage_of(FORMAT2)
    for store in list_state_store_dirs(storage):
        files = list_rocksdb_store_files(storage, store)
        ids = unique_ids(storage, FORMAT2, store.partition)
        for version, uid in ids.items():
            data = storage.read_bytes(f"{store.path}/{version}_{uid}.changelog")
            changelog = parse_changelog(data, source="c", codec="lz4")
            assert changelog.version == 3 and changelog.lineage
            # The lineage ends at the previous version, whose id the commit log also names.
            assert changelog.lineage[-1].version == version - 1
            if version - 1 in ids:
                assert changelog.lineage[-1].checkpoint_unique_id == ids[version - 1]
            # ... and starts at the newest snapshot: a zip of that version is kept, or was cleaned up.
            zip_versions = {z.version for z in files.zips}
            assert changelog.lineage[0].version in zip_versions or changelog.lineage[0].version < min(zip_versions)
    agg = storage_of(FORMAT1)
    for store in list_state_store_dirs(agg):
        for changelog in list_rocksdb_store_files(agg, store).changelogs:
            parsed = parse_changelog(agg.read_bytes(f"{store.path}/{changelog.name}"), source="c", codec="lz4")
            assert (parsed.version, parsed.lineage) == (1, None)


def utf(text: str) -> bytes:
    return struct.pack(">H", len(text.encode())) + text.encode()


def sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


KEY, VALUE, END = b"\x00" + bytes(16), b"\x00" + bytes(24), b"\x01" + bytes(16)
V2_RECORDS = (
    b"\x01"
    + sized(KEY)
    + sized(VALUE)
    + b"\x10"
    + sized(KEY)
    + struct.pack(">i", -1)
    + b"\x11"
    + sized(KEY)
    + sized(VALUE)
    + b"\x20"
    + sized(KEY)
    + sized(END)
    + b"\x00"
)
V2_EXPECTED = (
    ChangelogRecord("put", KEY, VALUE),
    ChangelogRecord("delete", KEY, None),
    ChangelogRecord("merge", KEY, VALUE),
    ChangelogRecord("delete_range", KEY, END),
)
LINEAGE = '[{"version":3,"checkpointUniqueId":"a"},{"version":4,"checkpointUniqueId":"b"}]'


def test_v2_records_have_a_type_byte_and_end_with_the_eof_record():
    changelog = parse_changelog_content(utf("v2") + V2_RECORDS, source="5.changelog")
    assert (changelog.version, changelog.lineage, changelog.records) == (2, None, V2_EXPECTED)
    assert changelog.has_column_families


def test_v4_has_the_lineage_before_the_v2_records():
    changelog = parse_changelog_content(utf("v4") + utf(LINEAGE) + V2_RECORDS, source="5_x.changelog")
    assert changelog.lineage == (LineageItem(3, "a"), LineageItem(4, "b"))
    assert changelog.records == V2_EXPECTED


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xff\xff\xff", (1, 0)),  # an empty v1 changelog: readUTF hits EOF
        (struct.pack(">i", 57), (1, 0)),  # a v1 key size: readUTF reads "" (no leading "v")
        (utf("v3") + utf("[]"), (3, 4)),
        (utf("vx") + b"\xff\xff\xff\xff", (1, 0)),  # NumberFormatException -> v1
        (b"\x00\x02\xc3\x28", (1, 0)),  # malformed UTF-8 -> v1
    ],
)
def test_the_version_is_sniffed_with_read_utf_as_spark_does(content, expected):
    assert sniff_changelog_version(content, source="1.changelog") == expected


def test_a_changelog_version_spark_has_no_reader_for_is_refused():
    with pytest.raises(UnsupportedVersionError, match=r"^7\.changelog: log version v5 is newer than the supported v4"):
        parse_changelog_content(utf("v5") + b"\x00", source="7.changelog")


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        (utf("v2") + b"\x07", CorruptFileError, r"unknown changelog record type 0x07 \(at byte 4\)"),
        (utf("v2") + b"\x01" + sized(KEY), TruncatedFileError, r"ends inside a record's value size"),
        (utf("v2") + b"\x10" + sized(KEY) + struct.pack(">i", 3), CorruptFileError, r"value size is not -1"),
        (utf("v2") + b"\x01" + sized(KEY) + sized(VALUE), TruncatedFileError, r"without the EOF record \(at byte 55\)"),
        (utf("v3") + utf('[{"version":1}]'), CorruptFileError, r"changelog lineage: a lineage item needs"),
        (utf("v3") + utf("[]") + struct.pack(">i", 8) + b"\x00", TruncatedFileError, r"\(at byte 8\)"),
    ],
    ids=["unknown-type", "no-value-size", "delete-size", "no-eof", "lineage-item", "v3-key-cut"],
)
def test_a_damaged_changelog_raises_our_error_naming_the_file_and_position(content, error, message):
    with pytest.raises(error, match=rf"^s/5\.changelog: .*{message}"):
        parse_changelog_content(content, source="s/5.changelog")


def test_row_checksums_are_stripped_from_put_values_and_delete_keys():
    content = (
        utf("v2")
        + b"\x01"
        + sized(KEY)
        + sized(b"ckes" + VALUE)
        + b"\x10"
        + sized(b"ckks" + KEY)
        + struct.pack(">i", -1)
        + b"\x00"
    )
    records = parse_changelog_content(content, source="c", row_checksum=True).records
    assert records == (ChangelogRecord("put", KEY, VALUE), ChangelogRecord("delete", KEY, None))


# --- zip metadata ----------------------------------------------------------------------------------

SPARK_35_METADATA = (
    b'v1\n{"sstFiles":[{"localFileName":"000015.sst","dfsSstFileName":"000015-0b6f.sst","sizeBytes":1337}],"numKeys":3}'
)


def test_spark_3_metadata_without_column_family_fields_is_read():
    metadata = parse_rocksdb_checkpoint_metadata(SPARK_35_METADATA, source="24.zip")
    assert (metadata.num_keys, metadata.log_files, metadata.column_family_mapping, metadata.max_column_family_id) == (
        3,
        (),
        None,
        None,
    )
    assert metadata.sst_files[0].dfs_file_name == "000015-0b6f.sst" and metadata.sst_files[0].size_bytes == 1337


def zip_of(entries: dict[str, bytes]) -> bytes:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (zip_of({"CURRENT": b"MANIFEST-000005\n"}), CorruptFileError, "the zip has no 'metadata' entry"),
        (zip_of({"metadata": b'v2\n{"numKeys":1}'}), UnsupportedVersionError, "v2 is newer than the supported v1"),
        (zip_of({"metadata": b'v1\n{"sstFiles":[]}'}), CorruptFileError, "'numKeys' is missing"),
        (zip_of({"metadata": b'v1\n{"numKeys":1,"sstFiles":[{"localFileName":"1.sst"}]}'}), CorruptFileError, "lacks"),
        (zip_of({"metadata": b"v1\n" + b" " * 100 + b'{"numKeys":1}'}), CorruptFileError, "over the limit of 64"),
        (b"PK\x03\x04 not a zip", CorruptFileError, "not a readable zip file"),
    ],
)
def test_a_bad_zip_raises_our_error_naming_it(data, error, message):
    with pytest.raises(error, match=rf"^state/0/1/4\.zip: .*{message}"):
        parse_rocksdb_zip(data, source="state/0/1/4.zip", max_metadata_bytes=64)


# --- load chains and row counts --------------------------------------------------------------------


def test_a_format_1_version_between_zips_loads_the_older_zip_then_its_changelogs():
    storage = storage_of(FORMAT1)
    store = list_state_store_dirs(storage)[0]
    chain = resolve_load_chain(list_rocksdb_store_files(storage, store), 11)
    assert (chain.snapshot.name, [f.name for f in chain.changelogs], chain.problems) == ("10.zip", ["11.changelog"], ())


@pytest.mark.parametrize("name", FIXTURES)
def test_rows_are_claimed_only_at_zip_versions_and_say_why_not_elsewhere(name):
    for summary in summaries(name):
        assert summary.errors == () and summary.unreferenced_sst_files == ()
        for state in summary.versions:
            assert state.is_loadable
            if state.chain.changelogs:
                assert state.num_rows is None and "SST files" in state.num_rows_source
            else:
                assert state.num_rows is not None


def test_format_2_version_12_replays_its_lineage_from_the_zip_of_version_10():
    storage = storage_of(FORMAT2)
    store = list_state_store_dirs(storage)[0]
    ids = unique_ids(storage, FORMAT2, 0)
    state = read_rocksdb_version(storage, store, 12, codec="lz4", unique_id=ids[12])
    assert state.chain.snapshot.name == f"10_{ids[10]}.zip"
    assert [f.name for f in state.chain.changelogs] == [f"11_{ids[11]}.changelog", f"12_{ids[12]}.changelog"]


@pytest.fixture
def format_copy(tmp_path) -> Path:
    for name in FIXTURES:
        shutil.copytree(OUR_FIXTURES / name / "checkpoint", tmp_path / name / "checkpoint")
    return tmp_path


def test_a_missing_sst_file_makes_the_zip_version_unloadable(format_copy):
    store_dir = format_copy / FORMAT1 / "checkpoint" / "state" / "0" / "0"
    listed = parse_rocksdb_zip((store_dir / "12.zip").read_bytes(), source="12.zip").sst_files
    (store_dir / "SSTs" / listed[0].dfs_file_name).unlink()
    latest = summaries(FORMAT1, format_copy)[0].latest
    assert latest.version == 12 and not latest.is_loadable
    assert latest.missing_immutable_files == (f"SSTs/{listed[0].dfs_file_name}",)
    assert latest.num_rows is None and latest.num_rows_source.startswith("cannot be loaded: 12.zip lists 1 absent")


def test_a_missing_changelog_breaks_the_versions_that_replay_it(format_copy):
    store_dir = format_copy / FORMAT1 / "checkpoint" / "state" / "0" / "1"
    (store_dir / "11.changelog").unlink()
    (store_dir / "12.zip").unlink()
    states = {s.version: s for s in summaries(FORMAT1, format_copy)[1].versions}
    assert states[12].chain.problems == ("missing changelog 11.changelog",)
    assert states[12].num_rows is None and states[10].is_loadable


def test_a_format_2_version_whose_lineage_names_no_remaining_zip_cannot_load(format_copy):
    store_dir = format_copy / FORMAT2 / "checkpoint" / "state" / "0" / "0"
    for zip_path in store_dir.glob("10_*.zip"):
        zip_path.unlink()
    states = {s.version: s for s in summaries(FORMAT2, format_copy)[0].versions}
    assert not states[11].is_loadable
    assert "does not cover every version from version 0" in states[11].chain.problems[0]
    assert states[9].is_loadable  # its lineage leads to the zip of version 8


def test_a_replay_from_version_0_counts_puts_minus_deletes(tmp_path):
    store = tmp_path / "checkpoint" / "state" / "0" / "0"
    store.mkdir(parents=True)
    key_a, key_b = b"\x00" + bytes(8), b"\x00" + b"\x01" * 8
    put = lambda key: sized(key) + sized(VALUE)  # noqa: E731
    delete = lambda key: sized(key) + struct.pack(">i", -1)  # noqa: E731
    versions = {1: put(key_a) + put(key_b), 2: put(key_a) + delete(key_b), 3: delete(key_a)}
    for version, records in versions.items():
        (store / f"{version}.changelog").write_bytes(compress_lz4_block_stream(records + struct.pack(">i", -1)))
    storage = CheckpointStorage(str(tmp_path / "checkpoint"))
    summary = summarize_rocksdb_store(storage, list_state_store_dirs(storage)[0], codec="lz4")
    assert [(s.version, s.num_rows) for s in summary.versions] == [(1, 2), (2, 1), (3, 0)]
    assert summary.versions[2].num_rows_source == "replay of 3 changelogs from version 0"


# --- corrupt copies of Spark's files ---------------------------------------------------------------


def corpus() -> list[Path]:
    return sorted(
        path
        for name in FIXTURES
        for path in (OUR_FIXTURES / name / "checkpoint" / "state").rglob("*")
        if path.suffix in (".zip", ".changelog") and not path.name.startswith(".")
    )


def parse_any(path: Path, data: bytes) -> None:
    if path.suffix == ".zip":
        parse_rocksdb_zip(data, source=path.name)
    else:
        parse_changelog(data, source=path.name, codec="lz4")


@pytest.mark.parametrize("path", corpus()[:4] + corpus()[-4:], ids=lambda p: p.name)
def test_every_truncation_and_byte_flip_parses_or_raises_a_checkpoint_error_naming_the_file(path):
    data = path.read_bytes()
    damaged = [data[:cut] for cut in range(0, len(data), max(1, len(data) // 97))]
    damaged += [
        data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :] for at in range(0, len(data), max(1, len(data) // 61))
    ]
    for variant in damaged:
        try:
            parse_any(path, variant)
        except CheckpointError as error:
            assert str(error).startswith(f"{path.name}: ")


@pytest.mark.parametrize("name", ["rocksdb_changelog_agg", "rocksdb_checkpoint_v2_dedup"])
def test_changelog_values_are_whole_rocksdb_values(name):
    # RocksDB's unsaferow encoding: one encoding-version byte 0x00, then an UnsafeRow (8-byte
    # words), so a value is 1 + 8k bytes. The HDFS reader's flooring to 8 bytes must not apply.
    checkpoint = OUR_FIXTURES / name / "checkpoint"
    storage = storage_of(name)
    changelogs = sorted(checkpoint.glob("state/0/0/*.changelog"))
    assert changelogs
    puts = [
        record.value
        for path in changelogs
        for record in read_changelog(storage, path.relative_to(checkpoint).as_posix(), codec=None).records
        if record.value is not None
    ]
    assert puts
    assert {len(value) % 8 for value in puts} == {1}
    assert {value[0] for value in puts} == {0}
