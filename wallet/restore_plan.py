"""What a restored table needs to serve again without reusing a version the lake holds (pure).

A table restored from a backup (point-in-time recovery) stands at the restore point; the lake may
hold later entries, the writes acknowledged after it. Serving from the restored wallets as they
are would give the next write a version the lake already has (two entries at one version: every
night's ``mismatch`` and ``not_conserved``). So each wallet continues from the lake: its version
and balance set to the lake's latest entry, its ``updated_at`` to that entry's time or later (the
write path's ``updated_at < now`` condition keeps times increasing), and the gap (the versions the
table lost, their net amount) reported. A wallet the lake has and the table lacks (created after
the restore point) is created again from the lake. A wallet where the table is *ahead* of the lake
(entries the lake has not received: the old stream's) is reported and left, as is one whose
balance disagrees at an equal version: neither can be decided from the lake.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

CONTINUE: Final = "continue"
RECREATE: Final = "recreate"
AHEAD: Final = "table_ahead"
DISAGREE: Final = "disagree"


@dataclasses.dataclass(frozen=True, slots=True)
class TableWallet:
    """A wallet item as the restored table holds it."""

    wallet_id: str
    version: int
    balance: int
    updated_at_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class LakeWallet:
    """A wallet as the lake knows it: its latest entry (version 0: none yet)."""

    wallet_id: str
    user_id: str
    created_at_ms: int
    version: int
    balance: int
    last_entry_ms: int | None
    owner: str | None = None  # who owns it (None: a wallet of before owners)


@dataclasses.dataclass(frozen=True, slots=True)
class WalletStep:
    """One wallet's step: what to do, the state to set, and what the table lost."""

    wallet_id: str
    action: str
    version: int
    balance: int
    updated_at_ms: int
    lost_versions: tuple[int, int] | None = None  # first, last
    lost_amount: int = 0
    detail: str = ""


def plan_restore(table: Mapping[str, TableWallet], lake: Mapping[str, LakeWallet]) -> list[WalletStep]:
    """Every wallet's step, in wallet order; wallets the table and the lake agree on have none.

    Examples
    --------
    >>> t = {"w": TableWallet("w", 2, 30, 1_000)}
    >>> l = {"w": LakeWallet("w", "u", 500, 5, 80, 4_000)}
    >>> step, = plan_restore(t, l)
    >>> step.action, step.version, step.balance, step.updated_at_ms, step.lost_versions, step.lost_amount
    ('continue', 5, 80, 4000, (3, 5), 50)
    """
    steps: list[WalletStep] = []
    for wallet_id in sorted(set(table) | set(lake)):
        held, known = table.get(wallet_id), lake.get(wallet_id)
        if known is None:
            continue  # no entry the lake has: nothing can clash (the consumer will deliver it)
        since = known.last_entry_ms or known.created_at_ms
        if held is None:
            steps.append(
                WalletStep(
                    wallet_id,
                    RECREATE,
                    known.version,
                    known.balance,
                    since,
                    (1, known.version) if known.version else None,
                    known.balance,
                    "created after the restore point",
                )
            )
        elif known.version > held.version:
            steps.append(
                WalletStep(
                    wallet_id,
                    CONTINUE,
                    known.version,
                    known.balance,
                    max(held.updated_at_ms, since),
                    (held.version + 1, known.version),
                    known.balance - held.balance,
                )
            )
        elif known.version < held.version:
            steps.append(
                WalletStep(
                    wallet_id,
                    AHEAD,
                    held.version,
                    held.balance,
                    held.updated_at_ms,
                    detail=f"the table is at version {held.version}, the lake at {known.version}: the "
                    "entries between never reached the lake; let the old stream's consumer finish or "
                    "backfill them (docs/operations.md, section 4) before serving this wallet",
                )
            )
        elif known.balance != held.balance:
            steps.append(
                WalletStep(
                    wallet_id,
                    DISAGREE,
                    held.version,
                    held.balance,
                    held.updated_at_ms,
                    detail=f"version {held.version}: table balance {held.balance}, lake {known.balance}",
                )
            )
    return steps
