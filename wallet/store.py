"""The write path's DynamoDB access: every read and TransactWriteItems of ARCHITECTURE.md.

One request is one transaction. The wallet(s) are read with a strongly consistent read, the pure
:func:`wallet.posting.post` computes what they become, and one TransactWriteItems writes it with
three kinds of condition:

- ``version = :read_version`` on every touched wallet (compare-and-swap: nobody moved it since the
  read), plus ``balance >= :amount`` on a transfer's payer;
- ``attribute_not_exists(pk)`` on the transaction item ``{wallet_id}_{nonce}#transaction``: the key
  *is* the idempotency record, so a nonce executes at most once.

When DynamoDB cancels the transaction, ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` hands back
the item that failed, which tells the cases apart without another read: the transaction item exists
(a replay if its ``request_hash`` matches, otherwise ``idempotency_key_reused``), or a wallet moved
(a version conflict: re-read and retry with jittered exponential backoff, a bounded number of
times; a wallet still busy after them answers 429 ``throttled``, as does DynamoDB's own throttling),
or the service failed (503; the transaction is all-or-nothing, so a transfer is never half-written).

Nonces are remembered while their transaction item exists: the hot window
(``WALLETLAKE_HOT_TTL_SECONDS``, 8 hours by default), until DynamoDB's TTL physically deletes the
item (usually within minutes of ``expires_at``, at most days later). After that the same nonce is a
new request: clients must not reuse a nonce they used more than 8 hours ago.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

from wallet import telemetry as metrics
from wallet.commands import CreateWallet, Deposit, Movement, Transfer, request_hash
from wallet.dynamodb import DynamoDBClient, DynamoDBError, DynamoDBTransportError
from wallet.errors import (
    BalanceLimitExceededError,
    ContentionError,
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    StoreUnavailableError,
    ThrottledError,
    WalletNotFoundError,
)
from wallet.posting import Posting, WalletChange, WalletState, post
from wallet.table import (
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    Attr,
    transaction_key,
    user_key,
    wallet_key,
)
from wallet.telemetry import Telemetry
from walletlake.settings import Settings

_CANCELLED: Final = "TransactionCanceledException"
_CHECK_FAILED: Final = "ConditionalCheckFailed"
_THROTTLE_REASONS: Final = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
_NOT_EXISTS: Final = "attribute_not_exists(#pk)"

#: Attribute names go through ``#`` placeholders so none can collide with DynamoDB's reserved words.
_WALLET_NAMES: Final = {"#b": Attr.BALANCE, "#v": Attr.VERSION, "#u": Attr.UPDATED_AT}
_WALLET_NAMES_PK: Final = {"#pk": Attr.PK, **_WALLET_NAMES}
_WALLET_PROJECTION: Final = "#b, #v, #u"


class Outcome(enum.Enum):
    """How a movement ended when it was not refused."""

    APPLIED = "applied"
    REPLAYED = "replayed"


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of the store's retries; delays are full-jitter exponential backoff in seconds.

    Attributes
    ----------
    conflict_attempts:
        Executions of one request that may lose a compare-and-swap race before it fails with
        :class:`~wallet.errors.ContentionError` (nothing written).
    transient_attempts:
        Tries of one DynamoDB call on a 5xx or a network failure before
        :class:`~wallet.errors.StoreUnavailableError`. Repeating a write is safe: the nonce condition
        turns a repeat of a committed transaction into a recognised replay.
    """

    conflict_attempts: int = 10
    transient_attempts: int = 3
    base_delay: float = 0.005
    max_delay: float = 0.2

    def delay(self, attempt: int) -> float:
        """Full jitter (uniform 0..min(max, base x 2^attempt)): spreads racing retries apart."""
        return random.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class WalletStore:
    """Wallet operations against the ``wallets`` table, as coroutines on the server's event loop.

    DynamoDB is called without leaving the event loop (see :mod:`wallet.dynamodb`): no thread hop,
    no GIL hand-off per request. One store serves every concurrent request of a process.

    Parameters
    ----------
    settings:
        Table name, region and hot TTL.
    client:
        The DynamoDB client (by default one resolving endpoint and credentials like the AWS SDK).
    telemetry:
        Where conflicts, throttles and failures are counted.
    clock_ms:
        Epoch milliseconds now (tests inject a skewed clock).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        client: DynamoDBClient | None = None,
        telemetry: Telemetry | None = None,
        retry: RetryPolicy | None = None,
        clock_ms: Callable[[], int] = _now_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.table = settings.table
        self.client = client or DynamoDBClient(settings.region)
        self.telemetry = telemetry or Telemetry()
        self.retry = retry or RetryPolicy()
        self._clock_ms = clock_ms
        self._sleep = sleep

    # ------------------------------------------------------------------ wallets

    async def create_wallet(self, command: CreateWallet) -> tuple[str, bool]:
        """Open the user's wallet; returns ``(wallet_id, created)``.

        One transaction puts the wallet (version 0, balance 0) and the user claim
        ``{user_id}#user``, both with ``attribute_not_exists``. If the claim exists the user already
        has a wallet, whose id the claim holds: ``(existing_id, False)``.
        """
        wallet_id = str(uuid.uuid4())
        now = self._clock_ms()
        wallet_item = {
            Attr.PK: _s(wallet_key(wallet_id)),
            Attr.ENTITY: _s(ENTITY_WALLET),
            Attr.WALLET_ID: _s(wallet_id),
            Attr.USER_ID: _s(command.user_id),
            Attr.BALANCE: _n(0),
            Attr.VERSION: _n(0),
            Attr.CREATED_AT: _n(now),
            Attr.UPDATED_AT: _n(now),
        }
        claim_item = {
            Attr.PK: _s(user_key(command.user_id)),
            Attr.ENTITY: _s(ENTITY_USER),
            Attr.WALLET_ID: _s(wallet_id),
        }
        payload = {
            "TransactItems": [
                {"Put": self._put_new(claim_item)},
                {"Put": self._put_new(wallet_item)},
            ]
        }
        try:
            await self._call("TransactWriteItems", payload)
        except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
            claim = (_reasons(error) or [{}])[0]
            if claim.get("Code") != _CHECK_FAILED:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing = claim.get("Item") or await self._get(user_key(command.user_id), None) or {}
            if Attr.WALLET_ID not in existing:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing_id = existing[Attr.WALLET_ID]["S"]
            # Our own earlier attempt may have committed before a lost answer (see _call).
            return existing_id, existing_id == wallet_id
        return wallet_id, True

    async def balance(self, wallet_id: str) -> int:
        """The wallet's balance in micro-USD, read strongly consistently."""
        item = await self._get(wallet_key(wallet_id), "#b", {"#b": Attr.BALANCE})
        if item is None:
            raise WalletNotFoundError(wallet_id)
        return int(item[Attr.BALANCE]["N"])

    # ---------------------------------------------------------------- movements

    async def deposit(self, command: Deposit) -> Outcome:
        """Credit a wallet once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def transfer(self, command: Transfer) -> Outcome:
        """Move money between two wallets once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def execute(self, command: Movement) -> Outcome:
        """Run a deposit or transfer to completion: applied, replayed, or refused with a domain error.

        Raises
        ------
        WalletNotFoundError, IdempotencyKeyReusedError, InsufficientFundsError, BalanceLimitExceededError
            Refusals, in ARCHITECTURE.md's precedence; nothing was written.
        ContentionError
            A busy wallet: every attempt lost a compare-and-swap race; nothing was written (a
            :class:`ThrottledError`, answered 429 ``throttled`` with ``Retry-After``).
        ThrottledError, StoreUnavailableError
            DynamoDB pushed back or failed.
        """
        fingerprint = request_hash(command)
        txn_id = str(uuid.uuid4())  # one per request execution, kept across conflict retries
        for attempt in range(self.retry.conflict_attempts):
            wallet, to_wallet = await self._read_wallets(command)
            try:
                posting = post(
                    command,
                    wallet,
                    to_wallet,
                    now_ms=self._clock_ms(),
                    hot_ttl_seconds=self.settings.hot_ttl_seconds,
                    txn_id=txn_id,
                    request_hash=fingerprint,
                )
            except (InsufficientFundsError, BalanceLimitExceededError):
                # The nonce is judged before funds: a replay of a transfer that emptied the wallet
                # must still answer like the original.
                existing = await self._get(
                    transaction_key(command.wallet_id, command.nonce), "#h", {"#h": Attr.REQUEST_HASH}
                )
                if existing is not None:
                    return self._replay(command, existing, fingerprint)
                raise
            try:
                await self._call("TransactWriteItems", _transaction(self.table, posting))
            except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
                outcome = await self._judge(error, posting)
                if outcome is not None:
                    return outcome
                self.telemetry.count(metrics.RETRIES)
                await self._sleep(self.retry.delay(attempt))
                continue
            return Outcome.APPLIED
        self.telemetry.event(
            metrics.CONTENTION_EXHAUSTED, wallet_id=command.wallet_id, attempts=self.retry.conflict_attempts
        )
        raise ContentionError(
            f"wallet {command.wallet_id} changed during each of {self.retry.conflict_attempts} attempts; "
            "nothing was written, repeat the request with the same nonce"
        )

    async def _read_wallets(self, command: Movement) -> tuple[WalletState, WalletState | None]:
        if isinstance(command, Deposit):
            item = await self._get(wallet_key(command.wallet_id), _WALLET_PROJECTION, _WALLET_NAMES)
            if item is None:
                raise WalletNotFoundError(command.wallet_id)
            return _state(command.wallet_id, item), None
        items = await self._batch_get([wallet_key(command.wallet_id), wallet_key(command.to_wallet_id)])
        payer = items.get(wallet_key(command.wallet_id))
        if payer is None:
            raise WalletNotFoundError(command.wallet_id)
        payee = items.get(wallet_key(command.to_wallet_id))
        if payee is None:
            raise WalletNotFoundError(command.to_wallet_id)
        return _state(command.wallet_id, payer), _state(command.to_wallet_id, payee)

    async def _judge(self, error: DynamoDBError, posting: Posting) -> Outcome | None:
        """Interpret a cancelled movement: an outcome, a refusal (raised), or None to retry."""
        reasons = _reasons(error)
        codes = [reason.get("Code", "None") for reason in reasons]
        txn_index = len(codes) - 1  # the transaction item is the last one (see _transaction)
        command = posting.command
        if codes and codes[txn_index] == _CHECK_FAILED:
            existing = reasons[txn_index].get("Item") or await self._get(
                transaction_key(command.wallet_id, command.nonce), "#h", {"#h": Attr.REQUEST_HASH}
            )
            if existing:
                return self._replay(command, existing, posting.request_hash)
        if any(code in _THROTTLE_REASONS for code in codes):
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", reasons=",".join(codes))
            raise ThrottledError("DynamoDB is throttling this wallet; retry later")
        if "TransactionConflict" in codes:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return None
        if _CHECK_FAILED in codes:
            # A wallet's version or balance moved since the read (a wallet that vanished would be
            # found missing by the re-read, never guessed from here).
            self.telemetry.count(metrics.VERSION_CONFLICTS)
            return None
        raise self._unavailable("TransactWriteItems", error)

    def _replay(self, command: Movement, existing: dict[str, Any], fingerprint: str) -> Outcome:
        if existing.get(Attr.REQUEST_HASH, {}).get("S") != fingerprint:
            raise IdempotencyKeyReusedError(command.wallet_id, command.nonce)
        self.telemetry.count(metrics.REPLAYS)
        return Outcome.REPLAYED

    def _cancelled_otherwise(self, error: DynamoDBError, user_id: str) -> Exception:
        codes = [reason.get("Code", "None") for reason in _reasons(error)]
        if any(code in _THROTTLE_REASONS for code in codes):
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", user_id=user_id)
            return ThrottledError("DynamoDB is throttling; retry later")
        if "TransactionConflict" in codes:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return ContentionError("another request for this user is in flight; retry")
        return self._unavailable("TransactWriteItems", error)

    # ---------------------------------------------------------- DynamoDB calls

    def _put_new(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": _NOT_EXISTS,
            "ExpressionAttributeNames": {"#pk": Attr.PK},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    async def _get(
        self, key: str, projection: str | None, names: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        payload: dict[str, Any] = {
            "TableName": self.table,
            "Key": {Attr.PK: _s(key)},
            "ConsistentRead": True,
        }
        if projection:
            payload["ProjectionExpression"] = projection
            payload["ExpressionAttributeNames"] = names or {}
        answer = await self._call("GetItem", payload)
        item: dict[str, Any] | None = answer.get("Item")
        return item or None

    async def _batch_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Consistent BatchGetItem of wallet items by key; unprocessed keys are asked again."""
        pending: list[dict[str, Any]] = [{Attr.PK: _s(key)} for key in keys]
        found: dict[str, dict[str, Any]] = {}
        for attempt in range(self.retry.transient_attempts):
            request = {
                self.table: {
                    "Keys": pending,
                    "ConsistentRead": True,
                    "ProjectionExpression": "#pk, " + _WALLET_PROJECTION,
                    "ExpressionAttributeNames": _WALLET_NAMES_PK,
                }
            }
            answer = await self._call("BatchGetItem", {"RequestItems": request})
            for item in answer.get("Responses", {}).get(self.table, []):
                found[item[Attr.PK]["S"]] = item
            pending = answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
            if not pending:
                return found
            await self._sleep(self.retry.delay(attempt))
        self.telemetry.event(metrics.THROTTLES, operation="BatchGetItem", unprocessed=len(pending))
        raise ThrottledError("DynamoDB left reads unprocessed; retry later")

    async def _call(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One DynamoDB call; 5xx and network failures retried, throttling raised as 429.

        Every write this store sends is conditional on the nonce or on ``attribute_not_exists``,
        so repeating one whose answer was lost cannot apply it twice: the repeat is judged a replay.
        """
        attempts = self.retry.transient_attempts
        for attempt in range(attempts):
            try:
                return await self.client.call(operation, payload)
            except DynamoDBError as error:
                if error.throttled:
                    self.telemetry.event(metrics.THROTTLES, operation=operation, error=error.type)
                    raise ThrottledError(f"DynamoDB is throttling ({error.type}); retry later") from error
                if error.type == _CANCELLED:
                    raise  # a cancelled transaction: the caller reads its reasons
                if not error.server_side:
                    raise self._unavailable(operation, error) from error
                self.telemetry.event(metrics.INTERNAL_ERRORS, operation=operation, error=error.type)
                if attempt == attempts - 1:
                    raise self._unavailable(operation, error) from error
            except DynamoDBTransportError as error:
                self.telemetry.event(metrics.NETWORK_ERRORS, operation=operation, error=str(error))
                if attempt == attempts - 1:
                    raise StoreUnavailableError(
                        f"DynamoDB unreachable for {operation}; retry later"
                    ) from error
            self.telemetry.count(metrics.RETRIES)
            await self._sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _unavailable(self, operation: str, error: DynamoDBError) -> StoreUnavailableError:
        if not error.server_side:  # a refusal we do not expect: a missing table, a bad request
            self.telemetry.event(metrics.UNEXPECTED_ERRORS, operation=operation, error=str(error))
        return StoreUnavailableError(f"DynamoDB {operation} failed ({error.type}); retry later")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _state(wallet_id: str, item: dict[str, Any]) -> WalletState:
    return WalletState(
        wallet_id=wallet_id,
        balance=int(item[Attr.BALANCE]["N"]),
        version=int(item[Attr.VERSION]["N"]),
        updated_at=int(item[Attr.UPDATED_AT]["N"]),
    )


def _reasons(error: DynamoDBError) -> list[dict[str, Any]]:
    reasons = error.body.get("CancellationReasons")
    return reasons if isinstance(reasons, list) else []


def _transaction(table: str, posting: Posting) -> dict[str, Any]:
    """TransactWriteItems of a posting: the wallet update(s), then the transaction item (last)."""
    command = posting.command
    item: dict[str, Any] = {
        Attr.PK: _s(transaction_key(command.wallet_id, command.nonce)),
        Attr.ENTITY: _s(ENTITY_TRANSACTION),
        Attr.TXN_ID: _s(posting.txn_id),
        Attr.TYPE: _s(command.txn_type),
        Attr.WALLET_ID: _s(command.wallet_id),
        Attr.AMOUNT: _n(command.amount),
        Attr.NONCE: _s(command.nonce),
        Attr.REQUEST_HASH: _s(posting.request_hash),
        Attr.WALLET_VERSION: _n(posting.wallet.version),
        Attr.WALLET_BALANCE_AFTER: _n(posting.wallet.balance),
        Attr.CREATED_AT: _n(posting.created_at),
        Attr.EXPIRES_AT: _n(posting.expires_at),
    }
    updates = [_wallet_update(table, posting.wallet, posting.created_at, payer_amount=None)]
    if isinstance(command, Transfer) and posting.to_wallet is not None:
        item[Attr.TO_WALLET_ID] = _s(command.to_wallet_id)
        item[Attr.TO_WALLET_VERSION] = _n(posting.to_wallet.version)
        item[Attr.TO_WALLET_BALANCE_AFTER] = _n(posting.to_wallet.balance)
        updates = [
            _wallet_update(table, posting.wallet, posting.created_at, payer_amount=command.amount),
            _wallet_update(table, posting.to_wallet, posting.created_at, payer_amount=None),
        ]
    put = {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _NOT_EXISTS,
        "ExpressionAttributeNames": {"#pk": Attr.PK},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return {"TransactItems": [*({"Update": update} for update in updates), {"Put": put}]}


def _wallet_update(
    table: str, change: WalletChange, updated_at: int, *, payer_amount: int | None
) -> dict[str, Any]:
    """Compare-and-swap of one wallet: absolute new values, guarded by the version we read."""
    condition = "#v = :rv"
    values = {
        ":rv": _n(change.read_version),
        ":v": _n(change.version),
        ":b": _n(change.balance),
        ":u": _n(updated_at),
    }
    if payer_amount is not None:
        condition += " AND #b >= :amt"
        values[":amt"] = _n(payer_amount)
    return {
        "TableName": table,
        "Key": {Attr.PK: _s(wallet_key(change.wallet_id))},
        "UpdateExpression": "SET #b = :b, #v = :v, #u = :u",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _WALLET_NAMES,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
