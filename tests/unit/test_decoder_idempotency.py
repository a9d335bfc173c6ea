"""The write path's idempotency records (entity ``idempotency``) make no row: ignored and counted."""

from __future__ import annotations

import datetime as dt
from typing import Any

from support.stream_records import RecordFactory, n, s

from contracts.wallets_table import ENTITY_IDEMPOTENCY, Attr
from stream_processor.decoder import decode_records

INGESTED_MS = int(dt.datetime(2026, 11, 22, 5, tzinfo=dt.UTC).timestamp() * 1000)


def idempotency_image(state: str) -> dict[str, Any]:
    return {
        Attr.PK: s(f"w-1_nonce-1#{ENTITY_IDEMPOTENCY}"),
        Attr.ENTITY: s(ENTITY_IDEMPOTENCY),
        "state": s(state),
        Attr.EXPIRES_AT: n(1_795_400_000),
    }


def test_idempotency_inserts_modifies_and_removes_are_ignored_and_counted() -> None:
    # GIVEN an idempotency record's whole life: written, completed, expired by TTL, and deleted
    records = RecordFactory()
    batch = [
        records.insert(idempotency_image("pending")),
        records.modify(idempotency_image("pending"), idempotency_image("done")),
        records.ttl_remove(idempotency_image("done")),
        records.user_remove(idempotency_image("done")),
    ]

    # WHEN decoded
    decoded = decode_records(batch, ingested_at_ms=INGESTED_MS)

    # THEN no row and no quarantine: each is counted as ignored
    assert (decoded.ledger_rows, decoded.wallet_rows, decoded.quarantined) == (0, 0, 0)
    assert (decoded.ignored, decoded.ttl_expired) == (4, 0)
