"""Driving a :class:`wallet.store.WalletStore` directly in stack tests: wallets, and outcomes as values.

The group-commit tests start many requests at once on one store and compare what each got, so
every one of them needs the same two things: fresh wallets, and each call's outcome in a form an
``==`` can check ("applied", "replayed", or the exception raised).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

from wallet.commands import CreateWallet
from wallet.receipts import Receipt
from wallet.store import WalletStore


async def create_wallets(store: WalletStore, count: int) -> list[str]:
    """``count`` new wallets opened through ``store`` (one user each), in order."""
    return [(await store.create_wallet(CreateWallet(str(uuid.uuid4()))))[0] for _ in range(count)]


def outcome(result: object) -> object:
    """``"applied"`` or ``"replayed"`` for a receipt; an exception as it is."""
    if isinstance(result, Receipt):
        return "replayed" if result.replayed else "applied"
    return result


async def settled(*calls: Awaitable[Receipt]) -> list[Any]:
    """Each call's :func:`outcome`, all started before any is sent."""
    return [outcome(each) for each in await asyncio.gather(*calls, return_exceptions=True)]
