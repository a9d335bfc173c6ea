"""The group-commit scheduler alone: which requests leave together, when, and who hears what.

Pure. :class:`wallet.commit_queue.CommitQueue` is driven with a fake ``commit`` that records each
transaction it is given and waits on a future the test resolves, so a test decides exactly when a
transaction in flight completes and how (committed, a cancelled group, or refused). No test sleeps:
:func:`_settle` only yields to the event loop until the work already scheduled has run.

What is proven, and why it matters to the ledger:

- a request on an idle process goes out at once and alone (no added latency), and requests arriving
  while the process is busy leave together in arrival order (the point of group commit);
- a wallet is in at most one transaction in flight and its requests commit in arrival order (the
  wallet's ``updated_at`` condition needs its stamps committed in order, and DynamoDB serialises
  transactions on an item), even when that means holding back requests whose other wallets are free;
- a transaction never holds two requests with the same transaction item, nor more than
  ``max_requests`` requests or :data:`MAX_ACTIONS` items (DynamoDB refuses it otherwise);
- a cancelled group is written again request by request, before anything else waiting, and every
  caller hears its own answer; a refusal of a group reaches all its callers; a caller that went away
  is never written;
- a property over random arrivals, completion orders and cancellations: every request is committed
  exactly once, per wallet in arrival order, and every caller returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wallet.commit_queue import MAX_ACTIONS, CommitQueue, GroupCancelledError, Request

#: Loop turns :func:`_settle` yields: several times the longest chain of callbacks one step starts
#: (a commit completing -> its sender pumps -> the next sender starts and calls commit).
SETTLE_TURNS = 25


async def _settle() -> None:
    """Let everything already scheduled run (submits, pumps, commits starting or completing)."""
    for _ in range(SETTLE_TURNS):
        await asyncio.sleep(0)


def _request(value: str, *wallets: str, key: str | None = None) -> Request[str]:
    """A request carrying ``value`` on ``wallets``; its transaction item is ``value`` unless given."""
    return Request(wallets=wallets, key=key if key is not None else value, value=value)


class FakeCommit:
    """A ``commit`` that records every transaction and completes it when the test says so.

    ``groups`` holds the values of every transaction sent, in sending order; ``open`` the indices
    (into ``groups``) of those still in flight; ``committed`` the values of the transactions that
    completed successfully, in completion order. ``overlaps`` records any wallet found in two
    transactions in flight at once (it must stay empty).
    """

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.wallets: list[set[str]] = []
        self.keys: list[list[str]] = []
        self.open: list[int] = []
        self.committed: list[str] = []
        self.overlaps: list[set[str]] = []
        self.most_in_flight = 0
        self._gates: list[asyncio.Future[None]] = []

    async def __call__(self, requests: Sequence[Request[str]]) -> None:
        wallets = {wallet for request in requests for wallet in request.wallets}
        for index in self.open:
            if shared := wallets & self.wallets[index]:
                self.overlaps.append(shared)
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.groups.append([request.value for request in requests])
        self.wallets.append(wallets)
        self.keys.append([request.key for request in requests])
        self._gates.append(gate)
        self.open.append(len(self.groups) - 1)
        self.most_in_flight = max(self.most_in_flight, len(self.open))
        await gate

    def finish(self, index: int, error: BaseException | None = None) -> None:
        """Complete transaction ``index``: committed, or raising ``error``."""
        self.open.remove(index)
        if error is None:
            self.committed.extend(self.groups[index])
            self._gates[index].set_result(None)
        else:
            self._gates[index].set_exception(error)


def _start(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(coroutine)


# --------------------------------------------------------------------------- when requests leave


def test_a_request_on_a_process_with_room_in_flight_is_sent_at_once_alone() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        sizes: list[int] = []
        queue = CommitQueue(fake, max_in_flight=2, max_requests=10, on_group=sizes.append)

        # GIVEN an idle process  WHEN a request arrives
        first = _start(queue.submit(_request("r1", "a")))
        await _settle()
        # THEN it is in flight at once, alone
        assert fake.groups == [["r1"]]
        assert queue.in_flight == 1

        # WHEN another arrives while one transaction (of two allowed) is in flight
        second = _start(queue.submit(_request("r2", "b", "c")))
        await _settle()
        # THEN it too goes out at once, alone
        assert fake.groups == [["r1"], ["r2"]]
        assert queue.in_flight == 2
        assert not first.done()
        assert not second.done()

        # WHEN both complete  THEN both callers return and nothing is in flight
        fake.finish(1)
        fake.finish(0)
        await _settle()
        assert (first.result(), second.result()) == (None, None)
        assert queue.in_flight == 0
        assert sizes == [1, 1]

    asyncio.run(scenario())


def test_requests_arriving_while_the_process_is_busy_leave_together_in_arrival_order() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        sizes: list[int] = []
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10, on_group=sizes.append)

        # GIVEN one transaction in flight, the most allowed
        first = _start(queue.submit(_request("r1", "a")))
        await _settle()
        # WHEN four requests arrive meanwhile, one on the busy wallet
        waiting = [
            _start(queue.submit(_request("r2", "b"))),
            _start(queue.submit(_request("r3", "a", "c"))),
            _start(queue.submit(_request("r4", "c"))),
            _start(queue.submit(_request("r5", "d", "b"))),
        ]
        await _settle()
        # THEN they wait
        assert fake.groups == [["r1"]]
        assert queue.in_flight == 1
        assert not any(task.done() for task in waiting)

        # WHEN the transaction in flight completes
        fake.finish(0)
        await _settle()
        # THEN its caller returns and the four leave together, in arrival order, in one transaction
        assert first.result() is None
        assert fake.groups == [["r1"], ["r2", "r3", "r4", "r5"]]
        assert not any(task.done() for task in waiting)

        # AND when that one completes, each of their callers returns
        fake.finish(1)
        await _settle()
        assert [task.result() for task in waiting] == [None] * 4
        assert sizes == [1, 4]
        assert queue.in_flight == 0

    asyncio.run(scenario())


def test_a_request_waiting_for_a_busy_wallet_holds_back_later_requests_on_its_wallets() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=10, max_requests=10)

        # GIVEN wallet a in flight (room for nine more transactions)
        tasks = [_start(queue.submit(_request("r1", "a")))]
        await _settle()
        # WHEN r2 needs a and b, r3 needs only b (free), r4 needs b and c, r5 needs only d
        for request in (
            _request("r2", "a", "b"),
            _request("r3", "b"),
            _request("r4", "c", "b"),
            _request("r5", "d"),
        ):
            tasks.append(_start(queue.submit(request)))
            await _settle()

        # THEN r2 waits for a, and r3 and r4 wait behind r2 although b and c are free; r5 goes at once
        assert fake.groups == [["r1"], ["r5"]]
        assert fake.overlaps == []

        # WHEN a is free again  THEN r2 leaves, and r3, r4 with it, in arrival order
        fake.finish(0)
        await _settle()
        assert fake.groups == [["r1"], ["r5"], ["r2", "r3", "r4"]]

        # WHEN a request arrives on b while that transaction is in flight  THEN it waits for it
        tasks.append(_start(queue.submit(_request("r6", "b"))))
        await _settle()
        assert fake.groups == [["r1"], ["r5"], ["r2", "r3", "r4"]]
        fake.finish(2)
        await _settle()
        assert fake.groups == [["r1"], ["r5"], ["r2", "r3", "r4"], ["r6"]]

        fake.finish(1)
        fake.finish(3)
        await _settle()
        # THEN no wallet was ever in two transactions in flight, and per wallet they committed in
        # arrival order
        assert fake.overlaps == []
        assert fake.committed == ["r1", "r2", "r3", "r4", "r5", "r6"]
        assert [task.result() for task in tasks] == [None] * 6

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ what one holds


def test_two_requests_with_the_same_transaction_item_never_share_a_transaction() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10)
        busy = _start(queue.submit(_request("r0", "z")))
        await _settle()

        # GIVEN, waiting behind a busy process, two requests with the same transaction item (a
        # retried nonce), the second on a wallet of its own, and others
        tasks = [
            _start(queue.submit(_request("r1", "a", key="k"))),
            _start(queue.submit(_request("r2", "b", key="k"))),
            _start(queue.submit(_request("r3", "c", key="m"))),
            _start(queue.submit(_request("r4", "b", key="n"))),
        ]
        await _settle()

        # WHEN the process is free
        fake.finish(0)
        await _settle()
        # THEN the twin waits for the next transaction, holding back the request behind it on b
        assert fake.groups == [["r0"], ["r1", "r3"]]
        fake.finish(1)
        await _settle()
        assert fake.groups == [["r0"], ["r1", "r3"], ["r2", "r4"]]
        fake.finish(2)
        await _settle()
        assert fake.keys == [["r0"], ["k", "m"], ["k", "n"]]
        assert busy.result() is None
        assert [task.result() for task in tasks] == [None] * 4

    asyncio.run(scenario())


def test_max_requests_bounds_a_transaction_and_the_rest_leave_next_in_order() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=3)
        tasks = [_start(queue.submit(_request("r0", "z")))]
        await _settle()

        # GIVEN seven requests waiting on distinct wallets, three allowed per transaction
        tasks += [_start(queue.submit(_request(f"r{i}", f"w{i}"))) for i in range(1, 8)]
        await _settle()

        # WHEN transactions complete one after another
        for index in range(4):
            fake.finish(index)
            await _settle()

        # THEN they left three, three and one, in arrival order
        assert fake.groups == [["r0"], ["r1", "r2", "r3"], ["r4", "r5", "r6"], ["r7"]]
        assert [task.result() for task in tasks] == [None] * 8

    asyncio.run(scenario())


def _actions(requests: list[Request[str]]) -> int:
    return len(requests) + len({wallet for request in requests for wallet in request.wallets})


@pytest.mark.parametrize(
    ("wallets_of", "count", "sizes", "actions"),
    [
        # one wallet each: 2 actions a request, 50 fill a transaction
        (lambda i: (f"w{i}",), 120, [50, 50, 20], [100, 100, 40]),
        # all on one wallet: its update once, then 1 a request, so 99 fill one
        (lambda i: ("shared",), 120, [99, 21], [100, 22]),
        # transfers from one wallet to one each: 3 for the first, 2 for each next; a 50th would make 101
        (lambda i: ("shared", f"w{i}"), 60, [49, 11], [99, 23]),
    ],
    ids=["distinct-wallets", "one-wallet", "transfers-from-one-wallet"],
)
def test_max_actions_bounds_a_transaction_counting_each_request_and_each_distinct_wallet(
    wallets_of: Callable[[int], tuple[str, ...]], count: int, sizes: list[int], actions: list[int]
) -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=1000)
        requests = [_request(f"r{i}", *wallets_of(i)) for i in range(count)]
        tasks = [_start(queue.submit(_request("r-busy", "z")))]
        await _settle()

        # GIVEN more requests waiting than one transaction can hold (max_requests is no limit here)
        tasks += [_start(queue.submit(request)) for request in requests]
        await _settle()

        # WHEN transactions complete one after another
        while fake.open:
            fake.finish(fake.open[0])
            await _settle()

        # THEN each transaction held as many as MAX_ACTIONS allows, in arrival order
        assert [len(group) for group in fake.groups] == [1, *sizes]
        assert [value for group in fake.groups[1:] for value in group] == [r.value for r in requests]
        by_value = {request.value: request for request in requests}
        assert [_actions([by_value[v] for v in group]) for group in fake.groups[1:]] == actions
        assert [task.result() for task in tasks] == [None] * (count + 1)

    asyncio.run(scenario())


# -------------------------------------------------------------------------------- who hears what


def test_a_cancelled_group_is_sent_again_request_by_request_before_anything_else_waiting() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        sizes: list[int] = []
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10, on_group=sizes.append)
        busy = _start(queue.submit(_request("r0", "z")))
        await _settle()
        group = [
            _start(queue.submit(_request("r1", "a"))),
            _start(queue.submit(_request("r2", "b", "a"))),
            _start(queue.submit(_request("r3", "c"))),
        ]
        await _settle()
        fake.finish(0)
        await _settle()
        assert fake.groups == [["r0"], ["r1", "r2", "r3"]]
        # GIVEN that group in flight and two more requests waiting behind it, one on a free wallet
        later = [
            _start(queue.submit(_request("r4", "d"))),
            _start(queue.submit(_request("r5", "a"))),
        ]
        await _settle()

        # WHEN DynamoDB cancels the group
        fake.finish(1, GroupCancelledError(3))
        await _settle()
        # THEN nobody hears of it: its first request is sent again, alone
        assert fake.groups[2:] == [["r1"]]
        assert not any(task.done() for task in group + later)

        # AND each of the others alone, in order, and only then the requests that were waiting
        fake.finish(2)
        await _settle()
        assert fake.groups[3:] == [["r2"]]
        refusal = ValueError("r2 refused on its own")
        fake.finish(3, refusal)
        await _settle()
        assert fake.groups[4:] == [["r3"]]
        fake.finish(4)
        await _settle()
        assert fake.groups[5:] == [["r4", "r5"]]
        fake.finish(5)
        await _settle()

        # THEN each caller got the answer of its own solo commit
        assert busy.result() is None
        assert group[0].result() is None
        assert group[1].exception() is refusal
        assert group[2].result() is None
        assert [task.result() for task in later] == [None, None]
        assert fake.committed == ["r0", "r1", "r3", "r4", "r5"]
        assert sizes == [1, 3, 1, 1, 1, 2]

    asyncio.run(scenario())


def test_a_refusal_of_a_group_reaches_every_caller_of_that_group_and_no_other() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10)
        busy = _start(queue.submit(_request("r0", "z")))
        await _settle()
        # GIVEN a group of three waiting behind a busy process
        group = [_start(queue.submit(_request(f"r{i}", f"w{i}"))) for i in (1, 2, 3)]
        await _settle()
        fake.finish(0)
        await _settle()
        after = _start(queue.submit(_request("r4", "w1")))
        await _settle()
        assert fake.groups == [["r0"], ["r1", "r2", "r3"]]

        # WHEN its commit raises something other than GroupCancelledError
        error = RuntimeError("the store is unavailable")
        fake.finish(1, error)
        await _settle()

        # THEN every caller of that group gets that very exception; it is not sent again
        assert [task.exception() for task in group] == [error, error, error]
        assert fake.groups == [["r0"], ["r1", "r2", "r3"], ["r4"]]
        # AND the request waiting behind it on the same wallet is not affected
        fake.finish(2)
        await _settle()
        assert busy.result() is None
        assert after.result() is None
        assert queue.in_flight == 0

    asyncio.run(scenario())


def test_a_caller_cancelled_while_waiting_is_never_sent_and_holds_back_nothing() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10)
        busy = _start(queue.submit(_request("r0", "z")))
        await _settle()
        # GIVEN three requests waiting on wallet a behind a busy process
        first = _start(queue.submit(_request("r1", "a")))
        gone = _start(queue.submit(_request("r2", "a", "b")))
        last = _start(queue.submit(_request("r3", "b")))
        await _settle()

        # WHEN the middle one's caller goes away before its transaction is sent
        gone.cancel()
        await _settle()
        assert gone.cancelled()

        # THEN it is never sent, and the others leave as if it had not come
        fake.finish(0)
        await _settle()
        assert fake.groups == [["r0"], ["r1", "r3"]]
        fake.finish(1)
        await _settle()
        assert fake.groups == [["r0"], ["r1", "r3"]]
        assert (busy.result(), first.result(), last.result()) == (None, None, None)
        assert queue.in_flight == 0

    asyncio.run(scenario())


def test_a_caller_cancelled_while_in_flight_does_not_disturb_the_rest_of_its_group() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10)
        busy = _start(queue.submit(_request("r0", "z")))
        await _settle()
        stays = _start(queue.submit(_request("r1", "a")))
        leaves = _start(queue.submit(_request("r2", "b")))
        await _settle()
        fake.finish(0)
        await _settle()
        # GIVEN a group of two in flight
        assert fake.groups == [["r0"], ["r1", "r2"]]

        # WHEN one caller goes away, and then the group commits
        leaves.cancel()
        await _settle()
        fake.finish(1)
        await _settle()

        # THEN the other caller returns and its wallets are free again
        assert leaves.cancelled()
        assert (busy.result(), stays.result()) == (None, None)
        after = _start(queue.submit(_request("r3", "a", "b")))
        await _settle()
        assert fake.groups[-1] == ["r3"]
        fake.finish(2)
        await _settle()
        assert after.result() is None

    asyncio.run(scenario())


@pytest.mark.parametrize(("max_in_flight", "max_requests"), [(0, 1), (1, 0), (-1, 5), (0, 0)])
def test_a_queue_needs_room_for_at_least_one_transaction_of_one_request(
    max_in_flight: int, max_requests: int
) -> None:
    async def commit(requests: Sequence[Request[str]]) -> None:
        return None

    with pytest.raises(ValueError, match="at least 1"):
        CommitQueue(commit, max_in_flight=max_in_flight, max_requests=max_requests)


# -------------------------------------------------------------------------------------- property

WALLETS = ["a", "b", "c", "d"]
KEYS = ["k1", "k2", "k3", "k4", "k5"]

request_specs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WALLETS), min_size=1, max_size=2, unique=True),
        st.sampled_from(KEYS),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(
    max_in_flight=st.integers(min_value=1, max_value=3),
    max_requests=st.integers(min_value=1, max_value=4),
    specs=request_specs,
    data=st.data(),
)
def test_under_any_schedule_each_request_commits_once_and_per_wallet_in_arrival_order(
    max_in_flight: int,
    max_requests: int,
    specs: list[tuple[list[str], str]],
    data: st.DataObject,
) -> None:
    requests = [
        Request(wallets=tuple(wallets), key=key, value=f"r{i}") for i, (wallets, key) in enumerate(specs)
    ]
    by_value = {request.value: request for request in requests}
    submitted: list[str] = []
    returned: list[str] = []

    async def call(queue: CommitQueue[str], request: Request[str]) -> None:
        submitted.append(request.value)
        await queue.submit(request)
        returned.append(request.value)

    async def scenario() -> tuple[FakeCommit, list[asyncio.Task[None]]]:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=max_in_flight, max_requests=max_requests)
        pending = list(requests)
        tasks: list[asyncio.Task[None]] = []
        # GIVEN requests arriving at random moments, and transactions completing in a random order,
        # groups of several sometimes cancelled by DynamoDB
        while pending or fake.open:
            if pending and (not fake.open or data.draw(st.booleans(), label="arrive")):
                tasks.append(_start(call(queue, pending.pop(0))))
            else:
                index = data.draw(st.sampled_from(fake.open), label="completes")
                several = len(fake.groups[index]) > 1
                cancel = several and data.draw(st.booleans(), label="cancelled")
                fake.finish(index, GroupCancelledError(len(fake.groups[index])) if cancel else None)
            await _settle()
            assert queue.in_flight == len(fake.open)
        return fake, tasks

    # WHEN the queue runs them to the end
    fake, tasks = asyncio.run(scenario())

    # THEN every caller returned, once (none was left waiting with nothing in flight)
    assert sorted(returned) == sorted(submitted) == sorted(by_value)
    assert all(task.done() and not task.cancelled() and task.exception() is None for task in tasks)
    # AND no wallet was ever in two transactions in flight, nor more in flight than allowed
    assert fake.overlaps == []
    assert fake.most_in_flight <= max_in_flight
    # AND no transaction broke a bound or held one transaction item twice
    for group, keys in zip(fake.groups, fake.keys, strict=True):
        assert 1 <= len(group) <= max_requests
        assert _actions([by_value[value] for value in group]) <= MAX_ACTIONS
        assert len(set(keys)) == len(keys)
    # AND each request was committed exactly once, per wallet in the order it arrived
    assert sorted(fake.committed) == sorted(by_value)
    for wallet in WALLETS:
        arrived = [value for value in submitted if wallet in by_value[value].wallets]
        committed = [value for value in fake.committed if wallet in by_value[value].wallets]
        assert committed == arrived, wallet


# ------------------------------------------------------------------------------- broken callbacks


def test_a_failing_group_counter_refuses_that_group_and_frees_its_wallets() -> None:
    async def commit(requests: Sequence[Request[str]]) -> None:
        sent.append([request.value for request in requests])

    def on_group(size: int) -> None:
        if not sent:  # the first count fails (metrics down)
            sent.append(["counter failed"])
            raise RuntimeError("metrics down")

    async def scenario() -> None:
        queue = CommitQueue(commit, max_in_flight=1, max_requests=10, on_group=on_group)
        # GIVEN a counter that fails on the first transaction
        first = _start(queue.submit(_request("r1", "a")))
        await _settle()
        # WHEN a later request needs the same wallet
        second = _start(queue.submit(_request("r2", "a")))
        await _settle()
        # THEN the first caller hears the failure and the wallet is free for the second
        assert isinstance(first.exception(), RuntimeError)
        assert second.done()
        assert second.exception() is None
        assert queue.in_flight == 0

    sent: list[list[str]] = []
    asyncio.run(scenario())
    assert sent == [["counter failed"], ["r2"]]


def test_a_group_cancelled_error_for_one_request_is_that_requests_refusal() -> None:
    async def commit(requests: Sequence[Request[str]]) -> None:
        calls.append(len(requests))
        raise GroupCancelledError("one request cannot be split")

    async def scenario() -> None:
        queue = CommitQueue(commit, max_in_flight=1, max_requests=10)
        # WHEN a commit breaks the rule and "cancels a group" of one request
        task = _start(queue.submit(_request("r1", "a")))
        await _settle()
        # THEN its caller hears it once: the request is not sent again and again
        assert isinstance(task.exception(), GroupCancelledError)

    calls: list[int] = []
    asyncio.run(scenario())
    assert calls == [1]


# ------------------------------------------------------------------------------------- shutdown


def test_drain_returns_only_once_every_transaction_in_flight_and_waiting_is_written() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        queue = CommitQueue(fake, max_in_flight=1, max_requests=10)
        # GIVEN one transaction in flight, two requests waiting behind it, and a caller of the
        # transaction in flight gone (its server cancelled it at the drain bound)
        first = _start(queue.submit(_request("r1", "a")))
        waiting = [_start(queue.submit(_request("r2", "a"))), _start(queue.submit(_request("r3", "b")))]
        await _settle()
        first.cancel()
        await _settle()

        # WHEN the server drains the queue
        drained = _start(queue.drain())
        await _settle()
        # THEN the drain waits for the transaction in flight, though nobody waits for its answer
        assert not drained.done()
        fake.finish(0)
        await _settle()
        # AND then for the group that leaves after it
        assert fake.groups == [["r1"], ["r2", "r3"]]
        assert not drained.done()
        fake.finish(1)
        await _settle()
        # AND returns when everything is written, with every remaining caller answered
        assert drained.done()
        assert fake.committed == ["r1", "r2", "r3"]
        assert [task.result() for task in waiting] == [None, None]
        assert queue.in_flight == 0

    asyncio.run(scenario())


def test_drain_of_an_idle_queue_returns_at_once() -> None:
    async def scenario() -> None:
        queue = CommitQueue(FakeCommit(), max_in_flight=1, max_requests=10)
        await asyncio.wait_for(queue.drain(), 1)

    asyncio.run(scenario())


def test_a_request_goes_alone_says_would_be_refused_leaves_in_a_transaction_of_its_own() -> None:
    async def scenario() -> None:
        fake = FakeCommit()
        asked: list[tuple[list[str], str]] = []

        def goes_alone(group: Sequence[Request[str]], request: Request[str]) -> bool:
            asked.append(([each.value for each in group], request.value))
            return request.value == "short"

        queue = CommitQueue(fake, max_in_flight=1, max_requests=10, goes_alone=goes_alone)
        # GIVEN one transaction in flight on a, and waiting behind it: requests on b, then one on
        # c the predicate calls short, a later one on c, and one on d
        first = _start(queue.submit(_request("r1", "a")))
        await _settle()
        asked.clear()
        waiting = [
            _start(queue.submit(_request(value, wallet)))
            for value, wallet in (("r2", "b"), ("short", "c"), ("r4", "c"), ("r5", "d"))
        ]
        await _settle()

        # WHEN the transaction in flight completes
        fake.finish(0)
        await _settle()
        # THEN the group leaves without the short one, which was asked with the group formed
        # before it; the later request on c was never asked (its wallet was held by the short one)
        assert fake.groups == [["r1"], ["r2", "r5"]]
        assert asked == [([], "r2"), (["r2"], "short"), (["r2"], "r5")]

        # AND the short one leaves next in a transaction of its own, then the one behind it
        fake.finish(1)
        await _settle()
        assert fake.groups[2] == ["short"]
        fake.finish(2)
        await _settle()
        assert fake.groups[3] == ["r4"]
        fake.finish(3)
        await _settle()
        assert first.result() is None
        assert [task.result() for task in waiting] == [None] * 4

    asyncio.run(scenario())
