"""The movement-type registry is the one place a type is said: everything that depends on a type follows it.

A test-only type registered here (an external credit, an external debit) is posted, decoded,
numbered from an export and summed by the conservation SQL as exactly what its legs say, with no
other module touched; an unregistered type is refused everywhere, never taken for a credit; and no
SQL file or type-dependent module names a type itself.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from support.stream_records import LedgerModel

from contracts.caller_permissions import OPERATIONS, ROUTES
from contracts.lake_tables import LEDGER, STREAM_TABLES
from contracts.movement_types import (
    ADDRESSED,
    FLOW_IN,
    MOVEMENT_TYPES,
    TARGET,
    LegSpec,
    MovementType,
    MovementTypeError,
    registered,
)
from contracts.wallets_table import DIRECTION_CREDIT, DIRECTION_DEBIT, Attr
from queries import get_query, list_queries
from queries._athena_dialect import lake_schema, to_duckdb
from queries._duckdb import connect
from queries._parameters import render
from stream_processor.decoder import decode_records
from stream_processor.export_entries import number_entries
from wallet.commands import Deposit
from wallet.posting import legs_of, post, wallet_writes

#: A test-only type: money enters the addressed wallet from outside (an interest payment, say).
INTEREST = MovementType("test_interest", "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),))
#: A test-only type: money leaves the system from the addressed wallet (a payout to a bank).
PAYOUT = MovementType("test_payout", "transfer", (LegSpec(ADDRESSED, DIRECTION_DEBIT, None),))

#: The modules whose behaviour depends on a movement type: none may name one (the registry does).
TYPE_READERS = (
    "wallet/posting.py",
    "wallet/group_commit.py",
    "wallet/write_requests.py",
    "wallet/authorization.py",
    "stream_processor/decoder.py",
    "stream_processor/export_entries.py",
    "queries/reconciliation_rules.py",
    "queries/_catalog.py",
    "walletlake/demo.py",
)
#: The only place in a type reader that names types: the compare-and-swap write path's items, which
#: are history (they only ever held deposits and transfers).
_LEGACY_FUNCTION = "_legacy_ledger"


@pytest.fixture
def test_types() -> Iterator[None]:
    with registered(INTEREST), registered(PAYOUT):
        yield


def test_every_type_is_asked_for_through_a_route_of_its_operation() -> None:
    # THEN each registered type's permission is an operation the caller map knows, served by a route
    for kind in MOVEMENT_TYPES.values():
        assert kind.operation in OPERATIONS
        assert any(route.operation == kind.operation and route.method == "PUT" for route in ROUTES), kind
    # AND deposits create money, transfers move it, as the registry says
    assert [(kind.name, kind.flow, kind.internal) for kind in MOVEMENT_TYPES.values()] == [
        ("deposit", FLOW_IN, False),
        ("transfer", 0, True),
    ]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (
            MovementType("deposit", "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),)),
            "registered already",
        ),
        (MovementType("x", "withdraw", (LegSpec(ADDRESSED, DIRECTION_DEBIT, None),)), "operation"),  # type: ignore[arg-type]
        (MovementType("x", "deposit", ()), "at least one leg"),
        (
            MovementType(
                "x",
                "deposit",
                (LegSpec(ADDRESSED, DIRECTION_CREDIT, None), LegSpec(TARGET, DIRECTION_CREDIT, None)),
            ),
            "at most one debit and one credit",
        ),
        (MovementType("x", "deposit", (LegSpec(TARGET, DIRECTION_CREDIT, None),)), "addressed wallet"),
        (
            MovementType(
                "x",
                "transfer",
                (LegSpec(ADDRESSED, DIRECTION_DEBIT, TARGET), LegSpec(TARGET, DIRECTION_CREDIT, None)),
            ),
            "one leg",
        ),
        (
            MovementType("x", "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),), (Attr.AMOUNT,)),
            "the items' own",
        ),
        (MovementType("it's", "deposit", (LegSpec(ADDRESSED, DIRECTION_CREDIT, None),)), "plain word"),
    ],
)
def test_the_registry_refuses_a_type_it_could_not_carry(kind: MovementType, reason: str) -> None:
    with pytest.raises(MovementTypeError, match=reason), registered(kind):
        pass
    assert set(MOVEMENT_TYPES) == {"deposit", "transfer"}


def _sql_files(project_root: Path) -> list[Path]:
    return sorted((project_root / "queries" / "sql").rglob("*.sql"))


def test_no_sql_file_names_a_movement_type_and_each_that_compares_types_reads_the_registry(
    project_root: Path,
) -> None:
    for path in _sql_files(project_root):
        body = re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))
        # THEN no registered type is spelled in it
        for name in MOVEMENT_TYPES:
            assert f"'{name}'" not in body, f"{path.name} names the type {name!r}: join movement_legs instead"
        # AND a file that compares types takes them from movement_legs, made from the registry
        if re.search(r"txn_type\s*(=|<>|!=|\bIN\b)", body, re.IGNORECASE) and path.parent.name != "fragments":
            assert "-- @include movement_legs" in path.read_text(encoding="utf-8"), path.name


def test_no_module_that_depends_on_a_type_names_one(project_root: Path) -> None:
    names = set(MOVEMENT_TYPES) | {"TXN_DEPOSIT", "TXN_TRANSFER"}
    for module in (*TYPE_READERS, "stream_processor/columns.py"):
        text = (project_root / module).read_text(encoding="utf-8")
        function = ""
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME and token.line.startswith("def "):
                function = token.line.split("(")[0].removeprefix("def ")
            if token.line.lstrip().startswith(("from ", "import ")):
                continue  # a name imported is judged where it is used
            spelled = token.string.strip("\"'") if token.type == tokenize.STRING else token.string
            if token.type in (tokenize.STRING, tokenize.NAME) and spelled in names:
                assert (module, function) == ("stream_processor/columns.py", _LEGACY_FUNCTION), token.start


def test_a_registered_type_reaches_every_query_that_judges_money(test_types: None) -> None:
    # GIVEN two test-only types registered after the catalog was first read
    judged = {query.name for query in list_queries() if "movement_legs (" in query.sql}
    # THEN every query that sums money in, out or between wallets has their legs, the catalog made again
    assert judged == {
        "daily_volume",
        "money_conservation",
        "movements_by_principal",
        "reconcile_transfers",
        "reconcile_wallet_problems",
        "reconcile_wallets",
    }
    for name in judged:
        sql = get_query(name).sql
        assert "('test_interest', 'credit', 1)" in sql
        assert "('test_payout', 'debit', -1)" in sql


def test_posting_gives_a_registered_type_its_legs(test_types: None) -> None:
    # WHEN a payout of 5 and an interest payment of 3 are posted on one wallet
    payout = Deposit("w", 5, "n1", txn_type="test_payout")
    interest = Deposit("w", 3, "n2", txn_type="test_interest")
    # THEN each is one leg from outside, of its own direction
    assert [(leg.wallet_id, leg.direction, leg.delta, leg.counterparty) for leg in legs_of(payout)] == [
        ("w", DIRECTION_DEBIT, -5, None)
    ]
    postings = [
        post(command, now_ms=1, hot_ttl_seconds=1, txn_id=f"t{index}", request_hash="h")
        for index, command in enumerate((interest, payout))
    ]
    # AND the wallet's one update needs funds for the payout after the interest
    [write] = wallet_writes(postings)
    assert (write.delta, write.floor) == (-2, 2)


def test_an_unregistered_type_is_never_posted() -> None:
    with pytest.raises(MovementTypeError, match="unknown movement type 'gift'"):
        legs_of(Deposit("w", 5, "n", txn_type="gift"))


def _records(model: LedgerModel, *moves: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [
        record for txn_type, wallet_id, amount in moves for record in model.move(txn_type, wallet_id, amount)
    ]


def test_the_decoder_checks_an_entry_against_its_types_legs(test_types: None) -> None:
    # GIVEN a wallet paid interest, then paid out, then a payout mislabelled as a credit, then a gift
    model = LedgerModel()
    wallet_id, records = model.open_wallet()
    records += _records(model, ("test_interest", wallet_id, 9), ("test_payout", wallet_id, 4))
    mislabelled = _records(model, ("test_payout", wallet_id, 1))
    mislabelled[0]["dynamodb"]["NewImage"][Attr.ENTRY_DIRECTION] = {"S": DIRECTION_CREDIT}
    gift = _records(model, ("test_interest", wallet_id, 1))
    gift[0]["dynamodb"]["NewImage"][Attr.ENTRY_TYPE] = {"S": "gift"}
    # WHEN the records are decoded
    batch = decode_records([*records, *mislabelled, *gift], ingested_at_ms=1)
    # THEN the two movements are entries of their types, as their legs say
    rows = batch.ledger.select(["txn_type", "direction", "delta", "balance_after"]).to_pylist()
    assert rows == [
        {"txn_type": "test_interest", "direction": "credit", "delta": 9, "balance_after": 9},
        {"txn_type": "test_payout", "direction": "debit", "delta": -4, "balance_after": 5},
    ]
    # AND the mislabelled one and the unregistered one are quarantined with their reasons
    assert batch.quarantine.column("reason").to_pylist() == [
        "test_payout entry that is not a debit without counterparty",
        "unknown transaction type",
    ]


def _export_item(txn_type: str, amount: int, created_at: int) -> dict[str, Any]:
    return {
        Attr.TXN_ID: {"S": f"t{created_at}"},
        Attr.TYPE: {"S": txn_type},
        Attr.WALLET_ID: {"S": "w"},
        Attr.AMOUNT: {"N": str(amount)},
        Attr.NONCE: {"S": f"n{created_at}"},
        Attr.CREATED_AT: {"N": str(created_at)},
        Attr.EXPIRES_AT: {"N": "99"},
    }


def test_an_export_numbers_a_registered_type_by_its_legs_and_never_guesses_another(test_types: None) -> None:
    # GIVEN a wallet at version 2, balance 5: interest of 9, then a payout of 4
    wallet = {
        Attr.WALLET_ID: {"S": "w"},
        Attr.BALANCE: {"N": "5"},
        Attr.VERSION: {"N": "2"},
        Attr.UPDATED_AT: {"N": "2000"},
        Attr.ENTRY_TXN_ID: {"S": "t2000"},
    }
    items = [_export_item("test_interest", 9, 1000), _export_item("test_payout", 4, 2000)]
    # WHEN the export is numbered
    numbered = number_entries([wallet], items, export_time_s=9)
    # THEN the payout is a debit: the wallet walks back from 5 to 9 to 0
    assert [
        (old[Attr.BALANCE]["N"], new[Attr.BALANCE]["N"], new[Attr.ENTRY_DIRECTION]["S"])
        for old, new in numbered.images
    ] == [("9", "5", "debit"), ("0", "9", "credit")]
    # AND an item of no registered type leaves its wallet unnumbered, with the reason, never a credit
    unknown = number_entries([wallet], [*items[:1], _export_item("gift", 4, 2000)], export_time_s=9)
    assert (unknown.images, unknown.problems) == ([], ["wallet w: unknown movement type 'gift'"])


@pytest.fixture
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect()
    yield connection
    connection.close()


def _ledger(rows: list[tuple[str, str, str, int]]) -> pa.Table:
    """Ledger rows ``(txn_id, txn_type, direction, delta)`` of one wallet, every other column filled."""
    created = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    balance, columns = 0, []
    for version, (txn_id, txn_type, direction, delta) in enumerate(rows, 1):
        balance += delta
        columns.append(
            {
                "entry_id": f"{txn_id}:{direction}",
                "txn_id": txn_id,
                "txn_type": txn_type,
                "wallet_id": "w" if direction == DIRECTION_DEBIT or txn_type != "transfer" else "v",
                "direction": direction,
                "amount": abs(delta),
                "delta": delta,
                "wallet_version": version,
                "balance_after": balance,
                "nonce": txn_id,
                "created_at": created,
                "stream_sequence": str(version),
                "ingested_at": created,
            }
        )
    return pa.Table.from_pylist(columns, schema=LEDGER).append_column(
        "dt", pa.array(["2026-03-01"] * len(rows))
    )


def _conservation(duck: duckdb.DuckDBPyConnection, ledger: pa.Table) -> dict[str, Any]:
    duck.register("ledger", ledger)
    query = get_query("money_conservation")
    sql = to_duckdb(
        render(query.sql, query.bind({"date": "2026-03-01"})), lake_schema(frozenset(STREAM_TABLES))
    )
    [row] = duck.sql(sql).to_arrow_table().to_pylist()
    return row


def test_the_conservation_sql_sums_money_in_and_out_by_the_registry(
    test_types: None, duck: duckdb.DuckDBPyConnection
) -> None:
    # GIVEN a deposit of 10, interest of 3, a transfer of 4 and a payout of 6
    ledger = _ledger(
        [
            ("d", "deposit", "credit", 10),
            ("i", "test_interest", "credit", 3),
            ("t", "transfer", "debit", -4),
            ("t", "transfer", "credit", 4),
            ("p", "test_payout", "debit", -6),
        ]
    )
    # WHEN the day's money is checked
    row = _conservation(duck, ledger)
    # THEN money in is the deposit and the interest, money out the payout, and the day is conserved
    assert {name: row[name] for name in ("entries", "money_in", "money_out", "net_change", "conserved")} == {
        "entries": 5,
        "money_in": 13,
        "money_out": 6,
        "net_change": 7,
        "conserved": True,
    }


def test_the_conservation_sql_fails_a_day_with_an_entry_of_no_registered_type(
    duck: duckdb.DuckDBPyConnection,
) -> None:
    row = _conservation(duck, _ledger([("d", "deposit", "credit", 10), ("g", "gift", "credit", 5)]))
    assert (row["unregistered_entries"], row["money_in"], row["net_change"], row["conserved"]) == (
        1,
        10,
        15,
        False,
    )
