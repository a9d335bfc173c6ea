"""A restored table's plan (pure): each wallet continues from the lake, never reusing a version."""

from __future__ import annotations

from wallet.restore_plan import AHEAD, CONTINUE, DISAGREE, RECREATE, LakeWallet, TableWallet, plan_restore


def lake(wallet: str, version: int, balance: int, last: int | None = 9_000) -> LakeWallet:
    return LakeWallet(wallet, f"user-{wallet}", 1_000, version, balance, last)


def test_each_wallet_gets_the_step_the_lake_and_the_table_call_for() -> None:
    # GIVEN a table restored to an earlier point, and the lake's record of every wallet since
    table = {
        "behind": TableWallet("behind", 2, 30, 5_000),
        "same": TableWallet("same", 4, 10, 5_000),
        "ahead": TableWallet("ahead", 6, 60, 5_000),
        "odd": TableWallet("odd", 3, 31, 5_000),
        "unseen": TableWallet("unseen", 0, 0, 5_000),
    }
    known = {
        "behind": lake("behind", 5, 80),
        "same": lake("same", 4, 10),
        "ahead": lake("ahead", 5, 50),
        "odd": lake("odd", 3, 30),
        "new": lake("new", 2, 7, last=12_000),
    }
    # WHEN planned
    steps = {step.wallet_id: step for step in plan_restore(table, known)}
    # THEN the wallet behind continues at the lake's version with its lost span and amount, and an
    # updated_at no earlier than the lake's last entry
    behind = steps["behind"]
    assert (behind.action, behind.version, behind.balance) == (CONTINUE, 5, 80)
    assert (behind.lost_versions, behind.lost_amount, behind.updated_at_ms) == ((3, 5), 50, 9_000)
    # AND the wallet created after the restore point is created again at the lake's state
    assert (steps["new"].action, steps["new"].version, steps["new"].balance) == (RECREATE, 2, 7)
    # AND what the lake cannot decide is reported, not changed; agreement and no history need nothing
    assert steps["ahead"].action == AHEAD
    assert "version 6, the lake at 5" in steps["ahead"].detail
    assert steps["odd"].action == DISAGREE
    assert "table balance 31, lake 30" in steps["odd"].detail
    assert set(steps) == {"behind", "new", "ahead", "odd"}


def test_a_continued_wallet_keeps_a_later_updated_at_of_its_own() -> None:
    (step,) = plan_restore({"w": TableWallet("w", 1, 5, 20_000)}, {"w": lake("w", 2, 9, last=10_000)})
    assert step.updated_at_ms == 20_000


def test_a_wallet_created_again_keeps_its_owner_version_and_balance() -> None:
    # GIVEN a wallet the lake knows, owned by a person, created after the restore point
    from contracts.wallets_table import Attr
    from walletlake.restore import _recreate_request

    known = LakeWallet("w", "user-w", 1_000, 3, 70, 9_000, owner="arn:aws:sts::1:assumed-role/app/alice")
    (step,) = plan_restore({}, {"w": known})
    # WHEN its creation is written as the write path writes one
    request = _recreate_request("wallets", step, known)
    claim, wallet = (put["Put"]["Item"] for put in request["TransactItems"])
    # THEN the wallet item names its owner (who may move it), at the lake's version and balance
    assert wallet[Attr.OWNER] == {"S": "arn:aws:sts::1:assumed-role/app/alice"}
    assert (wallet[Attr.VERSION], wallet[Attr.BALANCE], wallet[Attr.UPDATED_AT]) == (
        {"N": "3"},
        {"N": "70"},
        {"N": "9000"},
    )
    assert claim[Attr.WALLET_ID] == {"S": "w"}
