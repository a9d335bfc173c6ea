"""The ledger arithmetic of one request: what each touched wallet becomes, and when.

Pure: given the wallets as read (strongly consistent) and the clock, :func:`post` computes the new
balances and versions and the transaction's timestamps, or refuses for money reasons. The store
(:mod:`wallet.store`) then writes exactly this with compare-and-swap conditions, so what the
transaction item records (``wallet_balance_after``...) is by construction what the wallet holds.
"""

from __future__ import annotations

import dataclasses

from wallet.commands import Deposit, Movement
from wallet.errors import BalanceLimitExceededError, InsufficientFundsError
from wallet.validation import MAX_BALANCE


@dataclasses.dataclass(frozen=True, slots=True)
class WalletState:
    """A wallet item as read: the compare-and-swap base of the next write."""

    wallet_id: str
    balance: int
    version: int
    updated_at: int


@dataclasses.dataclass(frozen=True, slots=True)
class WalletChange:
    """One wallet's move from ``read_version`` to ``version = read_version + 1``."""

    wallet_id: str
    read_version: int
    version: int
    balance: int


@dataclasses.dataclass(frozen=True, slots=True)
class Posting:
    """Everything one TransactWriteItems writes for a deposit or a transfer.

    ``wallet`` is the addressed wallet (the credited one of a deposit, the payer of a transfer);
    ``to_wallet`` is a transfer's payee.
    """

    command: Movement
    txn_id: str
    request_hash: str
    created_at: int
    expires_at: int
    wallet: WalletChange
    to_wallet: WalletChange | None


def transaction_time(now_ms: int, *touched: WalletState) -> int:
    """``max(now, updated_at of every touched wallet)``, in epoch milliseconds.

    A server whose clock lags another's must not stamp a later version of a wallet with an earlier
    time: per wallet, ``created_at`` never decreases as ``version`` increases, which keeps the lake's
    UTC-day partitions consistent with version order.

    Examples
    --------
    >>> transaction_time(1_000, WalletState("w", 0, 3, 1_500))
    1500
    """
    return max(now_ms, *(state.updated_at for state in touched))


def post(
    command: Movement,
    wallet: WalletState,
    to_wallet: WalletState | None,
    *,
    now_ms: int,
    hot_ttl_seconds: int,
    txn_id: str,
    request_hash: str,
) -> Posting:
    """Apply ``command`` to the wallets as read, or refuse it for money reasons.

    Raises
    ------
    InsufficientFundsError
        A transfer larger than the payer's balance.
    BalanceLimitExceededError
        A credit that would lift a balance above 9 x 10^18.
    """
    created_at = transaction_time(now_ms, wallet, *((to_wallet,) if to_wallet else ()))
    if isinstance(command, Deposit):
        change = _change(wallet, wallet.balance + command.amount)
        to_change = None
    else:
        if to_wallet is None:
            raise ValueError("a transfer needs the payee's state")
        if wallet.balance < command.amount:
            raise InsufficientFundsError(wallet.wallet_id)
        change = _change(wallet, wallet.balance - command.amount)
        to_change = _change(to_wallet, to_wallet.balance + command.amount)
    return Posting(
        command=command,
        txn_id=txn_id,
        request_hash=request_hash,
        created_at=created_at,
        expires_at=created_at // 1000 + hot_ttl_seconds,
        wallet=change,
        to_wallet=to_change,
    )


def _change(state: WalletState, balance: int) -> WalletChange:
    if balance > MAX_BALANCE:
        raise BalanceLimitExceededError(state.wallet_id)
    return WalletChange(
        wallet_id=state.wallet_id, read_version=state.version, version=state.version + 1, balance=balance
    )
