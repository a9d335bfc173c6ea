"""The runbook's disaster drills, typed as an operator types them, on the embedded stack.

Each ends as the runbook promises: every entry in the lake exactly once (``entry_id`` and each
wallet's versions 1..N), every wallet once, and ``walletlake reconcile`` clean.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import boto3
import pyarrow as pa
import pytest
from support.recovery import TrimmedSession, operator_env, stream_sequences, write_export
from support.stream_records import TableWriter, assert_exact_ledger

from contracts.lake_layout import misfits_location
from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from stream_processor.consumer import drain
from walletlake import cli

pytestmark = pytest.mark.stack


def operator_settings(make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A fresh Iceberg lake, and the operator's shell pointed at it (the commands read the environment)."""
    settings = make_settings(lake_format="iceberg")
    for name, value in operator_env(settings).items():
        monkeypatch.setenv(name, value)
    return settings


def commit(settings: Settings) -> None:
    commit_landed(settings, boto3.client("s3", region_name=settings.region), open_catalog(settings))


def scan(settings: Settings, table: str) -> pa.Table:
    return load_table(settings, table, open_catalog(settings)).scan().to_arrow()


def assert_exact_lake(settings: Settings, writer: TableWriter) -> None:
    """Every entry once (entry ids unique, versions 1..N per wallet), every wallet once."""
    ledger = scan(settings, "ledger")
    entry_ids = ledger.column("entry_id").to_pylist()
    assert len(entry_ids) == len(set(entry_ids))
    assert_exact_ledger(ledger, writer.model.entries)
    assert sorted(scan(settings, "wallets").column("wallet_id").to_pylist()) == sorted(writer.model.wallets)


def reconciled_clean(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> int:
    """`walletlake snapshot` then `walletlake reconcile --date TODAY --provisional`: its exit code."""
    assert cli.main(["snapshot"]) == 0
    today = dt.datetime.now(dt.UTC).date().isoformat()
    return cli.main(["reconcile", "--date", today, "--provisional"])


@pytest.mark.parametrize("replay_first", [False, True], ids=["consumer-resumes-first", "backfill-first"])
def test_a_backfill_from_overlapping_exports_after_an_outage_past_the_stream_is_exact(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    replay_first: bool,
) -> None:
    # GIVEN a lake that holds the first hours, then a consumer down past the stream's 24 hours:
    # the stream lost the first records written meanwhile (trimmed); two exports (§4, step 2)
    # were taken during the outage, the second overlapping the first
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=10, seed=1)
    drain(settings, batch_size=20)
    commit(settings)
    consumed = len(stream_sequences(settings))
    writer.workload(wallets=2, deposits=6, transfers=10, seed=2)
    first_export = write_export(settings, "01772000000000-aaaa0001")
    writer.workload(wallets=2, deposits=4, transfers=6, seed=3)
    second_export = write_export(settings, "01772000000000-aaaa0002")
    trimmed_below = stream_sequences(settings)[consumed + 12]  # 12 records of the outage are gone

    def resume() -> None:
        summary = drain(settings, batch_size=20, session=TrimmedSession(settings, trimmed_below))  # type: ignore[arg-type]
        assert summary.trimmed_shards, "the drill needs a trimmed stream"
        commit(settings)

    # WHEN the consumer resumes and the operator replays each export as §4 says (in either order)
    if not replay_first:
        resume()
    for uri in (first_export, second_export, first_export):  # the first one twice, by mistake
        assert cli.main(["replay", "--export", uri]) == 0
    if replay_first:
        resume()
    out = capsys.readouterr().out

    # THEN every entry and every wallet is in the lake once, and the night reconciles clean
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0
    # AND each replay said what it added and what the lake already held, the rerun that it landed nothing
    reports = out.split("export: ")[1:]
    assert len(reports) == 3
    assert all("already in the lake (same identity) and not added" in report for report in reports[:2])
    assert "nothing new to land: an earlier run landed all of it" in reports[2]


def test_a_batch_left_out_for_a_missing_file_comes_back_whole_and_once_with_replay_left_out(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN batches landed by the consumer, one of which lost its ledger file before the commit
    # (the committer left that batch out of both tables and noted it)
    from lake import objects
    from lake.iceberg_landing import split_bucket_key
    from lake.landing_log import log_prefix, read_records

    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=6, seed=5)
    drain(settings, batch_size=5)
    s3 = boto3.client("s3", region_name=settings.region)
    records = read_records(
        s3, settings.bucket, objects.list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json")
    )
    broken = next(r for r in records if r.files_of("ledger") and r.files_of("wallets"))
    assert objects.delete_keys(s3, *_one(split_bucket_key(broken.files_of("ledger")[0].path))) == 1
    report = commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)
    assert report.quarantined_batches == 1
    # AND the operator first brought back more than the batch by mistake: a whole export
    assert cli.main(["replay", "--export", write_export(settings, "01772000000000-bbbb0001")]) == 0

    # WHEN the operator replays what was left out, as the runbook says, twice
    assert cli.main(["replay", "--left-out"]) == 0
    assert cli.main(["replay", "--left-out"]) == 0

    # THEN every entry and wallet is there once, the note is gone, the night reconciles clean
    assert_exact_lake(settings, writer)
    root_bucket, root_key = split_bucket_key(misfits_location(settings.bucket, settings.lake_prefix))
    assert objects.list_keys(s3, root_bucket, f"{root_key}/_batches/") == []
    assert reconciled_clean(settings, monkeypatch) == 0
    out = capsys.readouterr().out
    assert "left-out: 1 read" in out
    assert "left-out: 0 read" in out


def test_a_stream_range_replayed_on_purpose_adds_only_what_is_missing(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a lake exact to the last entry
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=6, seed=6)
    drain(settings, batch_size=7)
    commit(settings)
    sequences = stream_sequences(settings)
    shard = boto3.client("dynamodbstreams").describe_stream(
        StreamArn=boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"][
            "LatestStreamArn"
        ]
    )["StreamDescription"]["Shards"][0]["ShardId"]
    # WHEN the operator replays the whole stream range (the runbook's chain-break remedy), twice
    span = f"{shard}:{sequences[0]}-{sequences[-1]}"
    assert cli.main(["replay", "--stream-range", span]) == 0
    assert cli.main(["replay", "--stream-range", span]) == 0
    # THEN nothing was added twice, and the summary says the lake already held every row
    assert_exact_lake(settings, writer)
    out = capsys.readouterr().out
    assert f"ledger: 0 rows appended, {len(writer.model.entries)} already in the lake" in out


def _one(pair: tuple[str, str]) -> tuple[str, list[str]]:
    return pair[0], [pair[1]]


def test_a_day_with_copies_is_repaired_by_the_command_the_runbook_names(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a lake where one batch's files reached the tables twice (by a hand, or an older walletlake)
    import dataclasses

    from lake import objects
    from lake.committer import commit_table
    from lake.iceberg_landing import split_bucket_key
    from lake.iceberg_tables import identifier
    from lake.landing_log import log_prefix, read_records

    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=8, seed=8)
    drain(settings, batch_size=6)
    commit(settings)
    s3 = boto3.client("s3", region_name=settings.region)
    records = read_records(
        s3, settings.bucket, objects.list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json")
    )
    batch = next(r for r in records if r.files_of("ledger"))
    copies = []
    for file in batch.files_of("ledger"):
        bucket, key = split_bucket_key(file.path)
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=bucket, Key=key.replace(".parquet", "-copy.parquet"), Body=body)
        copies.append(dataclasses.replace(file, path=file.path.replace(".parquet", "-copy.parquet")))
    again = dataclasses.replace(batch, shard="by-hand", files=tuple(copies), key="")
    commit_table(
        open_catalog(settings),
        identifier(settings.glue_database, "ledger"),
        [again],
        live_sources={again.source},
    )
    assert cli.main(["snapshot"]) == 0
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert cli.main(["reconcile", "--date", today, "--provisional"]) == 1  # duplicate

    # WHEN the operator repairs the day as §3 says, and reconciles again
    assert cli.main(["repair", "--date", today]) == 0
    assert cli.main(["repair", "--date", today]) == 0

    # THEN every entry is there once and the night is clean
    assert_exact_lake(settings, writer)
    assert cli.main(["reconcile", "--date", today, "--provisional"]) == 0
    out = capsys.readouterr().out
    assert f"repair of {today}: {copies[0].rows} entries held more than once" in out
    assert f"repair of {today}: nothing to repair; nothing changed" in out


@pytest.mark.parametrize("damage", ["cut short", "same size, other bytes"])
def test_a_landed_file_torn_before_its_commit_is_left_out_counted_and_replayed_whole(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    damage: str,
) -> None:
    # GIVEN batches landed by the consumer, one of whose ledger files was cut short before the commit
    import json

    from lake import objects
    from lake.iceberg_landing import split_bucket_key
    from lake.landing_log import log_prefix, read_records

    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=6, seed=9)
    drain(settings, batch_size=5)
    s3 = boto3.client("s3", region_name=settings.region)
    records = read_records(
        s3, settings.bucket, objects.list_keys(s3, settings.bucket, log_prefix(settings.lake_prefix), ".json")
    )
    torn = next(r for r in records if r.files_of("ledger")).files_of("ledger")[0]
    bucket, key = split_bucket_key(torn.path)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    # (a writer that died mid-copy; or bytes changed in place, which only the CRC32 tells)
    flipped = body[:100] + bytes([body[100] ^ 0xFF]) + body[101:]
    torn_body = body[: len(body) // 2] if damage == "cut short" else flipped
    s3.put_object(Bucket=bucket, Key=key, Body=torn_body)

    # WHEN the committer commits
    report = commit_landed(settings, s3, open_catalog(settings), empty_after_seconds=0)

    # THEN the batch is left out whole, counted as a missing file (the MissingFiles alarm), and noted as torn
    assert (report.quarantined_batches, report.missing_files) == (1, 1)
    root_bucket, root_key = split_bucket_key(misfits_location(settings.bucket, settings.lake_prefix))
    (note_key,) = objects.list_keys(s3, root_bucket, f"{root_key}/_batches/")
    note = json.loads(s3.get_object(Bucket=root_bucket, Key=note_key)["Body"].read())
    why = (
        f"is {len(body) // 2} bytes, its landing record says {torn.size}"
        if damage == "cut short"
        else f"has CRC32 {s3.head_object(Bucket=bucket, Key=key, ChecksumMode='ENABLED')['ChecksumCRC32']}, "
        f"its landing record says {torn.crc32}"
    )
    assert note["reason"].startswith(f"torn: {torn.path} {why}")
    # AND the runbook's remedy brings it back whole, once, and the night is clean
    assert cli.main(["replay", "--left-out"]) == 0
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0


def test_a_committed_file_deleted_is_named_with_its_remedy_and_restoring_it_makes_the_day_whole(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a committed ledger file that a lifecycle rule (or a hand) deleted
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=4, seed=10)
    drain(settings, batch_size=10)
    commit(settings)
    path = next(
        iter(load_table(settings, "ledger", open_catalog(settings)).scan().plan_files())
    ).file.file_path
    bucket, _, key = path.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", region_name=settings.region)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.delete_object(Bucket=bucket, Key=key)
    assert cli.main(["snapshot"]) == 0
    today = dt.datetime.now(dt.UTC).date().isoformat()
    capsys.readouterr()

    # WHEN an analyst, the nightly and the compaction read the day
    codes = [
        cli.main(["sql", "SELECT sum(amount) AS total FROM ledger"]),
        cli.main(["reconcile", "--date", today, "--provisional"]),
        cli.main(["compact", "--date", today]),
    ]

    # THEN each refuses with the lake's own exit code, naming the file, its table and day, and the remedy
    assert codes == [5, 5, 5]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert f"the lake's committed file {path} (table ledger, day {today})" in line
        assert "restore its noncurrent version" in line
    # AND once the file's version is restored (here: its bytes put back), the day is whole again
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0


def test_a_restored_table_continues_the_lakes_versions_and_reconciles_clean(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from support.recovery import restore_as_aws_does, table_items

    # GIVEN a backup taken mid-day, then writes acknowledged after it (a new wallet among them),
    # all in the lake
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=4, seed=11)
    drain(settings, batch_size=10)
    commit(settings)
    backup = table_items(settings)
    first, second, third = list(writer.model.wallets)[:3]
    writer.deposit(first, 700_000)
    writer.transfer(first, second, 300_000)
    late = writer.open_wallet()
    writer.deposit(late, 50_000)
    drain(settings, batch_size=10)
    commit(settings)
    # AND the table restored to the backup's point, as AWS makes it (no stream, no TTL)
    restore_as_aws_does(settings, backup)

    # WHEN the operator takes it back into service as the runbook says
    assert cli.main(["restore"]) == 0
    out = capsys.readouterr().out
    # AND clients write again, and the consumer reads the new stream
    writer.deposit(first, 11)
    writer.transfer(second, third, 7)
    writer.deposit(late, 3)
    drain(settings, batch_size=10)
    commit(settings)

    # THEN the report named each wallet's lost versions, the lake holds every entry once with
    # versions 1..N (none reused), and the night reconciles clean
    assert f"{first}: lost versions" in out
    assert f"{late}: created after the restore point" in out
    assert "stream on, TTL on" in out
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0


@pytest.mark.parametrize("order", ["in-order", "reversed"])
def test_a_backfill_from_incremental_exports_of_the_outage_is_exact(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    from support.recovery import table_items, write_incremental_export

    # GIVEN a lake that holds the first hours, then an outage past the stream's 24 hours covered
    # by two incremental exports, one per window (§4: INCREMENTAL_EXPORT), the first also carrying
    # a TTL deletion of a transaction written before its window
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=6, seed=12)
    drain(settings, batch_size=20)
    commit(settings)
    consumed = len(stream_sequences(settings))
    start, before = dt.datetime.now(dt.UTC), table_items(settings)
    writer.workload(wallets=2, deposits=5, transfers=8, seed=13)
    middle, during = dt.datetime.now(dt.UTC), table_items(settings)
    writer.workload(wallets=2, deposits=4, transfers=6, seed=14)
    end, after = dt.datetime.now(dt.UTC), table_items(settings)
    expired = [item for item in before if item["entity"]["S"] == "transaction"][:2]
    exports = [
        write_incremental_export(
            settings, "01772000000000-inc00001", before, during, (start, middle), deleted=expired
        ),
        write_incremental_export(settings, "01772000000000-inc00002", during, after, (middle, end)),
    ]
    # AND the stream lost the outage's first 20 records
    trimmed_below = stream_sequences(settings)[consumed + 20]
    summary = drain(settings, batch_size=20, session=TrimmedSession(settings, trimmed_below))  # type: ignore[arg-type]
    assert summary.trimmed_shards
    commit(settings)

    # WHEN the operator replays each incremental export, in either order
    for uri in exports if order == "in-order" else exports[::-1]:
        assert cli.main(["replay", "--export", uri]) == 0

    # THEN every entry and wallet is there once and the night reconciles clean
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0


def test_an_export_replayed_in_parts_each_bounded_to_its_wallets_is_exact(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN an outage past the stream's 24 hours and one export of the table
    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=6, deposits=10, transfers=14, seed=15)
    export = write_export(settings, "01772000000000-part0001")
    # WHEN the operator replays it in three parts (each holds a third of the wallets in memory),
    # the last part twice
    for part in ("0/3", "1/3", "2/3", "2/3"):
        assert cli.main(["replay", "--export", export, "--part", part]) == 0
    # THEN every entry (both legs of every transfer, whichever parts their wallets are in) and
    # every wallet is there once, and the night reconciles clean
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0
    assert cli.main(["replay", "--quarantine", "--part", "1/3"]) == 1
    assert "--part applies to --export only" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["stream-range", "export"])
def test_an_altered_row_and_a_stranger_at_ones_version_are_repaired_from_the_source_of_truth(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
) -> None:
    # GIVEN a lake exact to the last entry, then damaged: one row's amounts altered (an edited
    # file: chain_break), one entry gone and another entry put at its version (mismatch)
    import pyarrow.compute as pc
    from pyiceberg.expressions import In, Reference
    from pyiceberg.expressions.literals import literal

    settings = operator_settings(make_settings, monkeypatch)
    writer = TableWriter(settings.table)
    writer.workload(wallets=3, deposits=6, transfers=6, seed=16)
    drain(settings, batch_size=50)
    commit(settings)
    table = load_table(settings, "ledger", open_catalog(settings))
    rows = table.scan().to_arrow().sort_by([("wallet_id", "ascending"), ("wallet_version", "ascending")])
    altered, gone = rows.slice(2, 1).to_pylist()[0], rows.slice(6, 1).to_pylist()[0]
    altered = {**altered, "amount": altered["amount"] + 1, "delta": altered["delta"] + 1}
    stranger = {**gone, "entry_id": "not-a-real-txn:credit", "txn_id": "not-a-real-txn"}
    damaged = pa.Table.from_pylist([altered, stranger], schema=rows.schema)
    ids = {literal(altered["entry_id"]), literal(gone["entry_id"])}
    table.overwrite(damaged, overwrite_filter=In(term=Reference("entry_id"), values=ids))
    assert cli.main(["snapshot"]) == 0
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert cli.main(["reconcile", "--date", today, "--provisional"]) == 1
    capsys.readouterr()

    # WHEN the operator repairs the day from the stream (within 24 hours) or an export (after)
    if source == "stream-range":
        sequences = stream_sequences(settings)
        arn = boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]
        shard = boto3.client("dynamodbstreams").describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][
            0
        ]
        argv = ["--stream-range", f"{shard['ShardId']}:{sequences[0]}-{sequences[-1]}"]
    else:
        argv = ["--export", write_export(settings, "01772000000000-repair01")]
    assert cli.main(["repair", "--date", today, *argv]) == 0

    # THEN the lake is exact again and the night reconciles clean
    out = capsys.readouterr().out
    assert "1 entries made the source's" in out
    assert "1 missing entries added" in out
    assert "1 entries at another's version removed" in out
    assert_exact_lake(settings, writer)
    assert reconciled_clean(settings, monkeypatch) == 0
    assert pc.sum(scan(settings, "ledger").column("delta")).as_py() == sum(writer.model.balances().values())
