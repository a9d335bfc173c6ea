"""The write path's operations: wallets, balances, movements and their outcomes, against DynamoDB.

One request is one transaction, and one DynamoDB round trip: no read before the write. The pure
:func:`wallet.posting.post` says what each touched wallet adds (its legs), and one
TransactWriteItems (:mod:`wallet.write_requests`) writes it, with the money rules as conditions
DynamoDB checks at commit:

- on every touched wallet, an atomic ``ADD`` of the delta to ``balance`` and of 1 to ``version``,
  with the ledger entry it applies recorded on the item (``entry_*``, ``updated_at``), under
  ``attribute_exists(pk)``, ``updated_at < :now``, and ``balance >= :amount`` on a payer or
  ``balance <= :ceiling`` on a payee. Atomic ``ADD`` cannot lose a race, so a busy wallet takes
  writes as fast as DynamoDB commits them, with no compare-and-swap retries;
- the request's hot transaction item ``{wallet_id}_{nonce}_{caller}#transaction`` and its idempotency
  record ``{wallet_id}_{nonce}_{caller}`` (:mod:`contracts.idempotency_table`; nonces are each
  caller's own), the record put only where
  none exists: a nonce is executed at most once while its record exists, whatever the servers'
  clocks say (its TTL outlives the idempotency window by a day).

Every answer is true whatever fails, by these rules (:mod:`wallet.outcomes` holds the pure ones):

- **a record decides a nonce**, and the first put under its key wins: the movement's own
  (``applied``), a refusal's (``declined``: a movement refused for money or a missing wallet
  stores its refusal with a plain conditional put, so the same request repeated, after a top-up
  say, is refused the same way), or an outcome lookup's (``void``: no record existed, so the
  lookup put one that any attempt still in flight then fails on: "did not commit" is then true
  for good). A put that meets a transaction in flight on the record decides nothing: a refusal
  pauses and tries again, a lookup answers 409 ``outcome_pending``;
- **an unanswered attempt is never "nothing was written"**: once an attempt of a request's
  TransactWriteItems went out unanswered, any later failure of the request answers 503
  ``outcome_unknown`` naming the ``Transaction-Id`` a repeat replays (:mod:`wallet.dynamodb_calls`);
- **a conflict on the request's own nonce is never a refusal**: another attempt of it may be
  committing, so the request pauses and writes again (:func:`wallet.cancellation.read_cancellation`);
- **a nonce belongs to its caller**: a request's keys name its verified principal
  (:func:`contracts.idempotency_table.idempotency_key`), so another caller's request or lookup
  with the same nonce is another request and can never decide this one; the lookup answers only
  the caller that made the request.

When DynamoDB cancels the transaction, ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` hands back
each item that failed, which tells the cases apart without a read (:mod:`wallet.cancellation`):
a missing wallet, a used nonce (answered from its record), funds or the ceiling, another
transaction on a wallet (retried with jittered backoff a bounded number of times, then 429
``throttled``), or a wallet stamped at or after the posting's time (written again at once, a
millisecond later). Grouping (:mod:`wallet.group_commit`) and the memory of recent nonces
(:mod:`wallet.nonce_memory`) change only how many round trips an answer costs, never the answer.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from contracts import api_metrics as metrics
from contracts import owners_table
from contracts.idempotency_table import idempotency_key
from contracts.settings import Settings
from contracts.wallets_table import Attr, transaction_key, user_key, wallet_key
from wallet.cancellation import (
    CONDITION_FAILED,
    THROTTLE_REASONS,
    TRANSACTION_CONFLICT,
    Cancellation,
    Cause,
    cancellation_reasons,
    read_cancellation,
)
from wallet.commands import CreateWallet, Deposit, Movement, Transfer
from wallet.dynamodb import DynamoDBClient, DynamoDBError
from wallet.dynamodb_calls import DynamoDBCalls, RetryPolicy
from wallet.dynamodb_retry import CONDITION_FAILED_ERROR, TRANSACTION_CONFLICT_ERROR, retry_after_seconds
from wallet.errors import (
    BalanceLimitExceededError,
    ContentionError,
    InsufficientFundsError,
    OutcomePendingError,
    OutcomeUnknownError,
    StoreRejectedError,
    StoreUnavailableError,
    ThrottledError,
    TransactionNotFoundError,
    WalletError,
    WalletNotFoundError,
)
from wallet.group_commit import GroupCommitter, Job, applied_receipt
from wallet.nonce_memory import NonceMemory, Remembered
from wallet.outcomes import Decline, Fingerprint, answer_repeat, decline_of, lookup_answer, window_ends_at
from wallet.random_ids import random_uuid
from wallet.receipts import Receipt, alive
from wallet.telemetry import Telemetry
from wallet.write_requests import create_wallet_request, declined_record_put, void_record_put

__all__ = ["RetryPolicy", "WalletStore"]

_logger = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class WalletStore:
    """Wallet operations against the ``wallets`` table, as coroutines on the server's event loop.

    DynamoDB is called without leaving the event loop (see :mod:`wallet.dynamodb`): no thread hop,
    no GIL hand-off per request. One store serves every concurrent request of a process.

    Parameters
    ----------
    settings:
        Table names, region, hot TTL and idempotency window.
    dynamodb:
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
        dynamodb: DynamoDBClient | None = None,
        telemetry: Telemetry | None = None,
        retry: RetryPolicy | None = None,
        clock_ms: Callable[[], int] = _now_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        settings.check_idempotency_window()
        self.settings = settings
        self.table = settings.table
        self.idempotency_table = settings.idempotency_table
        self.client = dynamodb or DynamoDBClient(settings.region)
        self.telemetry = telemetry or Telemetry()
        self.retry = retry or RetryPolicy()
        #: Seconds one DynamoDB call may take in all: the policy's deadline, within half the drain.
        self.call_deadline = min(self.retry.deadline, settings.drain_seconds / 2)
        self.calls = DynamoDBCalls(
            self.client, self.retry, self.telemetry, deadline=self.call_deadline, sleep=sleep
        )
        self._clock_ms = clock_ms
        self._sleep = sleep
        self._nonces = NonceMemory()
        self._committer = GroupCommitter(settings, self.calls, self.telemetry, clock_ms=clock_ms, sleep=sleep)

    # ------------------------------------------------------------------ wallets

    async def create_wallet(self, command: CreateWallet) -> tuple[str, bool]:
        """Open the user's wallet; returns ``(wallet_id, created)``.

        One transaction puts the wallet (version 0, balance 0) and the user claim
        ``{user_id}#user``, both with ``attribute_not_exists``. If the claim exists the user already
        has a wallet, whose id the claim holds: ``(existing_id, False)``.
        """
        wallet_id = random_uuid()
        payload = create_wallet_request(
            self.table,
            wallet_id,
            command.user_id,
            self._clock_ms(),
            command.owner,
            owners_table=self.settings.owners_table,
        )
        try:
            await self.calls.call("TransactWriteItems", payload)
        except OutcomeUnknownError as error:  # creating is idempotent per user: repeating tells
            raise StoreUnavailableError(
                "DynamoDB did not answer; repeat the request (a user has one wallet, so a repeat "
                "answers the wallet if it was created)"
            ) from error
        except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
            claim = (cancellation_reasons(error.body) or [{}])[0]
            if claim.get("Code") != CONDITION_FAILED:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing = (
                claim.get("Item") or await self.calls.get(self.table, _key(user_key(command.user_id))) or {}
            )
            if Attr.WALLET_ID not in existing:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing_id = existing[Attr.WALLET_ID]["S"]
            # Our own earlier attempt may have committed before a lost answer (see DynamoDBCalls).
            return existing_id, existing_id == wallet_id
        self._committer.hints.learn({wallet_id: 0})
        return wallet_id, True

    async def balance(self, wallet_id: str) -> int:
        """The wallet's balance in micro-USD, read strongly consistently."""
        item = await self.calls.get(
            self.table, _key(wallet_key(wallet_id)), projection="#b", names={"#b": Attr.BALANCE}
        )
        if item is None:
            raise WalletNotFoundError(wallet_id)
        return int(item[Attr.BALANCE]["N"])

    async def owner(self, wallet_id: str) -> tuple[bool, str | None]:
        """Whether the wallet exists, and its owner (None: a wallet of before owners), read consistently."""
        item = await self.calls.get(
            self.table,
            _key(wallet_key(wallet_id)),
            projection="#pk, #o",
            names={"#pk": Attr.PK, "#o": Attr.OWNER},
        )
        if item is None:
            return False, None
        owner = item.get(Attr.OWNER)
        return True, owner["S"] if isinstance(owner, dict) else None

    async def wallets_of(self, owner: str) -> list[str]:
        """The ids of ``owner``'s wallets, oldest first: a consistent Query of the owners table."""
        found: list[tuple[int, str]] = []
        payload: dict[str, Any] = {
            "TableName": self.settings.owners_table,
            "KeyConditionExpression": "#o = :o",
            "ExpressionAttributeNames": {"#o": owners_table.OWNER},
            "ExpressionAttributeValues": {":o": {"S": owner}},
            "ConsistentRead": True,
        }
        while True:
            page = await self.calls.call("Query", payload)
            found += [
                (int(item[owners_table.CREATED_AT]["N"]), item[owners_table.WALLET_ID]["S"])
                for item in page.get("Items", [])
            ]
            if "LastEvaluatedKey" not in page:
                return [wallet for _, wallet in sorted(found)]
            payload["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ---------------------------------------------------------------- outcomes

    async def outcome(
        self, wallet_id: str, nonce: str, principal: str | None, *, may_move: bool = True
    ) -> Receipt:
        """The committed movement of ``principal``'s request with ``nonce``, decided for good.

        Read from the caller's record of the nonce (strongly consistent: a transaction still
        committing is not visible to it, so a missing record decides nothing yet). With no record,
        a void one is put under the caller's own key (:func:`wallet.write_requests.void_record_put`):
        once it exists no attempt can commit, so "did not commit" is true from then on; if a
        transaction holding the record is in flight, DynamoDB refuses the put and the answer is
        :class:`OutcomePendingError` (409, ask again). A caller that may not move the wallet's money
        (``may_move`` False: :func:`wallet.authorization.may_move_money`) can have no movement to
        fence, so its lookup writes nothing: no record is "did not commit" already.

        Raises
        ------
        TransactionNotFoundError
            No movement of this caller committed with the nonce, and none will (404).
        OutcomePendingError
            A transaction with the nonce is still committing (409 ``outcome_pending``).
        StoreUnavailableError
            DynamoDB failed: nothing was decided, ask again.
        """
        key = idempotency_key(wallet_id, nonce, principal)
        if (pending := self._nonces.in_flight(key)) is not None:
            await asyncio.shield(pending)  # this process is writing it: its own answer decides first
        known = self._nonces.recall(key, self._clock_ms() // 1000)
        if (
            known is not None
            and isinstance(known.receipt, Receipt)
            and known.receipt.initiated_by == principal
        ):
            return dataclasses.replace(known.receipt, replayed=True)
        record: Mapping[str, Any] | None = await self._record(wallet_id, nonce, principal)
        if record is None:
            if not may_move:
                raise TransactionNotFoundError(wallet_id, nonce)
            record = await self._fence(wallet_id, nonce, principal)
            if record is None:
                self.telemetry.count(metrics.OUTCOMES_VOIDED)
                raise TransactionNotFoundError(wallet_id, nonce)
        return lookup_answer(record, wallet_id, nonce, principal)

    async def _fence(self, wallet_id: str, nonce: str, principal: str | None) -> Mapping[str, Any] | None:
        """Put the nonce's void record; None once it is put, else the record that was there first."""
        payload = void_record_put(
            self.idempotency_table,
            wallet_id,
            nonce,
            principal=principal,
            now_ms=self._clock_ms(),
            window_seconds=self.settings.idempotency_window_seconds,
        )
        try:
            await self.calls.call("PutItem", payload)
        except DynamoDBError as error:
            if error.type == CONDITION_FAILED_ERROR:
                found = error.body.get("Item") or await self._record(wallet_id, nonce, principal)
                if found is not None:
                    return found
            if error.type in (TRANSACTION_CONFLICT_ERROR, CONDITION_FAILED_ERROR):  # in flight, or gone
                raise OutcomePendingError(wallet_id, nonce, retry_after_seconds()) from error
            raise self.calls.unavailable("PutItem", error) from error
        except (ThrottledError, StoreRejectedError) as error:  # the void may or may not be put: undecided
            raise StoreUnavailableError(
                f"the outcome of nonce {nonce!r} of wallet {wallet_id} could not be decided now "
                f"({error.detail}); ask again",
                retry_after_seconds(),
            ) from error
        return None

    # ---------------------------------------------------------------- movements

    async def deposit(self, command: Deposit) -> Receipt:
        """Credit a wallet once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def transfer(self, command: Transfer) -> Receipt:
        """Move money between two wallets once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def execute(self, command: Movement) -> Receipt:
        """Run a deposit or transfer to its final answer: applied, replayed, refused, or unknown.

        One TransactWriteItems, with no read before it, shared with the other requests waiting on
        this process's queue when it is busy (:mod:`wallet.group_commit`). A repeat (same nonce,
        same body) of a request this process is writing waits for that write, and a repeat of one
        it answered recently is answered from :mod:`wallet.nonce_memory`: neither reaches DynamoDB.

        Returns the request's receipt: applied now, or replayed (``replayed``) from its record.

        Raises
        ------
        WalletNotFoundError, InsufficientFundsError, BalanceLimitExceededError
            Refusals, stored under the nonce: a repeat gets the same (``replayed``); nothing moved.
        IdempotencyKeyReusedError, NonceExpiredError, NonceVoidedError
            The nonce's record belongs to another request or caller, is past its window, or was
            voided by an outcome lookup; nothing moved.
        ContentionError, ThrottledError, StoreUnavailableError, StoreRejectedError
            Nothing was written by any attempt (each was answered); repeat with the same nonce.
        OutcomeUnknownError
            An attempt went unanswered: the write may have committed (names its ``txn_id``).
        """
        key = idempotency_key(command.wallet_id, command.nonce, command.initiated_by)
        fingerprint = Fingerprint.of(command)
        while True:  # a repeat of a nonce this process is writing or just wrote costs DynamoDB nothing
            known = self._nonces.recall(key, self._clock_ms() // 1000)
            if known is not None and known.request_hash == fingerprint.current:
                self.telemetry.count(metrics.MEMORY_REPLAYS)
                self.telemetry.count(metrics.REPLAYS)
                if isinstance(known.receipt, Decline):
                    raise known.receipt.error(replayed=True)
                return dataclasses.replace(known.receipt, replayed=True)
            # (another body goes to DynamoDB: a wallet it names may not exist, which precedes 409)
            if (pending := self._nonces.in_flight(key)) is None:
                break
            await asyncio.shield(pending)  # then recalled, or refused: this request writes itself
        self._nonces.begin(key)
        try:
            return await self._write(command, fingerprint)
        finally:
            self._nonces.end(key)

    async def _write(self, command: Movement, fingerprint: Fingerprint) -> Receipt:
        """:meth:`execute`'s write with its retries; a failure after an unanswered attempt is unknown."""
        job = Job.of(command, fingerprint.current, random_uuid())  # one txn_id across retries
        try:
            return await self._attempts(job, fingerprint)
        except OutcomeUnknownError as error:
            raise job.unknown(error.retry_after or 1) from error
        except (ThrottledError, StoreUnavailableError, StoreRejectedError) as error:
            if job.state.unanswered:  # an earlier attempt may have committed: never "nothing written"
                self.telemetry.count(metrics.OUTCOMES_UNKNOWN_KEPT)
                raise job.unknown(retry_after_seconds()) from error
            # every attempt was answered, none committed: the answer names the transaction that did
            # not happen (a copy: a group's failure is one exception shared by its requests)
            answered = copy.copy(error)
            answered.transaction_id = job.txn_id
            raise answered from error

    async def _attempts(self, job: Job, fingerprint: Fingerprint) -> Receipt:
        command = job.command
        request = job.request()
        for attempt in range(self.retry.conflict_attempts):
            job.reset()
            await self._committer.submit(request)
            if job.failure is not None:
                raise job.failure
            if job.record is not None:
                return await self._answer_record(job, job.record, fingerprint)
            if job.error is not None:
                decided = await self._declined(job, job.error, fingerprint)
                if decided is not None:
                    return decided
                await self._sleep(self.retry.delay(attempt))  # a transaction in flight on the nonce
                continue
            posting = job.posting
            assert posting is not None  # every request the queue sends was posted
            if job.cancelled is None:
                applied = applied_receipt(posting)
                self._remember(command, Remembered(applied, job.request_hash, posting.remembered_until))
                return applied
            cancellation = read_cancellation(posting, cancellation_reasons(job.cancelled.body))
            settled = await self._settle(cancellation, job, fingerprint)
            if settled is not None:
                return settled
            self.telemetry.count(metrics.RETRIES)
            if cancellation.cause is Cause.CLOCK_BEHIND and cancellation.not_before_ms is not None:
                self.telemetry.count(metrics.CLOCK_RETRIES)
                job.not_before = cancellation.not_before_ms
            else:
                await self._sleep(self.retry.delay(attempt))
        self.telemetry.event(
            metrics.CONTENTION_EXHAUSTED, wallet_id=command.wallet_id, attempts=self.retry.conflict_attempts
        )
        raise ContentionError(
            f"wallet {command.wallet_id} was busy during each of {self.retry.conflict_attempts} attempts; "
            "nothing was written, repeat the request with the same nonce"
        )

    async def _settle(self, cancellation: Cancellation, job: Job, fingerprint: Fingerprint) -> Receipt | None:
        """Act on a read cancellation: an outcome, a refusal (raised), or None to write again."""
        command = job.command
        cause = cancellation.cause
        if cause is Cause.NONCE_USED:
            existing = cancellation.transaction_item or await self._record(
                command.wallet_id, command.nonce, command.initiated_by
            )
            # None: the record was deleted (TTL) between the two calls, so the nonce is free: write again
            return None if existing is None else await self._answer_record(job, existing, fingerprint)
        if cause in (Cause.WALLET_NOT_FOUND, Cause.INSUFFICIENT_FUNDS, Cause.BALANCE_LIMIT):
            wallet_id = cancellation.wallet_id or command.wallet_id
            refusal: WalletError = (
                WalletNotFoundError(wallet_id)
                if cause is Cause.WALLET_NOT_FOUND
                else InsufficientFundsError(wallet_id)
                if cause is Cause.INSUFFICIENT_FUNDS
                else BalanceLimitExceededError(wallet_id)
            )
            return await self._declined(job, refusal, fingerprint)
        if cause is Cause.THROTTLED:
            codes = ",".join(cancellation.codes)
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", reasons=codes)
            raise ThrottledError("DynamoDB is throttling this wallet; retry later", retry_after_seconds())
        if cause is Cause.CONFLICT:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return None
        if cause is Cause.CLOCK_BEHIND:
            return None
        assert job.cancelled is not None
        raise self.calls.unavailable("TransactWriteItems", job.cancelled)

    async def _declined(self, job: Job, refusal: WalletError, fingerprint: Fingerprint) -> Receipt | None:
        """Store a refusal under the nonce, then answer it; None when the nonce is held in flight.

        The refusal is final only once its record is put (:func:`~wallet.write_requests.declined_record_put`):
        the put fails if an attempt of the nonce committed meanwhile (another process: that record
        answers), and is refused while one is in flight (None: pause and write again). A refusal
        that is not a record's kind (none today) is raised as it is.
        """
        decline = decline_of(refusal)
        if decline is None:
            raise refusal
        command = job.command
        now_ms = self._clock_ms()
        window = self.settings.idempotency_window_seconds
        payload = declined_record_put(
            self.idempotency_table,
            command,
            request_hash=job.request_hash,
            code=decline.code,
            refused_wallet_id=decline.wallet_id,
            now_ms=now_ms,
            window_seconds=window,
        )
        try:
            await self.calls.call("PutItem", payload)
        except DynamoDBError as error:
            if error.type == TRANSACTION_CONFLICT_ERROR:
                self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
                return None
            existing = error.body.get("Item") if error.type == CONDITION_FAILED_ERROR else None
            existing = existing or await self._record(command.wallet_id, command.nonce, command.initiated_by)
            if existing is None:
                raise self.calls.unavailable("PutItem", error) from error
            if decline.code == WalletNotFoundError.code and not Fingerprint.of(command).matches(existing):
                raise refusal from error  # a missing wallet precedes the nonce (docs/architecture.md)
            return await self._answer_record(job, existing, fingerprint)
        except (ThrottledError, StoreUnavailableError, StoreRejectedError) as error:
            raise StoreUnavailableError(
                f"the request moved no money, but its refusal ({decline.code}) could not be stored "
                f"({error.detail}); repeat it with the same nonce for its final answer",
                retry_after_seconds(),
            ) from error
        self.telemetry.count(metrics.DECLINES_STORED)
        self._remember(command, Remembered(decline, job.request_hash, -(-now_ms // 1000) + window))
        raise decline.error(replayed=False)

    async def _answer_record(self, job: Job, record: Mapping[str, Any], fingerprint: Fingerprint) -> Receipt:
        """The answer the nonce's existing record gives this request (raised when it is a refusal)."""
        command = job.command
        if not record:  # a reason without its item: read it
            record = await self._record(command.wallet_id, command.nonce, command.initiated_by) or {}
        answer = answer_repeat(record, command, fingerprint, self._clock_ms() // 1000)
        if isinstance(answer, WalletError):
            if answer.replayed and (decline := decline_of(answer)) is not None:
                self._remember(command, Remembered(decline, job.request_hash, window_ends_at(record)))
            raise answer
        self._remember(command, Remembered(answer, job.request_hash, window_ends_at(record)))
        self.telemetry.count(metrics.REPLAYS)
        return answer

    def _remember(self, command: Movement, remembered: Remembered) -> None:
        self._nonces.remember(
            idempotency_key(command.wallet_id, command.nonce, command.initiated_by), remembered
        )

    async def _record(self, wallet_id: str, nonce: str, principal: str | None) -> dict[str, Any] | None:
        """The caller's record of the nonce (or, before records, its live hot item), read consistently.

        A consistent read sees what is committed: a transaction still committing the record is
        invisible to it, so None decides nothing by itself (a conditional put decides).
        """
        record = await self.calls.get(
            self.idempotency_table, _key(idempotency_key(wallet_id, nonce, principal))
        )
        if record is not None:
            return record
        item = await self.calls.get(self.table, _key(transaction_key(wallet_id, nonce, principal)))
        return item if item is not None and alive(item, self._clock_ms() // 1000) else None

    def _cancelled_otherwise(self, error: DynamoDBError, user_id: str) -> Exception:
        codes = [reason.get("Code", "None") for reason in cancellation_reasons(error.body)]
        if any(code in THROTTLE_REASONS for code in codes):
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", user_id=user_id)
            return ThrottledError("DynamoDB is throttling; retry later", retry_after_seconds())
        if TRANSACTION_CONFLICT in codes:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return ContentionError("another request for this user is in flight; retry")
        return self.calls.unavailable("TransactWriteItems", error)

    async def drain(self) -> None:
        """Return once every transaction this store has in flight or waiting has been written.

        A server's shutdown calls it after the last request was answered: a group whose callers
        went away (their tasks cancelled) is still finished, never cut off halfway through a retry.
        """
        await self._committer.drain()


def _key(pk: str) -> dict[str, Any]:
    return {Attr.PK: {"S": pk}}
