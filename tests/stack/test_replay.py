"""``walletlake replay``: quarantined, dead-lettered and exported records land once, idempotently.

Everything runs against the embedded stack: real stream records from DynamoDB Local, an SQS queue
and S3 on the moto server, the stream processor's own decoder and writer.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import time
import uuid
from typing import Any

import boto3
import pyarrow as pa
import pytest
from support.stream_records import TableWriter, assert_exact_ledger

from contracts.lake_layout import landing_key, partition_prefix, table_prefix
from contracts.lake_tables import LEDGER, QUARANTINE, WALLETS
from contracts.settings import Settings
from contracts.wallets_table import transaction_key, wallet_key
from lake.objects import get_table, list_keys, put_table
from stream_processor.dead_letters import batch_info
from stream_processor.lambda_records import lambda_record, ttl_identity
from stream_processor.replay import (
    replay_dead_letters,
    replay_export,
    replay_quarantine,
)
from walletlake.cli import main
from walletlake.local import EmbeddedStack

pytestmark = pytest.mark.stack

CREATED_MS = 1_772_000_000_000  # 2026-02-25T06:13:20Z
DAY = dt.date(2026, 2, 25)
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/wallets/stream/2026-02-25T00:00:00.000"


# ------------------------------------------------------------------------------ factories


def wallet_item(wallet_id: str, *, balance: int = 0, version: int = 0) -> dict[str, Any]:
    """A wallet item as the write path stores it, in DynamoDB JSON."""
    return {
        "pk": {"S": wallet_key(wallet_id)},
        "entity": {"S": "wallet"},
        "wallet_id": {"S": wallet_id},
        "user_id": {"S": f"user-{wallet_id}"},
        "balance": {"N": str(balance)},
        "version": {"N": str(version)},
        "created_at": {"N": str(CREATED_MS)},
        "updated_at": {"N": str(CREATED_MS)},
    }


def deposit_item(
    wallet_id: str,
    amount: int,
    *,
    version: int,
    balance_after: int,
    nonce: str,
    expires_at: int | None = None,
) -> dict[str, Any]:
    """A deposit's transaction item, in DynamoDB JSON.

    Its TTL attribute is eight hours after ``created_at`` (in February 2026, long past) unless
    ``expires_at`` says otherwise: an item put into a live table needs a future one, or DynamoDB
    Local's TTL sweep deletes it within seconds and its REMOVE joins the stream among the records
    the test reads.
    """
    created = CREATED_MS + version * 1000
    return {
        "pk": {"S": transaction_key(wallet_id, nonce, None)},
        "entity": {"S": "transaction"},
        "txn_id": {"S": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{wallet_id}/{nonce}"))},
        "type": {"S": "deposit"},
        "wallet_id": {"S": wallet_id},
        "amount": {"N": str(amount)},
        "nonce": {"S": nonce},
        "request_hash": {"S": "h"},
        "wallet_version": {"N": str(version)},
        "wallet_balance_after": {"N": str(balance_after)},
        "created_at": {"N": str(created)},
        "expires_at": {"N": str(created // 1000 + 28_800 if expires_at is None else expires_at)},
    }


def transfer_item(payer: str, payee: str, amount: int, *, nonce: str) -> dict[str, Any]:
    item = deposit_item(payer, amount, version=2, balance_after=1_000_000 - amount, nonce=nonce)
    item.update(
        {
            "type": {"S": "transfer"},
            "to_wallet_id": {"S": payee},
            "to_wallet_version": {"N": "1"},
            "to_wallet_balance_after": {"N": str(amount)},
        }
    )
    return item


def stream_record(event: str, image: dict[str, Any], sequence: str, *, old: bool = False) -> dict[str, Any]:
    """A Lambda-shaped stream record of ``image``."""
    change: dict[str, Any] = {
        "Keys": {"pk": image["pk"]},
        "OldImage" if old else "NewImage": image,
        "SequenceNumber": sequence,
        "ApproximateCreationDateTime": CREATED_MS // 1000,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    return {
        "eventID": sequence,
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "eventSourceARN": ARN,
        "dynamodb": change,
    }


def quarantine_row(record: Any, reason: str = "decoder bug #12") -> dict[str, Any]:
    return {
        "reason": reason,
        "raw": json.dumps(record, sort_keys=True),
        "stream_sequence": record["dynamodb"]["SequenceNumber"] if isinstance(record, dict) else None,
        "quarantined_at": dt.datetime(2026, 2, 25, 7, 0, tzinfo=dt.UTC),
    }


def _s3() -> Any:
    return boto3.client("s3")


def _quarantine_key(settings: Settings) -> str:
    return (
        f"{partition_prefix(settings.lake_prefix, 'quarantine', DAY)}{'2026-02-25T00-00-00.000-100'}.parquet"
    )


def _write_quarantine(settings: Settings, rows: list[dict[str, Any]]) -> str:
    key = _quarantine_key(settings)
    put_table(_s3(), settings.bucket, key, pa.Table.from_pylist(rows, schema=QUARANTINE))
    return key


def _keys(settings: Settings, table: str) -> list[str]:
    return list_keys(_s3(), settings.bucket, table_prefix(settings.lake_prefix, table), ".parquet")


# ------------------------------------------------------------------------------ quarantine


@pytest.fixture
def quarantined(settings: Settings) -> str:
    """A quarantine object: a deposit and a wallet the old decoder refused, and a true anomaly."""
    deposit = stream_record(
        "INSERT", deposit_item("wa", 5_000_000, version=1, balance_after=5_000_000, nonce="n1"), "101"
    )
    wallet = stream_record("INSERT", wallet_item("wa"), "100")
    anomaly = stream_record(
        "REMOVE", deposit_item("wb", 7, version=1, balance_after=7, nonce="n9"), "102", old=True
    )
    return _write_quarantine(
        settings, [quarantine_row(wallet), quarantine_row(deposit), quarantine_row(anomaly)]
    )


def test_quarantine_replay_lands_what_now_decodes_and_keeps_the_rest(
    settings: Settings, quarantined: str
) -> None:
    # WHEN the quarantine is replayed
    report = replay_quarantine(settings)
    # THEN the deposit and the wallet are in the lake, the anomaly stays quarantined
    assert (report.records, report.ledger_rows, report.wallets, report.still_failing) == (3, 1, 1, 1)
    assert report.files_written == 2
    assert report.days == {DAY}
    ledger_keys, wallet_keys = _keys(settings, "ledger"), _keys(settings, "wallets")
    assert len(ledger_keys) == len(wallet_keys) == 1
    name = ledger_keys[0].removeprefix(partition_prefix(settings.lake_prefix, "ledger", DAY))
    assert re.match(r"^h\d\dm\d\d-replay-", name), name  # the slot of its rows, then what was replayed
    ledger = get_table(_s3(), settings.bucket, ledger_keys[0], LEDGER).to_pylist()
    assert [
        (r["wallet_id"], r["amount"], r["delta"], r["wallet_version"], r["stream_sequence"]) for r in ledger
    ] == [("wa", 5_000_000, 5_000_000, 1, "101")]
    assert get_table(_s3(), settings.bucket, wallet_keys[0], WALLETS).column("wallet_id").to_pylist() == [
        "wa"
    ]
    left = get_table(_s3(), settings.bucket, quarantined, QUARANTINE).to_pylist()
    assert [json.loads(row["raw"])["eventName"] for row in left] == ["REMOVE"]
    assert "REMOVE" in left[0]["reason"]


def test_quarantine_replay_twice_adds_nothing(settings: Settings, quarantined: str) -> None:
    replay_quarantine(settings)
    before = (_keys(settings, "ledger"), _keys(settings, "wallets"), _keys(settings, "quarantine"))
    # WHEN replayed again
    again = replay_quarantine(settings)
    # THEN only the anomaly is read, still fails, and no object is added
    assert (again.records, again.ledger_rows, again.still_failing, again.files_written) == (1, 0, 1, 0)
    assert (_keys(settings, "ledger"), _keys(settings, "wallets"), _keys(settings, "quarantine")) == before


def test_quarantine_object_is_deleted_when_everything_replays(settings: Settings) -> None:
    record = stream_record("INSERT", wallet_item("wc"), "200")
    key = _write_quarantine(settings, [quarantine_row(record)])
    report = replay_quarantine(settings, days=[DAY])
    assert (report.wallets, report.still_failing, report.sources_cleared) == (1, 0, 1)
    assert key not in _keys(settings, "quarantine")


def test_quarantine_dry_run_writes_and_deletes_nothing(settings: Settings, quarantined: str) -> None:
    report = replay_quarantine(settings, dry_run=True)
    assert (report.ledger_rows, report.wallets, report.still_failing, report.files_written) == (1, 1, 1, 0)
    assert _keys(settings, "ledger") == []
    assert _keys(settings, "quarantine") == [quarantined]
    assert get_table(_s3(), settings.bucket, quarantined, QUARANTINE).num_rows == 3


def test_quarantine_replay_of_another_day_reads_nothing(settings: Settings, quarantined: str) -> None:
    report = replay_quarantine(settings, days=[DAY + dt.timedelta(days=1)])
    assert report.sources_read == 0


def test_unparseable_raw_stays_quarantined(settings: Settings) -> None:
    row = {**quarantine_row(stream_record("INSERT", wallet_item("wd"), "300")), "raw": "{not json"}
    key = _write_quarantine(settings, [row])
    report = replay_quarantine(settings)
    assert (report.unreadable, report.files_written) == (1, 0)
    assert get_table(_s3(), settings.bucket, key, QUARANTINE).column("raw").to_pylist() == ["{not json"]


# ------------------------------------------------------------------------------ dead-letter queue


def _sqs(stack: EmbeddedStack) -> Any:
    assert stack.endpoints is not None
    return boto3.client("sqs", endpoint_url=stack.endpoints.aws)


def _committed_records(settings: Settings, expected: int) -> tuple[str, str, list[dict[str, Any]]]:
    """Stream ARN, shard id and the raw records of the table's stream, polled until ``expected``."""
    arn = boto3.client("dynamodb").describe_table(TableName=settings.table)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    deadline = time.monotonic() + 30
    records: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"
        ]
        records = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        if len(records) >= expected:
            return arn, shard, records
        time.sleep(0.2)
    raise AssertionError(f"the stream has {len(records)} of {expected} records")


def _failure_message(arn: str, shard: str, first: str, last: str, size: int) -> str:
    """What Lambda sends to an on-failure destination for a DynamoDB stream batch."""
    return json.dumps(
        {
            "requestContext": {
                "requestId": "r1",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": 3,
            },
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "version": "1.0",
            "timestamp": "2026-02-25T06:20:00.000Z",
            BATCH_INFO_KEY: {
                "shardId": shard,
                "startSequenceNumber": first,
                "endSequenceNumber": last,
                "approximateArrivalOfFirstRecord": "2026-02-25T06:13:20Z",
                "approximateArrivalOfLastRecord": "2026-02-25T06:13:21Z",
                "batchSize": size,
                "streamArn": arn,
            },
        }
    )


BATCH_INFO_KEY = "DDBStreamBatchInfo"


def test_dead_lettered_batch_is_read_again_and_landed_under_its_own_name(
    stack: EmbeddedStack, settings: Settings, queue_url: str
) -> None:
    # GIVEN a wallet and two deposits committed (still hot: TTL must not delete them, or the REMOVE
    # of the first can land between the two inserts), and the DLQ naming the batch of the two deposits
    table = boto3.client("dynamodb")
    hot_until = int(time.time()) + 86_400
    table.put_item(TableName=settings.table, Item=wallet_item("we"))
    for amount, version, balance_after, nonce in ((3, 1, 3, "a"), (4, 2, 7, "b")):
        item = deposit_item(
            "we", amount, version=version, balance_after=balance_after, nonce=nonce, expires_at=hot_until
        )
        table.put_item(TableName=settings.table, Item=item)
    arn, shard, raw = _committed_records(settings, 3)
    assert [record["eventName"] for record in raw[:3]] == ["INSERT"] * 3
    first, last = raw[1]["dynamodb"]["SequenceNumber"], raw[2]["dynamodb"]["SequenceNumber"]
    sqs = _sqs(stack)
    sqs.send_message(QueueUrl=queue_url, MessageBody=_failure_message(arn, shard, first, last, 2))
    # WHEN the DLQ is replayed
    report = replay_dead_letters(settings, queue_url, sqs=sqs)
    # THEN exactly the two deposits landed, under the name the consumer gives that batch
    assert (report.records, report.ledger_rows, report.wallets, report.sources_cleared) == (2, 2, 0, 1)
    day = dt.datetime.fromtimestamp(CREATED_MS / 1000, dt.UTC).date()
    key = landing_key(settings.lake_prefix, "ledger", day, arn, first, CREATED_MS // 300_000 % 288)
    assert _keys(settings, "ledger") == [key]
    rows = get_table(_s3(), settings.bucket, key, LEDGER).to_pylist()
    assert [(r["wallet_version"], r["balance_after"], r["stream_sequence"]) for r in rows] == [
        (1, 3, first),
        (2, 7, last),
    ]
    # AND the message is gone; a second replay finds nothing
    assert replay_dead_letters(settings, queue_url, sqs=sqs).sources_read == 0


def test_dead_letter_dry_run_keeps_the_message(
    stack: EmbeddedStack, settings: Settings, queue_url: str
) -> None:
    boto3.client("dynamodb").put_item(TableName=settings.table, Item=wallet_item("wf"))
    arn, shard, raw = _committed_records(settings, 1)
    sequence = raw[0]["dynamodb"]["SequenceNumber"]
    sqs = _sqs(stack)
    sqs.send_message(QueueUrl=queue_url, MessageBody=_failure_message(arn, shard, sequence, sequence, 1))
    report = replay_dead_letters(settings, queue_url, sqs=sqs, dry_run=True)
    assert (report.records, report.wallets, report.files_written, report.sources_cleared) == (1, 1, 0, 0)
    assert _keys(settings, "wallets") == []
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert (
        int(attributes["ApproximateNumberOfMessages"])
        + int(attributes["ApproximateNumberOfMessagesNotVisible"])
        == 1
    )


def test_dead_letter_outside_the_stream_is_expired_and_kept(
    stack: EmbeddedStack, settings: Settings, queue_url: str
) -> None:
    boto3.client("dynamodb").put_item(TableName=settings.table, Item=wallet_item("wg"))
    arn, _, _ = _committed_records(settings, 1)
    sqs = _sqs(stack)
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=_failure_message(
            arn, "shardId-00000001772000000000-deadbeef", "000000000000000000001", "000000000000000000002", 2
        ),
    )
    sqs.send_message(QueueUrl=queue_url, MessageBody="not a batch record")
    report = replay_dead_letters(settings, queue_url, sqs=sqs)
    assert (report.expired, report.unreadable, report.sources_cleared, report.files_written) == (1, 1, 0, 0)
    assert any("backfill" in problem for problem in report.problems)


def test_batch_info_ignores_other_messages() -> None:
    assert batch_info("{}") is None
    assert batch_info("not json") is None
    info = batch_info(_failure_message("arn:s", "sh", "10", "20", 2))
    assert info is not None
    assert (info.stream_arn, info.shard_id, info.start_sequence_number, info.end_sequence_number) == (
        "arn:s",
        "sh",
        "10",
        "20",
    )


def test_lambda_record_of_a_local_ttl_deletion_is_what_replay_feeds_the_decoder() -> None:
    raw = {"eventName": "UNKNOWN_TO_SDK_VERSION", "dynamodb": {"OldImage": {}, "SequenceNumber": "5"}}
    record = lambda_record(raw, ARN)
    assert (record["eventName"], record["userIdentity"]) == ("REMOVE", ttl_identity())


# ------------------------------------------------------------------------------ export


def _write_export(settings: Settings, export_id: str) -> str:
    items = [
        wallet_item("wp", balance=1_000_000 - 250, version=2),
        wallet_item("wq", balance=250, version=1),
        {"pk": {"S": "user-wp#user"}, "entity": {"S": "user"}, "wallet_id": {"S": "wp"}},
        deposit_item("wp", 1_000_000, version=1, balance_after=1_000_000, nonce="d1"),
        transfer_item("wp", "wq", 250, nonce="t1"),
    ]
    body = gzip.compress("".join(json.dumps({"Item": item}) + "\n" for item in items).encode())
    folder = f"exports/AWSDynamoDB/{export_id}/"
    s3 = _s3()
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}manifest-summary.json", Body=b"{}")
    s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/abcdefgh.json.gz", Body=body)
    return f"s3://{settings.bucket}/{folder}"


def test_export_items_become_the_rows_their_stream_records_would_have(settings: Settings) -> None:
    uri = _write_export(settings, "01772000000000-a1b2c3d4")
    # WHEN the export is replayed
    report = replay_export(settings, uri)
    # THEN both wallets, the deposit (one row) and the transfer (two rows) are in the lake
    assert (report.records, report.wallets, report.ledger_rows, report.still_failing) == (4, 2, 3, 0)
    (ledger_key,) = _keys(settings, "ledger")
    assert ledger_key.endswith("-export-01772000000000-a1b2c3d4-abcdefgh-0.parquet")  # after its slot
    rows = get_table(_s3(), settings.bucket, ledger_key, LEDGER).to_pylist()
    assert sorted((r["wallet_id"], r["direction"], r["delta"], r["wallet_version"]) for r in rows) == [
        ("wp", "credit", 1_000_000, 1),
        ("wp", "debit", -250, 2),
        ("wq", "credit", 250, 1),
    ]
    assert {r["stream_sequence"] for r in rows} == {"export:01772000000000-a1b2c3d4"}
    # AND a second run rewrites the same objects
    before = _keys(settings, "ledger") + _keys(settings, "wallets")
    replay_export(settings, uri)
    assert _keys(settings, "ledger") + _keys(settings, "wallets") == before


def test_an_export_of_the_single_write_path_numbers_every_entry_as_the_stream_did(
    settings: Settings,
) -> None:
    # GIVEN wallets, deposits and transfers committed by the write path's own transactions
    writer = TableWriter(settings.table)
    writer.workload(wallets=4, deposits=8, transfers=20, seed=3)
    # AND a point-in-time export of the table: its items split over two data files
    items = boto3.client("dynamodb").scan(TableName=settings.table, ConsistentRead=True)["Items"]
    folder = "exports/AWSDynamoDB/01772000000000-e5f6a7b8/"
    s3 = _s3()
    export_time = dt.datetime.now(dt.UTC).isoformat()
    s3.put_object(
        Bucket=settings.bucket,
        Key=f"{folder}manifest-summary.json",
        Body=json.dumps({"exportTime": export_time}),
    )
    for index, part in enumerate((items[::2], items[1::2])):
        body = gzip.compress("".join(json.dumps({"Item": item}) + "\n" for item in part).encode())
        s3.put_object(Bucket=settings.bucket, Key=f"{folder}data/part{index}.json.gz", Body=body)

    # WHEN the export is replayed
    report = replay_export(settings, f"s3://{settings.bucket}/{folder}")

    # THEN every entry is in the lake once, with the version and balance the stream would carry
    assert (report.wallets, report.ledger_rows, report.still_failing, report.problems) == (
        4,
        8 + 2 * 20,
        0,
        [],
    )
    ledger = pa.concat_tables(
        [get_table(s3, settings.bucket, key, LEDGER) for key in _keys(settings, "ledger")]
    )
    assert_exact_ledger(ledger, writer.model.entries)
    assert {row["stream_sequence"] for row in ledger.to_pylist()} == {"export:01772000000000-e5f6a7b8"}


def test_an_export_without_its_time_cannot_number_entries(settings: Settings) -> None:
    writer = TableWriter(settings.table)
    writer.workload(wallets=2, deposits=1, transfers=0)
    items = boto3.client("dynamodb").scan(TableName=settings.table, ConsistentRead=True)["Items"]
    folder = "exports/AWSDynamoDB/01772000000000-0000/"
    body = gzip.compress("".join(json.dumps({"Item": item}) + "\n" for item in items).encode())
    _s3().put_object(Bucket=settings.bucket, Key=f"{folder}data/part.json.gz", Body=body)
    with pytest.raises(FileNotFoundError, match="exportTime"):
        replay_export(settings, f"s3://{settings.bucket}/{folder}")


def test_export_folder_without_data_is_refused(settings: Settings) -> None:
    with pytest.raises(FileNotFoundError, match="DYNAMODB_JSON"):
        replay_export(settings, f"s3://{settings.bucket}/nothing/AWSDynamoDB/x/")


# ------------------------------------------------------------------------------ command line


def _environ_for(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALLETLAKE_BUCKET", settings.bucket)
    monkeypatch.setenv("WALLETLAKE_LAKE_PREFIX", settings.lake_prefix)
    monkeypatch.setenv("WALLETLAKE_TABLE", settings.table)


def test_cli_dry_run_prints_json_and_exits_1_while_records_still_fail(
    settings: Settings, quarantined: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _environ_for(settings, monkeypatch)
    code = main(["replay", "--quarantine", "--dry-run", "--json"])
    values = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (values["source"], values["dry_run"], values["ledger_rows"], values["still_failing"]) == (
        "quarantine",
        True,
        1,
        1,
    )


def test_cli_replay_prints_the_next_steps(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _environ_for(settings, monkeypatch)
    record = stream_record("INSERT", deposit_item("wh", 9, version=1, balance_after=9, nonce="z"), "400")
    _write_quarantine(settings, [quarantine_row(record)])
    code = main(["replay", "--quarantine"])
    out = capsys.readouterr().out
    assert code == 0
    assert "quarantine: 1 read, 1 records were decoded" in out
    assert "landed 1 files" in out
    assert f"walletlake compact --date {DAY} && walletlake reconcile --date {DAY}" in out


def test_cli_refuses_date_without_quarantine(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _environ_for(settings, monkeypatch)
    code = main(["replay", "--export", "s3://b/x/", "--date", "2026-02-25"])
    assert code == 1
    assert "--date applies to --quarantine only" in capsys.readouterr().err
