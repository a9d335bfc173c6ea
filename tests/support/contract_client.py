"""A payments client that follows the API's documented contract exactly, and what it was told.

The README's table of answers says what a client must do after each one; :func:`pay` does that and
nothing else: the same nonce after 429/503/500, an unknown outcome decided (by the outcome lookup
or by repeating the request with the same nonce) before anything else, a new nonce only after a
definite "did not commit" (404 from the lookup, 409 ``nonce_voided``). Every answer it got is kept
in :class:`Told`, for the checker to hold against the final tables.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from typing import Final

import httpx

#: Answers after which the same request is simply sent again with the same nonce.
_REPEAT: Final = {429, 500, 503}
#: Refusals a request's own record keeps: final, nothing moved.
REFUSALS: Final = {"insufficient_funds", "balance_limit_exceeded", "wallet_not_found"}
#: A client honours Retry-After; scaled down here (the servers are in-process), never zero, so a
#: transaction still committing gets the event loop.
_PAUSE: Final = 0.01


@dataclasses.dataclass
class Told:
    """One nonce of one payment, and everything its client was told about it."""

    wallet_id: str
    nonce: str
    amount: int
    to_wallet_id: str | None
    principal: str | None = None
    #: applied, refused, not_committed (decided void), wrong:<code> (an answer no rule allows
    #: here), or undecided (the client gave up; the checker decides it with faults off)
    verdict: str = "undecided"
    txn_id: str | None = None
    refusal: str | None = None
    answers: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    unknown_txn_ids: list[str] = dataclasses.field(default_factory=list)
    #: transactions an answer said were not written (429, 500, 503 ``unavailable``)
    not_written_txn_ids: list[str] = dataclasses.field(default_factory=list)

    @property
    def path(self) -> str:
        if self.to_wallet_id is None:
            return f"/api/v1/wallets/{self.wallet_id}/deposit/"
        return f"/api/v1/wallets/{self.wallet_id}/transfer/{self.to_wallet_id}/"

    @property
    def lookup_path(self) -> str:
        return f"/api/v1/wallets/{self.wallet_id}/transactions/{self.nonce}"


def _code(response: httpx.Response) -> str:
    return "" if response.status_code == 204 else str(response.json().get("error", ""))


def _headers(told: Told) -> dict[str, str]:
    if told.principal is None:
        return {}
    return {"x-amzn-lattice-identity": f"Principal={told.principal}; SessionName=s; Type=AWSIAM"}


async def send(apis: list[httpx.AsyncClient], rng: random.Random, told: Told, *, steps: int = 40) -> None:
    """Drive one nonce to a final answer as the contract says (any server may answer each call)."""
    body = {"amount": str(told.amount), "nonce": told.nonce}
    for _ in range(steps):
        response = await rng.choice(apis).put(told.path, json=body, headers=_headers(told))
        code = _code(response)
        told.answers.append((response.status_code, code))
        if response.status_code == 204:
            told.verdict, told.txn_id = "applied", response.headers["Transaction-Id"]
            return
        if code in REFUSALS:
            told.verdict, told.refusal = "refused", code
            return
        if code == "nonce_voided":
            told.verdict = "not_committed"
            return
        if code == "outcome_unknown":
            told.unknown_txn_ids.append(response.headers["Transaction-Id"])
            if rng.random() < 0.5 and await look_up(apis, rng, told, steps=steps):
                return
            continue  # or decide it by repeating the same request
        if response.status_code in _REPEAT:
            if txn_id := response.headers.get("Transaction-Id"):
                told.not_written_txn_ids.append(txn_id)
            await asyncio.sleep(_PAUSE)
            continue
        told.verdict = f"wrong:{code}"  # idempotency_key_reused, nonce_expired: never right here
        return


async def look_up(apis: list[httpx.AsyncClient], rng: random.Random, told: Told, *, steps: int = 40) -> bool:
    """Decide an unknown outcome by the lookup: True once it answered 200 or 404."""
    for _ in range(steps):
        response = await rng.choice(apis).get(told.lookup_path, headers=_headers(told))
        code = "" if response.status_code == 200 else _code(response)
        told.answers.append((response.status_code, code))
        if response.status_code == 200:
            told.verdict, told.txn_id = "applied", response.json()["transaction_id"]
            return True
        if response.status_code == 404:
            told.verdict = "not_committed"
            return True
        await asyncio.sleep(_PAUSE)  # 409 outcome_pending, 429, 503: ask again after Retry-After
    return False


async def pay(
    apis: list[httpx.AsyncClient],
    rng: random.Random,
    wallet_id: str,
    amount: int,
    to_wallet_id: str | None,
    *,
    principal: str | None = None,
    redeliver: bool = False,
) -> list[Told]:
    """One payment: sent until decided, again with a new nonce only after a definite "did not commit".

    With ``redeliver``, a refused request is delivered once more later with the same nonce and
    body (a queue's redelivery): it must be refused the same way.
    """
    tolds = []
    for _ in range(3):
        told = Told(wallet_id, str(uuid.uuid4()), amount, to_wallet_id, principal)
        tolds.append(told)
        await send(apis, rng, told)
        if told.verdict != "not_committed":
            break
    last = tolds[-1]
    if redeliver and last.verdict == "refused":
        again = dataclasses.replace(
            last, verdict="undecided", answers=[], unknown_txn_ids=[], not_written_txn_ids=[]
        )
        await asyncio.sleep(_PAUSE)
        await send(apis, rng, again)
        tolds.append(again)
    return tolds
