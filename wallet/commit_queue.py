"""Group commit: this process's movements, written a bounded number of transactions at a time.

A wallet takes one transaction at a time (DynamoDB serialises transactions on an item, and the
wallet's ``updated_at`` condition needs its stamps committed in order), so a busy wallet's writes
queue. Rather than send them one after another, the queue writes everything waiting on free wallets
as one TransactWriteItems: one update per touched wallet carrying all its entries
(:class:`wallet.posting.WalletWrite`) and one transaction item per request. A merchant taking 20
payments at once costs one commit of its item instead of 20 in a row; every request still gets its
own nonce record and its own answer.

The rules:

- at most ``max_in_flight`` transactions of this process are in flight; a request arriving while
  fewer are goes out at once, alone (no added latency when the process is not busy); the others
  wait and leave together in the next transaction;
- a wallet is in at most one transaction in flight, and waiting requests leave in arrival order
  per wallet (a request that must wait for a wallet holds back later ones on it);
- a request that ``goes_alone`` says would bring a refusal on the group being formed (the store
  asks its balance hints, :mod:`wallet.balance_hints`) leaves in a transaction of its own, so a
  refusal costs nobody else a round trip;
- one transaction holds at most :data:`MAX_ACTIONS` items (DynamoDB's limit of 100 actions per
  TransactWriteItems: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html)
  and at most ``max_requests`` requests, and never two requests with the same transaction item
  (a retried nonce waits for the next one);
- the commit returns the requests of its group that must be written again alone (those a
  cancellation named: the store writes the rest of the group again together, at once, before it
  returns); they go first, each alone, as soon as their wallets are free. A commit that raises
  :class:`GroupCancelledError` sends every request of its group back alone. The whole write is
  all-or-nothing, so nothing of a cancelled one was applied;
- :meth:`CommitQueue.drain` waits for every transaction in flight and every waiting request whose
  caller is still there: a server's shutdown ends with an empty queue.

In the Lambda function each invocation serves one request, so every transaction there is a single
request; the queue pays off in a long-running server (``walletlake serve``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Generic, TypeVar

#: DynamoDB's limit of actions (items) in one TransactWriteItems.
MAX_ACTIONS: Final = 100

T = TypeVar("T")


class GroupCancelledError(Exception):
    """Raised by a commit of several requests that DynamoDB cancelled: each is written again alone."""


@dataclasses.dataclass(eq=False, slots=True)
class Request(Generic[T]):
    """One request waiting for a transaction: its wallets, its transaction item, and what it carries."""

    wallets: tuple[str, ...]
    key: str
    value: T
    alone: bool = False
    future: asyncio.Future[None] | None = None


#: Writes one transaction of the requests; returns those to write again alone (None: none).
Commit = Callable[[Sequence[Request[T]]], Awaitable[Sequence[Request[T]] | None]]


class CommitQueue(Generic[T]):
    """Forms and sends the group commits of one process (see the module docstring).

    Parameters
    ----------
    commit:
        Writes one transaction of the given requests, in order; raises to refuse it (with
        :class:`GroupCancelledError` when several requests were cancelled together).
    max_in_flight:
        Transactions of this process in flight at once.
    max_requests:
        Requests in one transaction.
    on_group:
        Told the size of every transaction sent (for metrics).
    items_per_request:
        Items one request adds to a transaction besides its wallets' (its nonce's items).
    goes_alone:
        Asked with the group formed so far and a request whose wallets are free: True sends the
        request in a transaction of its own (it would likely be refused, cancelling the group).
        Asked when the request's wallets have nothing of this process in flight.
    """

    def __init__(
        self,
        commit: Commit[T],
        *,
        max_in_flight: int,
        max_requests: int,
        on_group: Callable[[int], None] = lambda size: None,
        items_per_request: int = 1,
        goes_alone: Callable[[Sequence[Request[T]], Request[T]], bool] = lambda group, request: False,
    ) -> None:
        if max_in_flight < 1 or max_requests < 1:
            raise ValueError("max_in_flight and max_requests must be at least 1")
        self._commit = commit
        self._max_in_flight = max_in_flight
        self._max_requests = max_requests
        self._on_group = on_group
        self._items_per_request = items_per_request
        self._goes_alone = goes_alone
        self._waiting: list[Request[T]] = []
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Transactions of this process in flight now."""
        return len(self._tasks)

    async def drain(self) -> None:
        """Return when no transaction is in flight and nothing sendable waits (shutdown)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def submit(self, request: Request[T]) -> None:
        """Wait until ``request`` is committed (returns) or refused (raises what the commit raised)."""
        request.future = asyncio.get_running_loop().create_future()
        self._waiting.append(request)
        self._pump()
        await request.future

    def _pump(self) -> None:
        """Send transactions while there is room in flight and waiting requests on free wallets."""
        while self._waiting and len(self._tasks) < self._max_in_flight:
            group = self._next_group()
            if not group:
                return
            for request in group:
                self._busy.update(request.wallets)
            task = asyncio.get_running_loop().create_task(self._send(group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _next_group(self) -> list[Request[T]]:
        """The waiting requests the next transaction takes, in arrival order."""
        held = set(self._busy)  # wallets nobody may take now: in flight, or held by an earlier request
        wallets: set[str] = set()
        keys: set[str] = set()
        group: list[Request[T]] = []
        actions = 0
        remaining: list[Request[T]] = []
        for request in self._waiting:
            if request.future is None or request.future.done():  # its caller went away
                continue
            needed = self._items_per_request + sum(1 for wallet in request.wallets if wallet not in wallets)
            fits = (
                held.isdisjoint(request.wallets)
                and len(group) < self._max_requests
                and actions + needed <= MAX_ACTIONS
                and request.key not in keys
                and not (group and group[0].alone)
            )
            if fits and not request.alone and self._goes_alone(group, request):
                request.alone = True
            if fits and not (request.alone and group):
                group.append(request)
                wallets.update(request.wallets)
                keys.add(request.key)
                actions += needed
            else:
                held.update(request.wallets)
                remaining.append(request)
        self._waiting = remaining
        return group

    async def _send(self, group: list[Request[T]]) -> None:
        try:
            again = await self._commit_group(group)
            for request in reversed(again):  # first in line again, alone, in their order
                request.alone = True
                self._waiting.insert(0, request)
            for request in group:
                if request not in again:
                    _settle(request, None)
        finally:
            for request in group:
                self._busy.difference_update(request.wallets)
            if (task := asyncio.current_task()) is not None:
                self._tasks.discard(task)
            self._pump()

    async def _commit_group(self, group: list[Request[T]]) -> Sequence[Request[T]]:
        """The requests to write again alone; a refusal of the whole group settles each request."""
        try:
            self._on_group(len(group))
            return await self._commit(group) or ()
        except GroupCancelledError as error:
            if len(group) == 1:  # nothing left to split: the request's own refusal
                _settle(group[0], error)
                return ()
            return group
        except BaseException as error:
            for request in group:
                _settle(request, error)
            return ()


def _settle(request: Request[T], error: BaseException | None) -> None:
    future = request.future
    if future is None or future.done():
        return
    if error is None:
        future.set_result(None)
    elif isinstance(error, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(error)
