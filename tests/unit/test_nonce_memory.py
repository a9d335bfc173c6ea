"""The process's memory of nonces: kept until the record's own expiry, bounded, one writer per nonce."""

from __future__ import annotations

import asyncio

import pytest

from wallet.nonce_memory import NonceMemory, Remembered
from wallet.receipts import Receipt


def _remembered(nonce: str, until: int) -> Remembered:
    return Remembered(Receipt("t-" + nonce, "deposit", "w", nonce, 5, None, 1_000), "hash-" + nonce, until)


def test_an_outcome_is_recalled_until_the_second_its_record_expires_and_then_forgotten() -> None:
    memory = NonceMemory()
    memory.remember("w_n", _remembered("n", until=200))
    assert memory.recall("w_n", 199) == _remembered("n", until=200)
    # the record's expires_at is the first second it counts as gone (wallet.receipts.alive)
    assert memory.recall("w_n", 200) is None
    assert len(memory) == 0
    assert memory.recall("w_n", 150) is None  # forgotten, not merely hidden


def test_the_oldest_outcome_is_forgotten_first_and_a_recalled_one_is_not_renewed() -> None:
    memory = NonceMemory(kept=2)
    memory.remember("a", _remembered("a", 100))
    memory.remember("b", _remembered("b", 100))
    assert memory.recall("a", 0) is not None
    memory.remember("c", _remembered("c", 100))
    assert [key for key in ("a", "b", "c") if memory.recall(key, 0)] == ["b", "c"]
    with pytest.raises(ValueError, match="at least 1"):
        NonceMemory(kept=0)


def test_a_nonce_has_one_writer_and_its_waiters_are_released_when_it_ends() -> None:
    async def scenario() -> list[str]:
        memory = NonceMemory()
        assert memory.in_flight("k") is None
        memory.begin("k")
        with pytest.raises(RuntimeError, match="already being written"):
            memory.begin("k")
        pending = memory.in_flight("k")
        assert pending is not None
        assert not pending.done()
        memory.end("k")
        memory.end("k")  # ending twice is harmless (a finally after a settled write)
        return ["done" if pending.done() else "waiting", "free" if memory.in_flight("k") is None else "held"]

    assert asyncio.run(scenario()) == ["done", "free"]
