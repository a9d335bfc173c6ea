"""DynamoDB misbehaving: throttling, failures, lost answers, lost races and an unreachable endpoint.

A small HTTP proxy stands between the API and DynamoDB Local (the API finds it through the SDK's
``AWS_ENDPOINT_URL_DYNAMODB``, as it would find AWS). It forwards every call unless a test tells it
to answer for DynamoDB, to forward and then lose the answer, or to run something first.
"""

from __future__ import annotations

import dataclasses
import http.client
import http.server
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from support.dynamodb_faults import DynamoDBProxy, nonces_of
from support.wallet_http import Api, error_of, serve
from support.wallet_table import assert_chains

from contracts.settings import Settings
from contracts.wallets_table import Attr
from wallet.store import RetryPolicy, WalletStore
from walletlake.local import free_port

pytestmark = pytest.mark.stack

FAST_RETRIES = RetryPolicy(conflict_attempts=3, transient_attempts=3, base_delay=0.001, max_delay=0.01)
#: The request id the proxy's answers carry (DynamoDB's ``x-amzn-RequestId``).
REQUEST_ID = "REQ0PROXY0000000000000000000000000000000000000000000"


@dataclasses.dataclass
class Fault:
    """What the proxy does with one call instead of plainly forwarding it."""

    status: int | None = None  # answer with this status and DynamoDB error type ...
    error_type: str = ""
    forward_first: bool = False  # ... after forwarding the call (DynamoDB did it; the answer is lost)
    drop_connection: bool = False  # close the connection instead of answering
    bad_crc32: bool = False  # answer with an x-amz-crc32 that does not match the body
    before: Callable[[], None] | None = None  # run this, then forward


Rule = Callable[[str, dict[str, Any]], Fault | None]


class FaultyDynamoDB(DynamoDBProxy):
    """A proxy to DynamoDB Local whose behaviour per call is decided by ``rule``."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.rule: Rule = lambda operation, payload: None
        self.calls: list[str] = []

    def handle(self, request: http.server.BaseHTTPRequestHandler, operation: str, body: bytes) -> None:
        """Forward, answer for DynamoDB, lose the answer or drop the connection, as the rule says."""
        self.calls.append(operation)
        fault = self.rule(operation, orjson.loads(body))
        if fault is not None and fault.before is not None:
            fault.before()
        if fault is None or fault.before is not None or fault.forward_first:
            status, answer = self.forward(body, dict(request.headers))
        if fault is not None and fault.drop_connection:
            request.close_connection = True
            return
        if fault is not None and fault.status is not None:
            status = fault.status
            answer = orjson.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{fault.error_type}"})
        crc = zlib.crc32(answer) ^ (1 if fault is not None and fault.bad_crc32 else 0)
        self.reply(request, status, answer, {"x-amz-crc32": str(crc), "x-amzn-RequestId": REQUEST_ID})


@pytest.fixture
def proxy(stack: Any) -> Iterator[FaultyDynamoDB]:
    with FaultyDynamoDB(stack.environment()["AWS_ENDPOINT_URL_DYNAMODB"]) as faulty:
        yield faulty


@pytest.fixture
def api(settings: Settings, proxy: FaultyDynamoDB, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    """The API whose DynamoDB endpoint (from the SDK's standard variable) is the proxy."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
    store = WalletStore(settings, retry=FAST_RETRIES)
    monkeypatch.undo()
    with serve(settings, store) as client:
        yield client


def on(operation: str, fault: Fault, times: int | None = None, nonce: str | None = None) -> Rule:
    """A rule applying ``fault`` to ``operation`` (optionally only for one nonce, only ``times`` times)."""
    remaining = [times]

    def rule(called: str, payload: dict[str, Any]) -> Fault | None:
        if called != operation or (nonce is not None and nonce not in nonces_of(payload)):
            return None
        if remaining[0] is not None:
            if remaining[0] == 0:
                return None
            remaining[0] -= 1
        return fault

    return rule


def metrics(api: Api) -> dict[str, Any]:
    return dict(api.http.get("/metrics").json())


def test_throttled_writes_answer_429_with_retry_after_and_write_nothing(
    api: Api, proxy: FaultyDynamoDB, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a funded wallet  WHEN DynamoDB throttles every try of the next transaction
    wallet_id = api.create()
    api.deposit(wallet_id, 10, "fund")
    before = api.table()
    proxy.rule = on("TransactWriteItems", Fault(status=400, error_type="ThrottlingException"))
    proxy.calls.clear()
    response = api.deposit(wallet_id, 5, "n")
    # THEN it was tried the bounded number of times with backoff before 429 with a jittered
    # Retry-After, nothing written, every throttle counted and logged with DynamoDB's request id
    assert error_of(response) == (429, "throttled")
    assert response.headers["Retry-After"] in {"1", "2", "3"}
    assert proxy.calls.count("TransactWriteItems") == FAST_RETRIES.throttle_attempts
    assert api.table() == before
    assert metrics(api)["dynamodb_throttles"] == FAST_RETRIES.throttle_attempts
    logged = [r.getMessage() for r in caplog.records if "ThrottlingException" in r.getMessage()]
    assert logged
    assert all(REQUEST_ID in line for line in logged if line.startswith("DynamoDB"))


def test_a_throttle_is_backed_off_and_retried_before_any_429(api: Api, proxy: FaultyDynamoDB) -> None:
    # GIVEN a funded wallet  WHEN DynamoDB throttles the next transaction once
    wallet_id = api.create()
    api.deposit(wallet_id, 10, "fund")
    proxy.rule = on(
        "TransactWriteItems", Fault(status=400, error_type="ProvisionedThroughputExceededException"), times=1
    )
    proxy.calls.clear()
    response = api.deposit(wallet_id, 5, "n")
    # THEN the store backed off and tried again: the client sees 204, the money moved once
    assert response.status_code == 204
    assert proxy.calls.count("TransactWriteItems") == 2
    assert api.balance(wallet_id).json() == {"balance": "15"}
    assert metrics(api)["dynamodb_throttles"] == 1


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(400, "ExpiredTokenException"), (403, "InvalidSignatureException"), (400, "ValidationException")],
)
def test_a_refusal_no_repeat_can_fix_is_answered_as_it_is_at_once(
    api: Api, proxy: FaultyDynamoDB, status: int, error_type: str
) -> None:
    # GIVEN a wallet  WHEN DynamoDB refuses the transaction for credentials or validity
    wallet_id = api.create()
    before = api.table()
    proxy.rule = on("TransactWriteItems", Fault(status=status, error_type=error_type))
    proxy.calls.clear()
    response = api.deposit(wallet_id, 5, "n")
    # THEN it is not retried, and the answer says what DynamoDB said, not "retry later": 500
    # dynamodb_refused, no Retry-After, naming the error and DynamoDB's request id
    assert error_of(response) == (500, "dynamodb_refused")
    assert "Retry-After" not in response.headers
    detail = response.json()["detail"]
    assert error_type in detail
    assert REQUEST_ID in detail
    assert "retry later" not in detail
    assert proxy.calls.count("TransactWriteItems") == 1
    assert api.table() == before
    assert metrics(api)["dynamodb_unexpected_errors"] == 1


def test_an_answer_failing_its_crc32_is_not_trusted_and_the_write_is_repeated_with_its_token(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN a wallet  WHEN DynamoDB commits a deposit but its answer arrives garbled (CRC32 mismatch)
    wallet_id = api.create()
    proxy.rule = on("TransactWriteItems", Fault(forward_first=True, bad_crc32=True), times=1)
    proxy.calls.clear()
    response = api.deposit(wallet_id, 5, "n")
    # THEN the answer is not trusted: the store repeats the write (same ClientRequestToken), which
    # DynamoDB answers as it answered the first, and the money moved once
    assert response.status_code == 204
    assert "Idempotent-Replayed" not in response.headers
    assert proxy.calls.count("TransactWriteItems") == 2
    assert api.balance(wallet_id).json() == {"balance": "5"}
    assert metrics(api)["dynamodb_network_errors"] == 1


def test_throttled_reads_answer_429(api: Api, proxy: FaultyDynamoDB) -> None:
    wallet_id = api.create()
    proxy.rule = on("GetItem", Fault(status=400, error_type="ProvisionedThroughputExceededException"))
    assert error_of(api.balance(wallet_id)) == (429, "throttled")
    # a write reads nothing before it, so throttled reads do not stop it
    assert api.deposit(wallet_id, 5, "n").status_code == 204


def test_dynamodb_failures_answer_503_after_bounded_retries_and_write_nothing(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN a wallet  WHEN every transaction fails inside DynamoDB
    wallet_id = api.create()
    before = api.table()
    proxy.rule = on("TransactWriteItems", Fault(status=500, error_type="InternalServerError"))
    proxy.calls.clear()
    response = api.deposit(wallet_id, 5, "n")
    # THEN 503 with Retry-After after exactly the bounded number of tries, nothing written; each
    # try was answered 500, which does not say whether DynamoDB committed, so the answer says the
    # outcome is unknown
    assert error_of(response) == (503, "outcome_unknown")
    assert response.headers["Retry-After"] in {"1", "2", "3"}
    assert proxy.calls.count("TransactWriteItems") == FAST_RETRIES.transient_attempts
    assert api.table() == before
    assert metrics(api)["dynamodb_internal_errors"] == FAST_RETRIES.transient_attempts


def test_a_lost_answer_of_a_committed_transfer_is_repeated_with_its_request_token(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN two wallets  WHEN DynamoDB commits a transfer but its answer is lost (500), once
    payer, payee = api.create(), api.create()
    api.deposit(payer, 100, "fund")
    proxy.rule = on(
        "TransactWriteItems", Fault(status=500, error_type="InternalServerError", forward_first=True), times=1
    )
    response = api.transfer(payer, payee, 30, "t")
    # THEN the client still gets 204 and the money moved exactly once: the store's repeat carried
    # the same ClientRequestToken, so DynamoDB answered it as the committed original (not a replay)
    assert response.status_code == 204
    assert "Idempotent-Replayed" not in response.headers
    table = api.table()
    assert (table.wallets[payer][Attr.BALANCE], table.wallets[payee][Attr.BALANCE]) == (70, 30)
    assert len(table.transactions) == 2
    (record,) = [r for r in table.records.values() if r[Attr.NONCE] == "t"]
    assert response.headers["Transaction-Id"] == record[Attr.TXN_ID]
    assert metrics(api)["idempotent_replays"] == 0


def test_a_write_whose_every_answer_was_lost_says_its_outcome_is_unknown_and_the_retry_replays(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN two wallets  WHEN DynamoDB commits a transfer but every answer the server waits for is
    # lost (the first attempt's, and its repeats')
    payer, payee = api.create(), api.create()
    api.deposit(payer, 100, "fund")
    proxy.rule = on("TransactWriteItems", Fault(forward_first=True, drop_connection=True), nonce="t")
    lost = api.transfer(payer, payee, 30, "t")
    # THEN the answer says the outcome is unknown and what to do, and names the transaction
    assert error_of(lost) == (503, "outcome_unknown")
    detail = lost.json()["detail"]
    assert "outcome" in detail
    assert "unknown" in detail
    assert "same nonce" in detail
    assert f"/api/v1/wallets/{payer}/transactions/t" in detail
    assert int(lost.headers["Retry-After"]) >= 1
    txn_id = lost.headers["Transaction-Id"]
    # AND asking for it tells it committed
    receipt = api.call("GET", f"/api/v1/wallets/{payer}/transactions/t")
    assert receipt.status_code == 200
    assert receipt.json()["transaction_id"] == txn_id
    # WHEN the client repeats it  THEN it replays the first outcome: the money moved once
    proxy.rule = lambda operation, payload: None
    again = api.transfer(payer, payee, 30, "t")
    assert again.status_code == 204
    assert (again.headers["Idempotent-Replayed"], again.headers["Transaction-Id"]) == ("true", txn_id)
    table = api.table()
    assert (table.wallets[payer][Attr.BALANCE], table.wallets[payee][Attr.BALANCE]) == (70, 30)


def test_a_dropped_connection_after_commit_is_retried_as_a_replay(api: Api, proxy: FaultyDynamoDB) -> None:
    wallet_id = api.create()
    proxy.rule = on("TransactWriteItems", Fault(forward_first=True, drop_connection=True), times=1)
    assert api.deposit(wallet_id, 9, "n").status_code == 204
    table = api.table()
    assert table.wallets[wallet_id][Attr.BALANCE] == 9
    assert len(table.transactions) == 1


def test_a_write_stamped_later_by_another_request_is_written_again_at_that_time(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN a funded payer  WHEN another deposit commits between the transfer's stamping and its
    # write (so the wallet's updated_at is ahead of the transfer's time)
    # (the racer is another API process, as on AWS: one process never races itself on a wallet)
    payer, payee = api.create(), api.create()
    api.deposit(payer, 100, "fund")
    with serve(api.settings) as other:
        proxy.rule = on(
            "TransactWriteItems", Fault(before=lambda: other.deposit(payer, 1, "racer")), times=1, nonce="t"
        )
        response = api.transfer(payer, payee, 60, "t")
    # THEN the transfer is refused by the updated_at condition once, written again at the racer's
    # time (no read), and both entries are numbered in order with time never running backwards
    assert response.status_code == 204
    table = assert_chains(api.settings, [payer, payee])
    assert table.wallets[payer][Attr.BALANCE] == 41
    assert table.wallets[payer][Attr.VERSION] == 3
    by_nonce = {txn[Attr.NONCE]: txn[Attr.CREATED_AT] for txn in table.transactions}
    assert by_nonce["t"] > by_nonce["racer"]
    assert metrics(api)["dynamodb_clock_retries"] == 1


def test_a_wallet_that_keeps_changing_gives_up_with_429_and_writes_nothing_of_its_own(
    api: Api, proxy: FaultyDynamoDB
) -> None:
    # GIVEN a payer that another client deposits into before every attempt of our transfer (each
    # attempt then finds the wallet stamped after its own time)
    payer, payee = api.create(), api.create()
    api.deposit(payer, 100, "fund")
    counter = iter(range(100))
    with serve(api.settings) as other:  # another API process
        proxy.rule = on(
            "TransactWriteItems",
            Fault(before=lambda: other.deposit(payer, 1, f"racer-{next(counter)}")),
            nonce="lost",
        )
        response = api.transfer(payer, payee, 60, "lost")
    # THEN 429 throttled with Retry-After after the bounded attempts (a busy wallet, as seed 000
    # answers it); only the racers' deposits exist
    assert error_of(response) == (429, "throttled")
    assert response.headers["Retry-After"] == "1"
    table = api.table()
    assert {txn[Attr.NONCE] for txn in table.transactions} == {"fund", "racer-0", "racer-1", "racer-2"}
    assert table.wallets[payee][Attr.VERSION] == 0
    assert_chains(api.settings, [payer])
    assert metrics(api)["contention_exhausted"] == 1


def test_an_unreachable_dynamodb_answers_503(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an API whose DynamoDB endpoint has nobody listening
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{free_port()}")
    store = WalletStore(settings, retry=FAST_RETRIES)
    monkeypatch.undo()
    with serve(settings, store) as api:
        # WHEN a client asks anything that needs DynamoDB  THEN 503 unavailable, with Retry-After
        response = api.balance("00000000-0000-4000-8000-000000000001")
        assert error_of(response) == (503, "unavailable")
        assert metrics(api)["dynamodb_network_errors"] == FAST_RETRIES.transient_attempts


def test_a_missing_table_is_answered_as_a_refusal_and_counted(settings: Settings) -> None:
    # GIVEN an API pointed at a table that does not exist
    with serve(settings.replace(table=f"{settings.table}-missing")) as api:
        # WHEN it needs DynamoDB  THEN 500 dynamodb_refused naming DynamoDB's error (a repeat cannot
        # help until the deployment is fixed), and the unexpected error is counted
        response = api.balance("00000000-0000-4000-8000-000000000001")
        assert error_of(response) == (500, "dynamodb_refused")
        assert "ResourceNotFoundException" in response.json()["detail"]
        assert error_of(api.call("POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())})) == (
            500,
            "dynamodb_refused",
        )
        assert metrics(api)["dynamodb_unexpected_errors"] == 2
