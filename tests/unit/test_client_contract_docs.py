"""The README's client contract names every answer the write path gives, and a nonce that never repeats."""

from __future__ import annotations

import re
from pathlib import Path

from wallet.errors import WalletError
from wallet.http_errors import ERROR_STATUS

ROOT = Path(__file__).resolve().parents[2]


def _contract() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("### The client's contract") : readme.index("**Both spellings.**")]


def _codes(error: type[WalletError]) -> set[str]:
    found = {error.code}
    for sub in error.__subclasses__():
        found |= _codes(sub)
    return found


def test_every_answer_a_client_can_get_is_in_the_contract_table() -> None:
    table = _contract()
    answered = set().union(*(_codes(error) for error in ERROR_STATUS)) - {"wallet_error", "not_implemented"}
    named = set(re.findall(r"`([a-z_]+)`", table))
    assert answered - named == set()
    # and each of the answers the issue names has its next step
    for code in ("outcome_unknown", "outcome_pending", "nonce_voided", "nonce_expired", "insufficient_funds"):
        row = next(line for line in table.splitlines() if f"`{code}`" in line and line.startswith("|"))
        assert row.count("|") == 4, row


def test_the_recommended_nonce_is_a_uuid_not_a_clock() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "UUID (v4 or v7)" in _contract()
    assert "works)" not in readme  # the old "milliseconds since midnight ... works" advice is gone
