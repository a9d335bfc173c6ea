"""The write path's transactions: this process's movements posted, grouped and sent to DynamoDB.

:class:`GroupCommitter` owns what a transaction is made of in one process: the commit queue
(:mod:`wallet.commit_queue`: several waiting requests in one TransactWriteItems), each wallet's
last stamp (per wallet, time strictly increases with version), and the balance hints
(:mod:`wallet.balance_hints`) that send a request likely refused alone. It settles every request
of a round on its :class:`Job`, and an answer once settled stays settled: a later round of the
same group that fails (a lost answer, throttling) changes only the requests still in it, so a
replay or refusal already read from an earlier round's reasons is answered as read, and a request
whose outcome is unknown is named by the ``txn_id`` its record would replay.

A cancelled group is read (:func:`wallet.cancellation.read_group_cancellation`): a used nonce is
answered from its record, a refusal the reasons decide is answered as it is, the requests refused
only in the group's order are written alone afterwards, and the others go again together at once,
holding their wallets. A group cancelled only for ``TransactionConflict`` is written again whole
after a jittered pause, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from contracts import api_metrics as metrics
from contracts.idempotency_table import idempotency_key
from contracts.settings import Settings
from wallet.balance_hints import BalanceHints
from wallet.cancellation import (
    Cause,
    GroupCancellation,
    cancellation_reasons,
    conflict_only,
    observed_balances,
    read_group_cancellation,
)
from wallet.commands import Movement
from wallet.commit_queue import CommitQueue, Request
from wallet.dynamodb import DynamoDBError
from wallet.dynamodb_calls import CallState, DynamoDBCalls
from wallet.errors import InsufficientFundsError, OutcomeUnknownError, WalletError, WalletNotFoundError
from wallet.posting import Leg, Posting, legs_of, post, wallet_writes
from wallet.receipts import Receipt
from wallet.telemetry import Telemetry
from wallet.write_requests import transaction_request

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


@dataclasses.dataclass(slots=True)
class Job:
    """A movement waiting in the commit queue: what its posting is made of, kept across retries.

    After a commit returns, at most one of ``record``, ``error``, ``cancelled`` and ``failure`` is
    set: the request was answered from its group's reasons (``record``: its nonce's record, to be
    judged; ``error``: a refusal), or written alone and cancelled (its caller reads why), or its
    round failed (``failure``: raised as it is, or as an unknown outcome when an attempt went
    unanswered); with none set it was committed as ``posting``. ``state`` outlives the rounds.
    """

    command: Movement
    request_hash: str
    txn_id: str
    #: The command's legs, for the balance hints' question (asked each time a group forms).
    legs: tuple[Leg, ...] = ()
    not_before: int = 0
    posting: Posting | None = None
    record: Mapping[str, Any] | None = None
    error: WalletError | None = None
    cancelled: DynamoDBError | None = None
    failure: WalletError | None = None
    state: CallState = dataclasses.field(default_factory=CallState)

    @classmethod
    def of(cls, command: Movement, request_hash: str, txn_id: str) -> Job:
        return cls(command, request_hash, txn_id, legs_of(command))

    def reset(self) -> None:
        self.record = self.error = self.cancelled = self.failure = None

    def request(self) -> Request[Job]:
        command = self.command
        # the wallets its movement type's legs touch (contracts.movement_types), in a fixed order
        wallets = tuple(sorted({leg.wallet_id for leg in self.legs or legs_of(command)}))
        return Request(wallets, idempotency_key(command.wallet_id, command.nonce, command.initiated_by), self)

    def unknown(self, retry_after: int = 1) -> OutcomeUnknownError:
        """The answer of a request an unanswered attempt may have committed, named as a repeat replays it."""
        command = self.command
        return OutcomeUnknownError(command.wallet_id, command.nonce, self.txn_id, retry_after)


class GroupCommitter:
    """Sends this process's movements: posted, grouped, written, each settled on its :class:`Job`."""

    def __init__(
        self,
        settings: Settings,
        calls: DynamoDBCalls,
        telemetry: Telemetry,
        *,
        clock_ms: Callable[[], int],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.table = settings.table
        self.idempotency_table = settings.idempotency_table
        self.calls = calls
        self.retry = calls.retry
        self.telemetry = telemetry
        self.hints = BalanceHints()
        self._clock_ms = clock_ms
        self._sleep = sleep
        self._stamps: dict[str, int] = {}
        self._queue: CommitQueue[Job] = CommitQueue(
            self._commit,
            max_in_flight=settings.writes_in_flight,
            max_requests=_MAX_GROUP,
            on_group=self._count_group,
            items_per_request=_ITEMS_PER_REQUEST,
            goes_alone=self._likely_refused_in,
        )

    async def submit(self, request: Request[Job]) -> None:
        """Write ``request`` (alone or in a group); its job says how it ended."""
        await self._queue.submit(request)

    async def drain(self) -> None:
        """Return once every transaction in flight or waiting has been written."""
        await self._queue.drain()

    def _likely_refused_in(self, group: Sequence[Request[Job]], request: Request[Job]) -> bool:
        """The commit queue's question: would ``request`` be refused after ``group``, as hinted?

        Asked while the request's wallets have nothing of this process in flight, so a hint is
        this process's latest knowledge; the group's earlier legs on those wallets count first.
        """
        legs = request.value.legs
        hints = self.hints
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

    async def _commit(self, requests: Sequence[Request[Job]]) -> list[Request[Job]]:
        """Write one transaction of the queue's requests: stamped, posted, merged per wallet.

        Returns the requests to write again alone (the queue sends them next); every other one is
        settled on its job: committed, answered from its group's reasons, cancelled (written
        alone, for its caller to read), or failed. A cancelled group is read
        (:func:`~wallet.cancellation.read_group_cancellation`; :meth:`_answer_named`), and the
        rest are written again together at once, stamped anew, holding their wallets and their
        turn in flight: a refusal costs them one round trip. (Giving the turn to the next group
        meanwhile was tried and measured worse: ``bench/open_loop.py --rate 180``, overdraft p99
        118 ms against 69 ms, the extra transaction in flight slowing everyone's.) A group
        cancelled only for ``TransactionConflict`` is written again whole after a jittered pause,
        up to :attr:`RetryPolicy.group_conflict_attempts` times. Reasons that explain nothing
        usable (throttling) split the group. A round that fails settles only the requests still
        in it: earlier rounds' answers stand.
        """
        remaining = list(requests)
        leftovers: list[Request[Job]] = []
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
            state = CallState()
            try:
                await self.calls.call("TransactWriteItems", payload, state)
            except DynamoDBError as error:  # cancelled (anything else is raised as a domain error)
                self._note_unanswered(remaining, state)
                self.hints.learn(observed_balances(postings, cancellation_reasons(error.body)))
                if len(remaining) == 1:
                    remaining[0].value.cancelled = error
                    return leftovers
                reasons = cancellation_reasons(error.body)
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
            except WalletError as failure:  # failed: only the requests of this round are settled so
                self._note_unanswered(remaining, state)
                if isinstance(failure, OutcomeUnknownError):  # perhaps applied: balances unknown
                    self.hints.forget(wallet.wallet_id for wallet in wallet_writes(postings))
                for request in remaining:
                    request.value.failure = failure
                return leftovers
            else:
                if wrong := self.hints.committed(leg for posting in postings for leg in posting.legs):
                    self.telemetry.count(metrics.HINT_MISSES, wrong)
                return leftovers
        return leftovers

    @staticmethod
    def _note_unanswered(requests: Sequence[Request[Job]], state: CallState) -> None:
        if state.unanswered:
            for request in requests:
                request.value.state.unanswered = True

    def _answer_named(
        self, group: list[Request[Job]], read: GroupCancellation, alone: list[Request[Job]]
    ) -> list[Request[Job]]:
        """Settle the requests a cancelled group's reasons decide; returns those to write again.

        A used nonce is answered from its record (judged by the store) and a refusal the reasons
        decide is answered as it is; the requests refused only in the group's order join
        ``alone``; each request's next stamp moves past a wallet stamped ahead.
        """
        kept = []
        for index, request in enumerate(group):
            job = request.value
            job.not_before = max(job.not_before, read.not_before_ms.get(index, 0))
            if index in read.records:
                job.record = read.records[index]
            elif index in read.refused:
                self.telemetry.count(metrics.GROUP_REFUSALS)
                job.error = _refusal_error(*read.refused[index])
            elif index in read.alone:
                alone.append(request)
            else:
                kept.append(request)
        return kept

    def _posting(self, job: Job, wallets: tuple[str, ...]) -> Posting:
        job.posting = post(
            job.command,
            now_ms=self._stamp(wallets, job.not_before),
            hot_ttl_seconds=self.settings.hot_ttl_seconds,
            txn_id=job.txn_id,
            request_hash=job.request_hash,
            idempotency_window_seconds=self.settings.idempotency_window_seconds,
            legs=job.legs or None,
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


def applied_receipt(posting: Posting) -> Receipt:
    """The receipt of a posting DynamoDB committed."""
    command = posting.command
    return Receipt(
        txn_id=posting.txn_id,
        type=command.txn_type,
        wallet_id=command.wallet_id,
        nonce=command.nonce,
        amount=command.amount,
        counterparty=command.to_wallet_id,
        created_at=posting.created_at,
        initiated_by=command.initiated_by,
    )


def _refusal_error(cause: Cause, wallet_id: str) -> WalletError:
    """The answer to a request of a group its reasons refused (:attr:`GroupCancellation.refused`)."""
    if cause is Cause.WALLET_NOT_FOUND:
        return WalletNotFoundError(wallet_id)
    return InsufficientFundsError(wallet_id)
