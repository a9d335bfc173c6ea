"""The Lambda handler on the embedded stack's S3: idempotent landing, day partitions, failures, metrics."""

from __future__ import annotations

import datetime as dt
import importlib
import json
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest
from support.lambda_context import FakeLambdaContext
from support.stream_records import (
    STREAM_ARN,
    LedgerModel,
    RecordFactory,
    lake_keys,
    lambda_event,
    ms,
    read_lake_table,
    transaction_image,
)

from contracts import lambda_metrics
from contracts.lake_layout import landing_key, stream_label
from contracts.lake_tables import LEDGER
from contracts.settings import Settings
from lake.objects import get_table
from stream_processor.batch import process_batch
from walletlake.handlers import stream as stream_handler

pytestmark = pytest.mark.stack

LABEL = stream_label(STREAM_ARN)


@pytest.fixture
def start_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Settings], ModuleType]]:
    """Start the handler module as Lambda does: the deployment's variables set, then imported."""

    def start(settings: Settings) -> ModuleType:
        for name, value in settings.to_env(stream_handler.REQUIRED_VARIABLES).items():
            monkeypatch.setenv(name, value)
        return importlib.reload(stream_handler)

    yield start
    monkeypatch.undo()
    importlib.reload(stream_handler)  # the next test starts it afresh


@pytest.fixture
def handler_env(settings: Settings, start_handler: Callable[[Settings], ModuleType]) -> Settings:
    """The handler started with its settings from the environment, as on Lambda."""
    start_handler(settings)
    return settings


def history(start: dt.datetime, *, transfers: int = 3) -> tuple[LedgerModel, list[dict[str, Any]]]:
    model = LedgerModel(start=start)
    a, opened_a = model.open_wallet()
    b, opened_b = model.open_wallet()
    records = [*opened_a, *opened_b, *model.deposit(a, 50_000_000)]
    for index in range(transfers):
        records += model.transfer(a, b, 1_000_000 + index)
    return model, records


def s3_bodies(settings: Settings, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    client = boto3.client("s3", region_name=settings.region)
    return {key: get_table(client, settings.bucket, key).to_pylist() for key in keys}


def without_ingestion_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in ("ingested_at", "quarantined_at")} for row in rows]


def test_same_event_twice_leaves_the_same_objects(handler_env: Settings) -> None:
    # GIVEN one Lambda event: two wallets, a deposit and three transfers
    model, records = history(dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC))
    event = lambda_event(records)

    # WHEN the handler runs it, then runs it again (Lambda retried it)
    first = stream_handler.handler(event, FakeLambdaContext())
    keys_after_first = lake_keys(handler_env)
    bodies_after_first = s3_bodies(handler_env, keys_after_first)
    second = stream_handler.handler(event, FakeLambdaContext())

    # THEN both succeed, and the lake holds the very same objects with the same rows (no copy added)
    assert first == second == {"batchItemFailures": []}
    first_sequence = records[0]["dynamodb"]["SequenceNumber"]
    day = dt.date(2026, 11, 22)
    assert keys_after_first == [
        landing_key("lake", "ledger", day, STREAM_ARN, first_sequence, 120),  # h10m00
        landing_key("lake", "wallets", day, STREAM_ARN, first_sequence, 120),
    ]
    assert lake_keys(handler_env) == keys_after_first
    again = s3_bodies(handler_env, keys_after_first)
    for key in keys_after_first:
        assert without_ingestion_time(again[key]) == without_ingestion_time(bodies_after_first[key])
    assert sorted(read_lake_table(handler_env, "ledger").column("entry_id").to_pylist()) == sorted(
        entry.entry_id for entry in model.entries
    )


def test_batch_spanning_midnight_lands_in_two_partitions(handler_env: Settings) -> None:
    # GIVEN a batch whose transactions straddle midnight UTC
    model, records = history(dt.datetime(2026, 11, 22, 23, 59, 59, 995_000, tzinfo=dt.UTC), transfers=6)
    created = [int(image["created_at"]["N"]) for image in model.transactions]
    midnight = ms(dt.datetime(2026, 11, 23, tzinfo=dt.UTC))
    assert min(created) < midnight <= max(created)

    # WHEN the handler lands it
    assert stream_handler.handler(lambda_event(records), FakeLambdaContext()) == {"batchItemFailures": []}

    # THEN the ledger has one object per UTC day of created_at, both named after the batch
    first_sequence = records[0]["dynamodb"]["SequenceNumber"]
    ledger_keys = lake_keys(handler_env, "ledger")
    assert ledger_keys == [
        f"lake/ledger/dt=2026-11-22/h23m55-{LABEL}-{first_sequence}.parquet",
        f"lake/ledger/dt=2026-11-23/h00m00-{LABEL}-{first_sequence}.parquet",
    ]
    bodies = s3_bodies(handler_env, ledger_keys)
    for key, rows in bodies.items():
        day = key.split("dt=")[1][:10]
        assert {row["created_at"].date().isoformat() for row in rows} == {day}
    assert sum(len(rows) for rows in bodies.values()) == len(model.entries)


def test_failed_write_asks_lambda_to_retry_from_the_first_record(
    settings: Settings, start_handler: Callable[[Settings], ModuleType]
) -> None:
    # GIVEN a handler started on a lake bucket that does not exist (S3 refuses every PUT)
    start_handler(settings.replace(bucket="walletlake-no-such-bucket"))
    _, records = history(dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC))

    # WHEN the handler runs the batch
    response = stream_handler.handler(lambda_event(records), FakeLambdaContext())

    # THEN it names the batch's first record, so Lambda retries the whole batch in order
    assert response == {"batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]}


class FailingOn:
    """A real S3 client that fails the PUTs of one table (fault injection, everything else is real)."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def put_object(self, **kwargs: Any) -> Any:
        if f"/{self._table}/" in kwargs["Key"]:
            raise ConnectionError("injected: S3 unreachable")
        return self._client.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_partly_written_batch_leaves_nothing_behind(settings: Settings) -> None:
    # GIVEN a batch with ledger and wallets rows, and an S3 that fails the wallets object
    _, records = history(dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC))
    client = FailingOn(boto3.client("s3", region_name=settings.region), "wallets")

    # WHEN the batch is processed
    from lake.writer import LandingWriteError

    with pytest.raises(LandingWriteError, match="could not write"):
        process_batch(records, settings, s3=client)  # type: ignore[arg-type]

    # THEN the ledger object written before the failure was removed: a retry starts clean
    assert lake_keys(settings) == []


def test_quarantined_records_land_under_the_ingestion_day_with_raw_json(handler_env: Settings) -> None:
    # GIVEN a batch with one good deposit and one transaction removed by hand (not TTL)
    records = RecordFactory()
    image = transaction_image(
        txn_id="t-1",
        txn_type="deposit",
        wallet_id="w-1",
        amount=5,
        nonce="n",
        wallet_version=1,
        wallet_balance_after=5,
        created_at=ms(dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC)),
    )
    removed = records.user_remove(image)
    event = lambda_event([records.insert(image), removed])

    # WHEN handled
    assert stream_handler.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}

    # THEN the ledger row lands on its created_at day and the bad record on today's quarantine partition
    today = dt.datetime.now(dt.UTC).date().isoformat()
    keys = lake_keys(handler_env)
    assert [key.rsplit("/", 1)[0] for key in keys] == [
        "lake/ledger/dt=2026-11-20",
        f"lake/quarantine/dt={today}",
    ]
    quarantine = read_lake_table(handler_env, "quarantine").to_pylist()
    assert [(row["reason"], json.loads(row["raw"])) for row in quarantine] == [
        ("REMOVE of a transaction item not made by TTL", removed)
    ]


def test_handler_emits_emf_metrics_and_json_logs(
    handler_env: Settings, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a batch with a TTL expiry and a quarantined record besides 2 wallets, 1 deposit, 3 transfers
    model, records = history(dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC))
    factory = model.records
    records += [factory.ttl_remove(model.transactions[0]), factory.user_remove(model.transactions[1])]

    # WHEN handled
    stream_handler.handler(lambda_event(records), FakeLambdaContext())

    # THEN one EMF blob in namespace walletlake carries the batch's figures
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    emf = [blob for blob in printed if "_aws" in blob]
    assert len(emf) == 1
    directive = emf[0]["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "walletlake"
    names = {metric["Name"] for metric in directive["Metrics"]}
    assert {
        "RecordsIn",
        "LedgerRows",
        "TtlExpired",
        "Quarantined",
        "BytesWritten",
        "MaxRecordAgeSeconds",
    } <= names
    # AND every metric the dashboard graphs is among them (a failed write's counter aside)
    assert set(lambda_metrics.CONSUMER_GRAPHED) - {lambda_metrics.BATCH_WRITE_FAILURES} <= names
    ledger_rows = 1 + 2 * 3
    ignored = 2 + 1 + 3  # user claims, and the transaction INSERTs of the deposit and the transfers
    figures = {
        name: emf[0][name] for name in ("RecordsIn", "LedgerRows", "TtlExpired", "Quarantined", "Ignored")
    }
    assert figures == {
        "RecordsIn": [len(records)],
        "LedgerRows": [ledger_rows],
        "TtlExpired": [1],
        "Quarantined": [1],
        "Ignored": [ignored],
    }
    assert emf[0]["BytesWritten"][0] > 0
    # AND the JSON log line says what landed, with Lambda's context
    landed = [record for record in caplog.records if record.getMessage() == "batch landed"]
    line = json.loads(stream_handler.logger.registered_formatter.format(landed[0]))
    assert (line["level"], line["service"], line["ledger_rows"]) == ("INFO", "stream_processor", ledger_rows)
    assert line["function_request_id"] == FakeLambdaContext.aws_request_id


def test_ledger_object_reads_back_with_the_lake_schema(handler_env: Settings) -> None:
    # GIVEN a landed batch
    _, records = history(dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC))
    stream_handler.handler(lambda_event(records), FakeLambdaContext())

    # THEN its ledger object has exactly the lake's ledger schema, zstd-compressed
    key = lake_keys(handler_env, "ledger")[0]
    client = boto3.client("s3", region_name=handler_env.region)
    body = client.get_object(Bucket=handler_env.bucket, Key=key)["Body"].read()
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet_file = pq.ParquetFile(pa.BufferReader(body))
    assert parquet_file.schema_arrow.equals(LEDGER)
    assert parquet_file.metadata.row_group(0).column(0).compression == "ZSTD"
