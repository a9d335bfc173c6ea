"""What one write costs in bytes and write units, from the code that makes it (pure, no AWS).

- **Signed request bytes**: a deposit as a caller sends it through VPC Lattice, SigV4-signed by
  botocore's own ``SigV4Auth`` for ``vpc-lattice-svcs`` with temporary credentials (a role's
  session token: what every caller of the Lattice front holds), counted as HTTP/1.1 puts it on
  the wire, plus the 204 answer.
- **Write units**: the items of a TransactWriteItems exactly as
  :func:`wallet.write_requests.transaction_request` builds them (a single deposit, a single
  transfer, and a wallet credited ``n`` times in one group commit), and a refusal's record as
  :func:`wallet.write_requests.declined_record_put` builds it, sized by DynamoDB's item-size
  rules and charged as transactional writes (2 units per started KB of the item; the refusal's
  record a plain put, 1 unit per KB), an update charged on the larger of its before and after images
  (DynamoDB Developer Guide, "Item sizes and formats" and "Read/write capacity mode"). A wallet
  item carries its group's earlier entries in ``entries_before`` until its next write removes
  them, so that next write is charged on the big before-image too.

    .venv/bin/python bench/request_sizes.py
"""

from __future__ import annotations

import re
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.wallets_table import ENTITY_WALLET, Attr, wallet_key
from wallet.commands import Deposit, Movement, Transfer, request_hash
from wallet.posting import post
from wallet.write_requests import declined_record_put, transaction_request

#: A role session's token as STS issues it: its length varies (AWS says to allow for growth); an
#: assumed role's is typically 800-1,100 characters, this is the upper end (assumed, not measured).
SESSION_TOKEN_CHARACTERS: Final = 1_100
#: The caller's principal recorded on each write (an assumed role's ARN with its session name).
PRINCIPAL: Final = "arn:aws:sts::123456789012:assumed-role/payments-api-caller/i-0123456789abcdef0"
SERVICE_HOST: Final = "walletlake-api-0123456789abcdef0.7d67968.vpc-lattice-svcs.us-east-1.on.aws"
WALLET: Final = "6f9619ff-8b86-4011-b42d-00cf4fc964ff"
PAYEE: Final = "0b7e5bd6-5c5b-4bd6-9b09-5d0a5f3c1a11"
USER: Final = "5d0a5f3c-1a11-4bd6-9b09-0b7e5bd65c5b"
#: The 204's status line and headers (Transaction-Id, date, server, keep-alive), as uvicorn sends it.
RESPONSE_BYTES: Final = 180
KB: Final = 1_024
TRANSACTIONAL_UNITS_PER_KB: Final = 2


def signed_request_bytes() -> int:
    """Bytes of one signed deposit request on the wire: request line, headers, body."""
    body = b'{"amount":"25000000","nonce":"3f1c9a2e-5b7d-4e1f-9c2a-7b6d5e4f3a21"}'
    url = f"https://{SERVICE_HOST}/api/v1/wallets/{WALLET}/deposit/"
    request = AWSRequest(
        method="PUT",
        url=url,
        data=body,
        headers={"Content-Type": "application/json", "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    credentials = Credentials("ASIA" + "X" * 16, "s" * 40, token="T" * SESSION_TOKEN_CHARACTERS)
    SigV4Auth(credentials, "vpc-lattice-svcs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    line = f"PUT {url.split(SERVICE_HOST, 1)[1]} HTTP/1.1\r\n"
    headers = {"Host": SERVICE_HOST, "Content-Length": str(len(body)), **dict(prepared.headers)}
    head = line + "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    return len(head.encode()) + len(body)


def attribute_bytes(value: dict[str, Any]) -> int:
    """A value's size by DynamoDB's rules (strings UTF-8; numbers 1 byte per 2 significant digits + 1;
    lists and maps 3 bytes plus 1 per element, map keys counted)."""
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = Decimal(inner).normalize().as_tuple().digits
        return (len(digits) + 1) // 2 + 1
    if kind == "L":
        return 3 + sum(1 + attribute_bytes(element) for element in inner)
    if kind == "M":
        return 3 + sum(1 + len(key.encode()) + attribute_bytes(element) for key, element in inner.items())
    return 1  # BOOL, NULL


def item_bytes(item: dict[str, dict[str, Any]]) -> int:
    """An item's size: each attribute's name (UTF-8) plus its value."""
    return sum(len(name.encode()) + attribute_bytes(value) for name, value in item.items())


def units(size: int) -> int:
    """Transactional write units of an item of ``size`` bytes."""
    return TRANSACTIONAL_UNITS_PER_KB * -(-size // KB)


def _wallet_item(wallet_id: str) -> dict[str, dict[str, Any]]:
    """A wallet item as :meth:`wallet.store.WalletStore.create_wallet` puts it, then moved once."""
    return {
        Attr.PK: {"S": wallet_key(wallet_id)},
        Attr.ENTITY: {"S": ENTITY_WALLET},
        Attr.WALLET_ID: {"S": wallet_id},
        Attr.USER_ID: {"S": USER},
        Attr.BALANCE: {"N": "123456789012"},
        Attr.VERSION: {"N": "4821"},
        Attr.CREATED_AT: {"N": "1795000000000"},
        Attr.UPDATED_AT: {"N": "1795000000000"},
    }


_ASSIGNMENT: Final = re.compile(r"(#\w+) = (:\w+)")


def _after_update(before: dict[str, dict[str, Any]], update: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The item an ``Update`` of the store leaves: its SETs applied, its REMOVEs gone (ADDs keep sizes)."""
    names, values = update["ExpressionAttributeNames"], update["ExpressionAttributeValues"]
    expression = update["UpdateExpression"]
    after = dict(before)
    sets = expression.split(" REMOVE ")[0].split(" ADD ")[0]
    for name, value in _ASSIGNMENT.findall(sets):
        after[names[name]] = values[value]
    if " REMOVE " in expression:
        removed = expression.split(" REMOVE ", 1)[1].split(" ADD ")[0]
        for name in removed.split(", "):
            after.pop(names[name.strip()], None)
    return after


def _postings(commands: list[Movement]) -> list[Any]:
    return [
        post(
            command,
            now_ms=1_795_000_000_000 + index,
            hot_ttl_seconds=28_800,
            txn_id=str(uuid.UUID(int=index + 1)),
            request_hash=request_hash(command),
            idempotency_window_seconds=172_800,
        )
        for index, command in enumerate(commands)
    ]


def transaction_units(commands: list[Movement]) -> dict[str, int]:
    """Write units of one TransactWriteItems of ``commands`` (the store's builder), by item kind,
    and the largest wallet item it leaves."""
    request = transaction_request(
        "wallets", *_postings(commands), now_s=1_795_000_000, idempotency_table="walletlake-idempotency"
    )
    wallet_units = transaction = records = largest = 0
    for entry in request["TransactItems"]:
        if "Update" in entry:
            update = entry["Update"]
            wallet_id = update["Key"][Attr.PK]["S"].split("#")[0]
            before = _wallet_item(wallet_id)
            after = _after_update(before, update)
            largest = max(largest, item_bytes(after))
            wallet_units += units(max(item_bytes(before), item_bytes(after)))
        elif entry["Put"]["TableName"] == "wallets":
            transaction += units(item_bytes(entry["Put"]["Item"]))
        else:
            records += units(item_bytes(entry["Put"]["Item"]))
    return {
        "wallet_units": wallet_units,
        "transaction_item_units": transaction,
        "idempotency_record_units": records,
        "total_units": wallet_units + transaction + records,
        "largest_wallet_item_bytes": largest,
    }


def decline_units(command: Movement) -> dict[str, int]:
    """Write units of a refusal's record: one plain conditional PutItem (not transactional: 1 unit a KB).

    The cancelled TransactWriteItems before it is charged as DynamoDB charges a cancelled
    transaction; this is what remembering the refusal adds.
    """
    put = declined_record_put(
        "walletlake-idempotency",
        command,
        request_hash=request_hash(command),
        code="insufficient_funds",
        refused_wallet_id=command.wallet_id,
        now_ms=1_795_000_000_000,
        window_seconds=172_800,
    )
    size = item_bytes(put["Item"])
    return {"record_bytes": size, "record_units": -(-size // 1024)}


def grouped_wallet(n: int) -> dict[str, int]:
    """A wallet credited ``n`` times in one group commit: its item's size and write units, and the
    units of its next single write (charged on that item as the before-image)."""
    deposits: list[Movement] = [
        Deposit(WALLET, 25_000_000 + i, f"nonce-{i:04d}-3f1c9a2e-5b7d-4e1f", initiated_by=PRINCIPAL)
        for i in range(n)
    ]
    group = transaction_units(deposits)
    size = group["largest_wallet_item_bytes"]
    return {
        "credits": n,
        "wallet_item_bytes": size,
        "wallet_units": units(size),
        "next_write_units": units(size),
    }


def main() -> int:
    print(f"signed deposit request: {signed_request_bytes():,} bytes (+ {RESPONSE_BYTES} of the 204 answer)")
    for name, commands in (
        ("deposit", [Deposit(WALLET, 25_000_000, "n-1", initiated_by=PRINCIPAL)]),
        ("transfer", [Transfer(WALLET, PAYEE, 25_000_000, "n-1", initiated_by=PRINCIPAL)]),
    ):
        print(f"one {name}: {transaction_units(commands)}")
    for n in (1, 8, 32):
        print(f"a wallet credited in one group: {grouped_wallet(n)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
