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

from contracts.settings import Settings
from lake.committer import commit_landed
from lake.iceberg_catalog import load_table, open_catalog
from stream_processor.consumer import drain
from walletlake import cli

pytestmark = pytest.mark.stack


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
    settings = make_settings(lake_format="iceberg")
    for name, value in operator_env(settings).items():
        monkeypatch.setenv(name, value)
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
