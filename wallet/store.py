"""The write path's DynamoDB access: every TransactWriteItems of docs/architecture.md.

One request is one transaction, and one DynamoDB round trip: no read before the write. The pure
:func:`wallet.posting.post` says what each touched wallet adds (its legs), and one
TransactWriteItems writes it, with the money rules as conditions DynamoDB checks at commit:

- on every touched wallet, an atomic ``ADD`` of the delta to ``balance`` and of 1 to ``version``,
  with the ledger entry it applies recorded on the item (``entry_*``, ``updated_at``), under
  ``attribute_exists(pk)``, ``updated_at < :now``, and ``balance >= :amount`` on a payer or
  ``balance <= :ceiling`` on a payee. Atomic ``ADD`` cannot lose a race, so a busy wallet takes
  writes as fast as DynamoDB commits them, with no compare-and-swap retries;
- the request's transaction item ``{wallet_id}_{nonce}#transaction`` and its idempotency record
  ``{wallet_id}_{nonce}`` in the idempotency table (:mod:`contracts.idempotency_table`: no stream,
  so the record costs the stream consumer nothing; a transaction spans tables at the same cost per
  item), each put under ``attribute_not_exists(pk) OR expires_at <= :now``: a nonce executes at
  most once within the idempotency window (``WALLETLAKE_IDEMPOTENCY_WINDOW_SECONDS``, 2 days by
  default), and a record past its window that TTL has not deleted yet counts as gone. The record
  holds the request's outcome (its receipt, :mod:`wallet.receipts`) for the window; the
  transaction item keeps the hot TTL.

The wallet item's stream record (NEW_AND_OLD_IMAGES) of that transaction is then one complete
ledger entry, with its version and balance after exactly as DynamoDB committed them.

When DynamoDB cancels the transaction, ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` hands back
each item that failed, which tells the cases apart without a read (:mod:`wallet.cancellation`):
a missing wallet, a used nonce (a replay if its ``request_hash`` matches, otherwise
``idempotency_key_reused``), funds or the ceiling, another transaction on the wallet (retried with
jittered exponential backoff, a bounded number of times; a wallet still busy after them answers
429 ``throttled``, as does DynamoDB's own throttling once botocore's DynamoDB backoff is spent:
:meth:`WalletStore._call`), a wallet stamped at or after the posting's
time (another server's clock ahead, or another entry in the same millisecond: written again at once,
a millisecond later), or the service failed (503; the transaction is
all-or-nothing, so a transfer is never half-written).

A group commit (several requests in one transaction, :mod:`wallet.commit_queue`) that DynamoDB
cancels only for ``TransactionConflict`` (another process's transaction on one of its wallets: a
fleet of servers on a busy wallet) is written again whole after a jittered pause, a bounded number
of times. One cancelled for a refusal is read (:func:`wallet.cancellation.read_group_cancellation`):
a used nonce is answered from its record at once, as is a missing wallet or a payer holding less
than the amount; a request refused only by the group's order (funds an earlier leg spent) is
written alone afterwards; and the others go again together at once, holding their wallets, so
a refusal costs them one round trip. A request this process's balance hints call short
(:mod:`wallet.balance_hints`) never joins a group: it is written alone, so it cancels nobody
else's transaction. Every TransactWriteItems carries a ``ClientRequestToken``:
repeating one whose answer was lost commits nothing twice and answers as the first did.

When no attempt of a write was answered, the outcome is unknown and the answer says so
(:class:`~wallet.errors.OutcomeUnknownError`): the client repeats the request with the same nonce
or asks for its receipt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from contracts import api_metrics as metrics
from contracts.idempotency_table import idempotency_key
from contracts.settings import Settings
from contracts.wallets_table import (
    ENTITY_TRANSACTION,
    ENTITY_USER,
    ENTITY_WALLET,
    Attr,
    EntryKey,
    transaction_key,
    user_key,
    wallet_key,
)
from wallet.balance_hints import BalanceHints
from wallet.cancellation import (
    CONDITION_FAILED,
    THROTTLE_REASONS,
    TRANSACTION_CONFLICT,
    Cancellation,
    Cause,
    GroupCancellation,
    conflict_only,
    observed_balances,
    read_cancellation,
    read_group_cancellation,
)
from wallet.commands import CreateWallet, Deposit, Movement, Transfer, request_hash
from wallet.commit_queue import CommitQueue, Request
from wallet.dynamodb import DynamoDBClient, DynamoDBError, DynamoDBTransportError
from wallet.dynamodb_retry import Verdict, retry_after_seconds, throttle_backoff
from wallet.errors import (
    BalanceLimitExceededError,
    ContentionError,
    IdempotencyKeyReusedError,
    InsufficientFundsError,
    OutcomeUnknownError,
    StoreRejectedError,
    StoreUnavailableError,
    ThrottledError,
    WalletError,
    WalletNotFoundError,
)
from wallet.nonce_memory import NonceMemory, Remembered
from wallet.posting import Leg, Posting, WalletWrite, legs_of, post, wallet_writes
from wallet.receipts import Receipt, alive, receipt_of
from wallet.telemetry import Telemetry

_logger = logging.getLogger(__name__)

_CANCELLED: Final = "TransactionCanceledException"
_NOT_EXISTS: Final = "attribute_not_exists(#pk)"
#: A nonce's items are new, or past their time: a record TTL has not deleted yet counts as gone.
_GONE: Final = "attribute_not_exists(#pk) OR #e <= :now"

#: Attribute names go through ``#`` placeholders so none can collide with DynamoDB's reserved words.
_ENTRY_NAMES: Final = {
    "#pk": Attr.PK,
    "#b": Attr.BALANCE,
    "#v": Attr.VERSION,
    "#u": Attr.UPDATED_AT,
    "#tx": Attr.ENTRY_TXN_ID,
    "#ty": Attr.ENTRY_TYPE,
    "#dir": Attr.ENTRY_DIRECTION,
    "#amt": Attr.ENTRY_AMOUNT,
    "#no": Attr.ENTRY_NONCE,
    "#cp": Attr.ENTRY_COUNTERPARTY,
    "#eb": Attr.ENTRIES_BEFORE,
    "#by": Attr.ENTRY_INITIATED_BY,
}
_SET_ENTRY: Final = "#u = :now, #tx = :txn, #ty = :type, #dir = :dir, #amt = :amt, #no = :nonce"
_ADD_MOVEMENT: Final = " ADD #b :delta, #v :count"
_EXISTS: Final = "attribute_exists(#pk)"
#: Wallets whose last stamp a process remembers (oldest forgotten first; forgetting one costs at
#: most a retry, when its next entry falls in the same millisecond).
_STAMPS_KEPT: Final = 100_000
#: Requests in one group commit: bounds what one refusal sends back to be written alone.
_MAX_GROUP: Final = 32
#: Items one request adds to a group commit besides its wallets: transaction item, idempotency record.
_ITEMS_PER_REQUEST: Final = 2
#: Writes of one group whose refusals are read before what is left goes alone (each write after
#: the first follows a refusal; usually one suffices: the reasons name every refused request).
_GROUP_ROUNDS: Final = 3


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of the store's retries; delays are full-jitter exponential backoff in seconds.

    Attributes
    ----------
    conflict_attempts:
        Writes of one request that may be cancelled by another transaction on a wallet (or by a
        wallet stamped ahead of this server's clock) before it fails with
        :class:`~wallet.errors.ContentionError` (nothing written).
    transient_attempts:
        Tries of one DynamoDB call on a 5xx or a network failure before
        :class:`~wallet.errors.StoreUnavailableError`. Repeating a write is safe: the nonce condition
        turns a repeat of a committed transaction into a recognised replay.
    group_conflict_attempts:
        Writes of one group commit that DynamoDB may cancel only for ``TransactionConflict``
        (another process's transaction on one of its wallets) before the group is split into
        single writes, as a group with a real refusal is at once. Splitting a group that met a
        conflict turns one transaction on a busy wallet into many, each able to conflict again.
    throttle_attempts:
        Tries of one DynamoDB call DynamoDB throttles, with botocore's DynamoDB backoff between
        them (:func:`wallet.dynamodb_retry.throttle_backoff`: 50 ms doubling, jittered), before
        :class:`~wallet.errors.ThrottledError` (429). botocore's legacy DynamoDB policy allows
        10 tries over about 25 s, longer than a client waits for a payment.
    attempt_timeout:
        Seconds one attempt may take (credentials, connection, the whole answer): near the latency
        target (DynamoDB answers in milliseconds), so a stalled connection is abandoned and the
        call tried again well within the deadline.
    deadline:
        Seconds one DynamoDB call may take over all its attempts and pauses, and at most half the
        server's drain (``WALLETLAKE_DRAIN_SECONDS``, 25 s: :attr:`WalletStore.call_deadline`), so
        a call in flight at SIGTERM is answered, and its group's turn in the queue taken, before
        the process exits.
    """

    conflict_attempts: int = 10
    transient_attempts: int = 3
    group_conflict_attempts: int = 4
    throttle_attempts: int = 4
    attempt_timeout: float = 2.0
    deadline: float = 10.0
    base_delay: float = 0.005
    max_delay: float = 0.2

    def delay(self, attempt: int) -> float:
        """Full jitter (uniform 0..min(max, base x 2^attempt)): spreads racing retries apart."""
        return random.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(slots=True)
class _Job:
    """A movement waiting in the commit queue: what its posting is made of, kept across retries.

    After a commit returns, at most one of ``receipt``, ``error`` and ``cancelled`` is set: the
    request was answered from its group's reasons (a replay, a refusal), or written alone and
    cancelled (its caller reads why); with none set it was committed as ``posting``.
    """

    command: Movement
    request_hash: str
    txn_id: str
    #: The command's legs, for the balance hints' question (asked each time a group forms).
    legs: tuple[Leg, ...] = ()
    not_before: int = 0
    posting: Posting | None = None
    receipt: Receipt | None = None
    error: WalletError | None = None
    cancelled: DynamoDBError | None = None

    def reset(self) -> None:
        self.receipt = self.error = self.cancelled = None


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
        dynamodb: DynamoDBClient | None = None,
        telemetry: Telemetry | None = None,
        retry: RetryPolicy | None = None,
        clock_ms: Callable[[], int] = _now_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.table = settings.table
        self.idempotency_table = settings.idempotency_table
        self.client = dynamodb or DynamoDBClient(settings.region)
        self.telemetry = telemetry or Telemetry()
        self.retry = retry or RetryPolicy()
        #: Seconds one DynamoDB call may take in all: the policy's deadline, within half the drain.
        self.call_deadline = min(self.retry.deadline, settings.drain_seconds / 2)
        self._clock_ms = clock_ms
        self._sleep = sleep
        self._stamps: dict[str, int] = {}
        self._nonces = NonceMemory()
        self._hints = BalanceHints()
        self._queue: CommitQueue[_Job] = CommitQueue(
            self._commit,
            max_in_flight=settings.writes_in_flight,
            max_requests=_MAX_GROUP,
            on_group=self._count_group,
            items_per_request=_ITEMS_PER_REQUEST,
            goes_alone=self._likely_refused_in,
        )
        settings.check_idempotency_window()

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
                {"Put": _put_new(self.table, claim_item)},
                {"Put": _put_new(self.table, wallet_item)},
            ]
        }
        try:
            await self._call("TransactWriteItems", payload)
        except OutcomeUnknownError as error:  # creating is idempotent per user: repeating tells
            raise StoreUnavailableError(
                "DynamoDB did not answer; repeat the request (a user has one wallet, so a repeat "
                "answers the wallet if it was created)"
            ) from error
        except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
            claim = (_reasons(error) or [{}])[0]
            if claim.get("Code") != CONDITION_FAILED:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing = claim.get("Item") or await self._get(user_key(command.user_id), None) or {}
            if Attr.WALLET_ID not in existing:
                raise self._cancelled_otherwise(error, command.user_id) from error
            existing_id = existing[Attr.WALLET_ID]["S"]
            # Our own earlier attempt may have committed before a lost answer (see _call).
            return existing_id, existing_id == wallet_id
        self._hints.learn({wallet_id: 0})
        return wallet_id, True

    async def balance(self, wallet_id: str) -> int:
        """The wallet's balance in micro-USD, read strongly consistently."""
        item = await self._get(wallet_key(wallet_id), "#b", {"#b": Attr.BALANCE})
        if item is None:
            raise WalletNotFoundError(wallet_id)
        return int(item[Attr.BALANCE]["N"])

    # ---------------------------------------------------------------- movements

    async def deposit(self, command: Deposit) -> Receipt:
        """Credit a wallet once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def transfer(self, command: Transfer) -> Receipt:
        """Move money between two wallets once per nonce (see :meth:`execute`)."""
        return await self.execute(command)

    async def receipt(self, wallet_id: str, nonce: str) -> Receipt | None:
        """The outcome of the wallet's request with ``nonce``, within the window; None if none.

        Read from the idempotency record (strongly consistent), or, for a request written before
        records existed, from its hot transaction item; either past its time counts as gone.
        """
        known = self._nonces.recall(idempotency_key(wallet_id, nonce), self._clock_ms() // 1000)
        if known is not None:
            return dataclasses.replace(known.receipt, replayed=True)
        item = await self._remembered(wallet_id, nonce)
        return None if item is None else receipt_of(item, replayed=True)

    async def execute(self, command: Movement) -> Receipt:
        """Run a deposit or transfer to completion: applied, replayed, or refused with a domain error.

        One TransactWriteItems, with no read before it, shared with the other requests waiting on
        this process's queue when it is busy (:mod:`wallet.commit_queue`). A cancellation of a
        request written alone is read by :func:`wallet.cancellation.read_cancellation`; only two
        causes write again: another transaction holding a wallet (retried after a jittered pause)
        and a wallet stamped at or after this posting's time (retried at once, stamped a
        millisecond after that wallet). A money refusal whose answer did not say whether the nonce
        exists reads the transaction item first (never on the common path: DynamoDB reports every
        item's condition).

        A repeat (same nonce, same body) of a request this process is writing waits for that
        write, and a repeat of one it wrote recently is answered from :mod:`wallet.nonce_memory`:
        neither reaches DynamoDB, so neither cancels a group commit.

        Returns the request's receipt: applied now, or replayed (``replayed``) from the first
        execution's idempotency record.

        Raises
        ------
        WalletNotFoundError, IdempotencyKeyReusedError, InsufficientFundsError, BalanceLimitExceededError
            Refusals, in docs/architecture.md's precedence; nothing was written.
        ContentionError
            A busy wallet: every attempt met another transaction on it; nothing was written (a
            :class:`ThrottledError`, answered 429 ``throttled`` with ``Retry-After``).
        ThrottledError, StoreUnavailableError
            DynamoDB pushed back or failed; nothing was written.
        OutcomeUnknownError
            No attempt was answered: the write may have committed (the error names its txn_id).
        """
        key = idempotency_key(command.wallet_id, command.nonce)
        fingerprint = request_hash(command)
        while True:  # a repeat of a nonce this process is writing or just wrote costs DynamoDB nothing
            known = self._nonces.recall(key, self._clock_ms() // 1000)
            if known is not None and known.request_hash == fingerprint:
                self.telemetry.count(metrics.MEMORY_REPLAYS)
                return self._replay_known(command, known, fingerprint)
            # (another body goes to DynamoDB: a wallet it names may not exist, which precedes 409)
            if (pending := self._nonces.in_flight(key)) is None:
                break
            await asyncio.shield(pending)  # then recalled, or refused: this request writes itself
        self._nonces.begin(key)
        try:
            return await self._write(command, fingerprint)
        finally:
            self._nonces.end(key)

    async def _write(self, command: Movement, fingerprint: str) -> Receipt:
        """:meth:`execute`'s write through the commit queue, with its retries; no other request of
        this process writes the same nonce meanwhile."""
        job = _Job(command, fingerprint, str(uuid.uuid4()), legs_of(command))  # one txn_id across retries
        request = Request(_wallets_of(command), transaction_key(command.wallet_id, command.nonce), job)
        for attempt in range(self.retry.conflict_attempts):
            job.reset()
            try:
                await self._queue.submit(request)
            except OutcomeUnknownError as error:
                raise OutcomeUnknownError(
                    command.wallet_id, command.nonce, job.txn_id, error.retry_after or 1
                ) from error
            if job.error is not None:
                raise job.error
            if job.receipt is not None:
                return job.receipt
            posting = job.posting
            assert posting is not None  # every request the queue sends was posted
            if job.cancelled is None:
                applied = _applied(posting)
                self._nonces.remember(
                    idempotency_key(command.wallet_id, command.nonce),
                    Remembered(applied, job.request_hash, posting.remembered_until),
                )
                return applied
            cancellation = read_cancellation(posting, _reasons(job.cancelled))
            settled = await self._settle(cancellation, posting, job.cancelled)
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

    def _likely_refused_in(self, group: Sequence[Request[_Job]], request: Request[_Job]) -> bool:
        """The commit queue's question: would ``request`` be refused after ``group``, as hinted?

        Asked while the request's wallets have nothing of this process in flight, so a hint is
        this process's latest knowledge; the group's earlier legs on those wallets count first.
        """
        legs = request.value.legs
        hints = self._hints
        if all(hints.get(leg.wallet_id) is None for leg in legs):
            return False
        pending: dict[str, int] = {}
        wallets = set(request.wallets)
        for earlier in group:
            if wallets.isdisjoint(earlier.wallets):
                continue
            for leg in earlier.value.legs:
                pending[leg.wallet_id] = pending.get(leg.wallet_id, 0) + leg.delta
        if not hints.likely_refused(legs, pending):
            return False
        self.telemetry.count(metrics.HINTED_SINGLES)
        return True

    def _count_group(self, size: int) -> None:
        if size > 1:
            self.telemetry.count(metrics.GROUP_COMMITS)
            self.telemetry.count(metrics.GROUPED_REQUESTS, size)

    async def drain(self) -> None:
        """Return once every transaction this store has in flight or waiting has been written.

        A server's shutdown calls it after the last request was answered: a group whose callers
        went away (their tasks cancelled) is still finished, never cut off halfway through a retry.
        """
        await self._queue.drain()

    async def _commit(self, requests: Sequence[Request[_Job]]) -> list[Request[_Job]]:
        """Write one transaction of the queue's requests: stamped, posted, merged per wallet.

        Returns the requests to write again alone (the queue sends them next); every other one is
        settled on its job: committed, answered from its group's reasons, or (written alone)
        cancelled, for its caller to read. A cancelled group is read
        (:func:`~wallet.cancellation.read_group_cancellation`; :meth:`_answer_named`), and the
        rest are written again together at once, stamped anew, holding their wallets and their
        turn in flight: a refusal costs them one round trip. (Giving the turn to the next group
        meanwhile was tried and measured worse: ``bench/open_loop.py --rate 180``, overdraft p99
        118 ms against 69 ms, the extra transaction in flight slowing everyone's.) A group cancelled only for
        ``TransactionConflict`` is written again whole after a jittered pause, up to
        :attr:`RetryPolicy.group_conflict_attempts` times: nothing of it was applied and no request
        of it refused, so splitting it would only send more transactions to the busy wallets.
        Reasons that explain nothing usable (throttling) split the group.
        """
        remaining = list(requests)
        leftovers: list[Request[_Job]] = []
        conflicts = rounds = 0
        conflict_attempts = max(1, self.retry.group_conflict_attempts)
        while remaining:
            postings = [self._posting(request.value, request.wallets) for request in remaining]
            payload = transaction_request(
                self.table,
                *postings,
                now_s=self._clock_ms() // 1000,
                idempotency_table=self.idempotency_table,
            )
            try:
                await self._call("TransactWriteItems", payload)
            except OutcomeUnknownError:  # perhaps applied: these balances are no longer known
                self._hints.forget(wallet.wallet_id for wallet in wallet_writes(postings))
                raise
            except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
                self._hints.learn(observed_balances(postings, _reasons(error)))
                if len(remaining) == 1:
                    remaining[0].value.cancelled = error
                    return leftovers
                reasons = _reasons(error)
                if conflict_only(reasons):
                    self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
                    conflicts += 1
                    if conflicts < conflict_attempts:
                        self.telemetry.count(metrics.GROUP_CONFLICT_RETRIES)
                        self.telemetry.count(metrics.RETRIES)
                        await self._sleep(self.retry.delay(conflicts - 1))
                        continue
                    self.telemetry.count(metrics.GROUP_SPLITS)
                    return leftovers + remaining
                read = read_group_cancellation(postings, reasons)
                rounds += 1
                if read is None or rounds >= _GROUP_ROUNDS:
                    self.telemetry.count(metrics.GROUP_SPLITS)
                    return leftovers + remaining
                kept = self._answer_named(remaining, read, leftovers)
                if read.not_before_ms:
                    self.telemetry.count(metrics.CLOCK_RETRIES)
                self.telemetry.count(metrics.RETRIES)
                if read.conflicted:
                    self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
                    await self._sleep(self.retry.delay(0))
                remaining = kept
            else:
                if wrong := self._hints.committed(leg for posting in postings for leg in posting.legs):
                    self.telemetry.count(metrics.HINT_MISSES, wrong)
                return leftovers
        return leftovers

    def _answer_named(
        self, group: list[Request[_Job]], read: GroupCancellation, alone: list[Request[_Job]]
    ) -> list[Request[_Job]]:
        """Settle the requests a cancelled group's reasons decide; returns those to write again.

        A used nonce is answered from its record and a refusal the reasons decide is answered as
        it is; the requests refused only in the group's order join ``alone``; each request's next
        stamp moves past a wallet stamped ahead.
        """
        kept = []
        for index, request in enumerate(group):
            job = request.value
            job.not_before = max(job.not_before, read.not_before_ms.get(index, 0))
            if index in read.records:
                try:
                    job.receipt = self._replay(job.command, read.records[index], job.request_hash)
                except IdempotencyKeyReusedError as refusal:
                    job.error = refusal
            elif index in read.refused:
                self.telemetry.count(metrics.GROUP_REFUSALS)
                job.error = _refusal_error(*read.refused[index])
            elif index in read.alone:
                alone.append(request)
            else:
                kept.append(request)
        return kept

    def _posting(self, job: _Job, wallets: tuple[str, ...]) -> Posting:
        job.posting = post(
            job.command,
            now_ms=self._stamp(wallets, job.not_before),
            hot_ttl_seconds=self.settings.hot_ttl_seconds,
            txn_id=job.txn_id,
            request_hash=job.request_hash,
            idempotency_window_seconds=self.settings.idempotency_window_seconds,
        )
        return job.posting

    def _stamp(self, wallets: tuple[str, ...], not_before: int) -> int:
        """The posting's time: now, but after this process's last stamp on each touched wallet.

        Called when the queue sends the posting, so this process has nothing else in flight on
        these wallets, and within one group a wallet's later legs get later stamps: per wallet,
        time strictly increases with commit order. Without the memory, an entry committed within
        the same millisecond as the previous one would be refused once by the ``updated_at``
        condition; the map keeps the most recent :data:`_STAMPS_KEPT` wallets.
        """
        stamps = self._stamps
        now = max(self._clock_ms(), not_before, *(stamps.get(wallet_id, -1) + 1 for wallet_id in wallets))
        for wallet_id in wallets:
            stamps.pop(wallet_id, None)  # re-inserted last: the map is oldest first
            stamps[wallet_id] = now
        while len(stamps) > _STAMPS_KEPT:
            del stamps[next(iter(stamps))]
        return now

    async def _settle(
        self, cancellation: Cancellation, posting: Posting, error: DynamoDBError
    ) -> Receipt | None:
        """Act on a read cancellation: an outcome, a refusal (raised), or None to write again."""
        command = posting.command
        cause = cancellation.cause
        if cause is Cause.WALLET_NOT_FOUND:
            raise WalletNotFoundError(cancellation.wallet_id or command.wallet_id)
        if cause is Cause.NONCE_USED:
            existing = cancellation.transaction_item or await self._remembered(
                command.wallet_id, command.nonce
            )
            # None: the record expired between the two calls, so the nonce is free again: write again
            return None if existing is None else self._replay(command, existing, posting.request_hash)
        if cause in (Cause.INSUFFICIENT_FUNDS, Cause.BALANCE_LIMIT):
            # The nonce is judged before funds: a replay of a transfer that emptied the wallet must
            # still answer like the original.
            if not cancellation.nonce_checked and (
                existing := await self._remembered(command.wallet_id, command.nonce)
            ):
                return self._replay(command, existing, posting.request_hash)
            wallet_id = cancellation.wallet_id or command.wallet_id
            if cause is Cause.INSUFFICIENT_FUNDS:
                raise InsufficientFundsError(wallet_id)
            raise BalanceLimitExceededError(wallet_id)
        if cause is Cause.THROTTLED:
            codes = ",".join(cancellation.codes)
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", reasons=codes)
            raise ThrottledError("DynamoDB is throttling this wallet; retry later", retry_after_seconds())
        if cause is Cause.CONFLICT:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return None
        if cause is Cause.CLOCK_BEHIND:
            return None
        raise self._unavailable("TransactWriteItems", error)

    async def _remembered(self, wallet_id: str, nonce: str) -> dict[str, Any] | None:
        """The record of the nonce within its window (or its hot item), read consistently.

        The hot transaction item answers for a request written before records existed; either
        past its ``expires_at`` counts as gone.
        """
        now_s = self._clock_ms() // 1000
        for table, key in (
            (self.idempotency_table, idempotency_key(wallet_id, nonce)),
            (self.table, transaction_key(wallet_id, nonce)),
        ):
            item = await self._get(key, None, table=table)
            if item is not None and alive(item, now_s):
                return item
        return None

    def _replay(self, command: Movement, existing: Mapping[str, Any], fingerprint: str) -> Receipt:
        """The first outcome, if ``existing`` is the record of the same request (else 409).

        The record is remembered (:mod:`wallet.nonce_memory`) until its own ``expires_at``, so
        the next repeat in this process is answered without DynamoDB.
        """
        if existing.get(Attr.REQUEST_HASH, {}).get("S") != fingerprint:
            raise IdempotencyKeyReusedError(command.wallet_id, command.nonce)
        receipt = receipt_of(existing, replayed=True)
        if (expires := existing.get(Attr.EXPIRES_AT)) is not None:
            key = idempotency_key(command.wallet_id, command.nonce)
            self._nonces.remember(key, Remembered(receipt, fingerprint, int(expires["N"])))
        self.telemetry.count(metrics.REPLAYS)
        return receipt

    def _replay_known(self, command: Movement, known: Remembered, fingerprint: str) -> Receipt:
        """The remembered outcome answered again, if ``fingerprint`` is its request's (else 409)."""
        if known.request_hash != fingerprint:
            raise IdempotencyKeyReusedError(command.wallet_id, command.nonce)
        self.telemetry.count(metrics.REPLAYS)
        return dataclasses.replace(known.receipt, replayed=True)

    def _cancelled_otherwise(self, error: DynamoDBError, user_id: str) -> Exception:
        codes = [reason.get("Code", "None") for reason in _reasons(error)]
        if any(code in THROTTLE_REASONS for code in codes):
            self.telemetry.event(metrics.THROTTLES, operation="TransactWriteItems", user_id=user_id)
            return ThrottledError("DynamoDB is throttling; retry later", retry_after_seconds())
        if TRANSACTION_CONFLICT in codes:
            self.telemetry.count(metrics.TRANSACTION_CONFLICTS)
            return ContentionError("another request for this user is in flight; retry")
        return self._unavailable("TransactWriteItems", error)

    # ---------------------------------------------------------- DynamoDB calls

    async def _get(
        self,
        key: str,
        projection: str | None,
        names: dict[str, str] | None = None,
        *,
        table: str | None = None,
    ) -> dict[str, Any] | None:
        payload: dict[str, Any] = {
            "TableName": table or self.table,
            "Key": {Attr.PK: _s(key)},
            "ConsistentRead": True,
        }
        if projection:
            payload["ProjectionExpression"] = projection
            payload["ExpressionAttributeNames"] = names or {}
        answer = await self._call("GetItem", payload)
        item: dict[str, Any] | None = answer.get("Item")
        return item or None

    async def _call(self, operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One DynamoDB call, retried as botocore's retry data says, within one deadline.

        Each attempt has :attr:`RetryPolicy.attempt_timeout`, all of them together
        :attr:`RetryPolicy.deadline`. What an error calls for is :func:`wallet.dynamodb_retry.classify`'s
        verdict: throttling backs off (botocore's DynamoDB delay) and tries again, then answers 429;
        a transient failure (5xx, a lost or garbled answer) tries again, then answers 503; a
        cancellation goes back to the caller, which reads its reasons; a refusal a repeat cannot
        fix (credentials, validation, a missing table) answers 500 ``dynamodb_refused`` at once.
        Every failure is logged with DynamoDB's request id.

        Every write this store sends is conditional on the nonce or on ``attribute_not_exists``,
        and a TransactWriteItems carries its ``ClientRequestToken``, so repeating one whose
        answer was lost cannot apply it twice. When every attempt of a write was sent and none
        was answered, its outcome is unknown (:class:`OutcomeUnknownError`), not "unavailable".
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_deadline
        transient = throttled = 0
        maybe_committed = False
        while True:
            timeout = min(self.retry.attempt_timeout, deadline - loop.time())
            try:
                if timeout <= 0:
                    raise DynamoDBTransportError(
                        f"no time left for {operation} within the {self.call_deadline:.1f} s deadline",
                        sent=False,
                    )
                return await self.client.call(operation, payload, timeout=timeout)
            except DynamoDBError as error:
                verdict = error.verdict
                if verdict is Verdict.CANCELLED:
                    _logger.debug("DynamoDB %s cancelled (request id %s)", operation, error.request_id)
                    raise  # a cancelled transaction: the caller reads its reasons
                _logger.warning(
                    "DynamoDB %s failed: %s %s (%s, request id %s): %s",
                    operation,
                    error.status,
                    error.type,
                    verdict.value,
                    error.request_id,
                    error.message,
                )
                if verdict is Verdict.REFUSED:
                    raise self._rejected(operation, error) from error
                if verdict is Verdict.THROTTLED:
                    self.telemetry.event(metrics.THROTTLES, operation=operation, error=error.type)
                    delay = throttle_backoff(throttled)
                    throttled += 1
                    if throttled >= self.retry.throttle_attempts or loop.time() + delay >= deadline:
                        raise ThrottledError(
                            f"DynamoDB is throttling ({error.type}, request id {error.request_id}); "
                            "nothing was written, retry later with the same nonce",
                            retry_after_seconds(),
                        ) from error
                    self.telemetry.count(metrics.RETRIES)
                    await self._sleep(delay)
                    continue
                maybe_committed = True
                self.telemetry.event(metrics.INTERNAL_ERRORS, operation=operation, error=error.type)
                transient += 1
                if transient >= self.retry.transient_attempts:
                    raise self._unknown(operation, error, maybe_committed) from error
            except DynamoDBTransportError as error:
                maybe_committed = maybe_committed or error.sent
                _logger.warning(
                    "DynamoDB %s failed in transport (request id %s, sent %s): %s",
                    operation,
                    error.request_id,
                    error.sent,
                    error,
                )
                self.telemetry.event(metrics.NETWORK_ERRORS, operation=operation, error=str(error))
                transient += 1
                if transient >= self.retry.transient_attempts or loop.time() >= deadline:
                    raise self._unknown(operation, error, maybe_committed) from error
            self.telemetry.count(metrics.RETRIES)
            await self._sleep(min(self.retry.delay(transient - 1), max(0.0, deadline - loop.time())))

    def _unknown(self, operation: str, error: Exception, maybe_committed: bool) -> StoreUnavailableError:
        """The last failure of a call: outcome unknown for a write that may have committed."""
        if maybe_committed and operation == "TransactWriteItems":
            return OutcomeUnknownError("", "", None, retry_after_seconds())  # execute() names the request
        if isinstance(error, DynamoDBError):
            return self._unavailable(operation, error)
        return StoreUnavailableError(
            f"DynamoDB unreachable for {operation} ({error}); nothing was written, retry later",
            retry_after_seconds(),
        )

    def _unavailable(self, operation: str, error: DynamoDBError) -> StoreUnavailableError:
        if error.verdict is Verdict.CANCELLED:  # cancelled for reasons the store cannot read
            self.telemetry.event(metrics.UNEXPECTED_ERRORS, operation=operation, error=str(error))
        return StoreUnavailableError(
            f"DynamoDB {operation} failed ({error.type}, request id {error.request_id}); retry later",
            retry_after_seconds(),
        )

    def _rejected(self, operation: str, error: DynamoDBError) -> StoreRejectedError:
        """A refusal no repeat can fix: counted, and answered as it is."""
        self.telemetry.event(metrics.UNEXPECTED_ERRORS, operation=operation, error=str(error))
        return StoreRejectedError(
            f"DynamoDB refused {operation}: {error.type} (HTTP {error.status}, request id "
            f"{error.request_id}): {error.message}. Nothing was written; repeating will not help "
            "until the deployment is fixed (credentials, permissions, table)"
        )


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _wallets_of(command: Movement) -> tuple[str, ...]:
    """The wallets a movement touches, in key order (the order their turns are taken in)."""
    if isinstance(command, Deposit):
        return (command.wallet_id,)
    return tuple(sorted((command.wallet_id, command.to_wallet_id)))


def _refusal_error(cause: Cause, wallet_id: str) -> WalletError:
    """The answer to a request of a group its reasons refused (:attr:`GroupCancellation.refused`)."""
    if cause is Cause.WALLET_NOT_FOUND:
        return WalletNotFoundError(wallet_id)
    return InsufficientFundsError(wallet_id)


def _reasons(error: DynamoDBError) -> list[dict[str, Any]]:
    reasons = error.body.get("CancellationReasons")
    return reasons if isinstance(reasons, list) else []


def transaction_request(
    table: str, *postings: Posting, now_s: int | None = None, idempotency_table: str | None = None
) -> dict[str, Any]:
    """TransactWriteItems of postings: one update per touched wallet, the transaction items, the records.

    One posting gives its legs' updates in :attr:`Posting.legs` order, its transaction item and
    its idempotency record (in ``idempotency_table``) last (the order
    :func:`wallet.cancellation.read_cancellation` reads). Several (a group commit) give one update
    per wallet, carrying its legs in posting order, then every transaction item, then every
    record. ``now_s`` (epoch seconds, now when None) judges whether a nonce's earlier items are
    past their time. Without ``idempotency_table`` no record is written: only the items of
    ``table``, whose stream is the ledger (tests that build stream records write so); the store
    always names it. A fresh ``ClientRequestToken`` makes a repeat of this very request (after a
    lost answer) succeed as the first did instead of cancelling.
    """
    now = time.time_ns() // 1_000_000_000 if now_s is None else now_s
    updates = [{"Update": _wallet_update(table, write)} for write in wallet_writes(postings)]
    records = (
        [{"Put": _idempotency_put(idempotency_table, p, now)} for p in postings] if idempotency_table else []
    )
    return {
        "TransactItems": [
            *updates,
            *({"Put": _transaction_put(table, p, now)} for p in postings),
            *records,
        ],
        "ClientRequestToken": str(uuid.uuid4()),
    }


def _applied(posting: Posting) -> Receipt:
    command = posting.command
    return Receipt(
        txn_id=posting.txn_id,
        type=command.txn_type,
        wallet_id=command.wallet_id,
        nonce=command.nonce,
        amount=command.amount,
        counterparty=command.to_wallet_id if isinstance(command, Transfer) else None,
        created_at=posting.created_at,
        initiated_by=command.initiated_by,
    )


def _idempotency_put(table: str, posting: Posting, now_s: int) -> dict[str, Any]:
    """The idempotency record: the request's receipt, kept for the window (its ``expires_at``).

    Its attributes are :data:`contracts.idempotency_table.IDEMPOTENCY_ATTRIBUTES`.
    """
    command = posting.command
    key = idempotency_key(command.wallet_id, command.nonce)
    return _request_put(table, posting, now_s, key=key, expires_at=posting.remembered_until)


def _transaction_put(table: str, posting: Posting, now_s: int) -> dict[str, Any]:
    """The hot transaction item, put only if its key is new or past its hot TTL."""
    command = posting.command
    key = transaction_key(command.wallet_id, command.nonce)
    return _request_put(
        table, posting, now_s, key=key, expires_at=posting.expires_at, entity=ENTITY_TRANSACTION
    )


def _request_put(
    table: str, posting: Posting, now_s: int, *, key: str, expires_at: int, entity: str | None = None
) -> dict[str, Any]:
    """One request's item (the hot transaction item or the idempotency record: the same request
    attributes, their own key and expiry), put only if its key is new or past its ``expires_at``;
    a refusal returns the existing item (ALL_OLD)."""
    command = posting.command
    item: dict[str, Any] = {
        Attr.PK: _s(key),
        Attr.TXN_ID: _s(posting.txn_id),
        Attr.TYPE: _s(command.txn_type),
        Attr.WALLET_ID: _s(command.wallet_id),
        Attr.AMOUNT: _n(command.amount),
        Attr.NONCE: _s(command.nonce),
        Attr.REQUEST_HASH: _s(posting.request_hash),
        Attr.CREATED_AT: _n(posting.created_at),
        Attr.EXPIRES_AT: _n(expires_at),
    }
    if entity is not None:
        item[Attr.ENTITY] = _s(entity)
    if isinstance(command, Transfer):
        item[Attr.TO_WALLET_ID] = _s(command.to_wallet_id)
    if command.initiated_by is not None:
        item[Attr.INITIATED_BY] = _s(command.initiated_by)
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _GONE,
        "ExpressionAttributeNames": {"#pk": Attr.PK, "#e": Attr.EXPIRES_AT},
        "ExpressionAttributeValues": {":now": _n(now_s)},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _put_new(table: str, item: dict[str, Any]) -> dict[str, Any]:
    """A Put only if the key is new; a refusal returns the existing item (ALL_OLD)."""
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": _NOT_EXISTS,
        "ExpressionAttributeNames": {"#pk": Attr.PK},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _wallet_update(table: str, write: WalletWrite) -> dict[str, Any]:
    """One wallet's legs: ``ADD`` their sum and their count, and record the entries on the item.

    The item states its latest entry in the ``entry_*`` attributes and, when this transaction
    applies several, the ones before it in ``entries_before`` (removed otherwise), so its stream
    MODIFY is exactly the entries it applied. The conditions are the money rules and the clock
    rule, checked by DynamoDB at commit: the item exists; the balance before the first leg is
    within :attr:`WalletWrite.floor` and :attr:`WalletWrite.ceiling`, so no leg takes it below
    zero or above the limit; and ``updated_at`` is before the first leg's time, so per wallet,
    time strictly increases with version: ordering a wallet's transaction items by
    ``created_at`` is ordering them by version, which makes a point-in-time export enough to
    number them (:mod:`stream_processor.export_entries`). It caps one wallet at 1,000 commits a
    second, above DynamoDB's own per-item limit (1,000 WCU/s, 2 per transactional write).
    """
    *earlier, (posting, leg) = write.legs
    command = posting.command
    values: dict[str, Any] = {
        ":since": _n(write.legs[0][0].created_at),
        ":now": _n(posting.created_at),
        ":delta": _n(write.delta),
        ":count": _n(len(write.legs)),
        ":txn": _s(posting.txn_id),
        ":type": _s(command.txn_type),
        ":dir": _s(leg.direction),
        ":amt": _n(command.amount),
        ":nonce": _s(command.nonce),
    }
    sets = [_SET_ENTRY]
    removes = []
    if leg.counterparty is None:
        removes.append("#cp")
    else:
        sets.append("#cp = :cp")
        values[":cp"] = _s(leg.counterparty)
    if command.initiated_by is None:
        removes.append("#by")
    else:
        sets.append("#by = :by")
        values[":by"] = _s(command.initiated_by)
    if earlier:
        sets.append("#eb = :eb")
        values[":eb"] = {"L": [{"M": _entry_map(p, entry)} for p, entry in earlier]}
    else:
        removes.append("#eb")
    remove = f" REMOVE {', '.join(removes)}" if removes else ""
    conditions = [_EXISTS]
    if (floor := write.floor) is not None:
        conditions.append("#b >= :floor")
        values[":floor"] = _n(floor)
    if (ceiling := write.ceiling) is not None:
        conditions.append("#b <= :ceiling")
        values[":ceiling"] = _n(ceiling)
    conditions.append("#u < :since")
    return {
        "TableName": table,
        "Key": {Attr.PK: _s(wallet_key(write.wallet_id))},
        "UpdateExpression": f"SET {', '.join(sets)}{remove}{_ADD_MOVEMENT}",
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": _ENTRY_NAMES,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _entry_map(posting: Posting, leg: Leg) -> dict[str, Any]:
    """One earlier entry of a group commit, as ``entries_before`` holds it (:class:`EntryKey`)."""
    command = posting.command
    entry = {
        EntryKey.TXN_ID: _s(posting.txn_id),
        EntryKey.TYPE: _s(command.txn_type),
        EntryKey.DIRECTION: _s(leg.direction),
        EntryKey.AMOUNT: _n(command.amount),
        EntryKey.NONCE: _s(command.nonce),
        EntryKey.CREATED_AT: _n(posting.created_at),
    }
    if leg.counterparty is not None:
        entry[EntryKey.COUNTERPARTY] = _s(leg.counterparty)
    if command.initiated_by is not None:
        entry[EntryKey.INITIATED_BY] = _s(command.initiated_by)
    return entry
