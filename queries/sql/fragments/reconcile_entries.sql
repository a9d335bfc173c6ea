-- The entries reconciliation judges, each with its checks (included after WITH and movement_legs
-- by reconcile_wallets and reconcile_wallet_problems; it ends with a comma, so the including
-- query's own CTEs follow). is_external: the entry is money entering or leaving the system. Reads the ledger partitions from the day through the snapshot's day, one
-- partition of daily_balances and one snapshot: cost follows a day or two of ledger plus the
-- wallet count. The opening (the day before's reconciled close) and the snapshot join each
-- wallet's ledger rows as marker rows (kind 0 sorts before the wallet's entries, kind 2 after
-- them), so a single window pairs every entry with the one before it (the first with the opening).
marked AS (
    SELECT
        l.wallet_id, l.wallet_version, l.balance_after, l.delta, l.created_at, 1 AS kind,
        l.dt = :date AS in_day,
        coalesce(m.flow <> 0, false) AS is_external,
        l.amount <= 0 OR l.delta <> CASE WHEN l.direction = 'credit' THEN l.amount ELSE -l.amount END
            AS is_bad_amount
    FROM ledger l
    LEFT JOIN movement_legs m ON m.txn_type = l.txn_type AND m.direction = l.direction
    WHERE l.dt >= :date AND l.dt <= :snapshot_date
    UNION ALL
    SELECT
        wallet_id, closing_version, closing_balance, CAST(NULL AS bigint), CAST(NULL AS timestamp), 0,
        false, false, false
    FROM daily_balances
    WHERE dt = :previous_date
    UNION ALL
    SELECT wallet_id, version, balance, CAST(NULL AS bigint), updated_at, 2, false, false, false
    FROM balance_snapshots
    WHERE dt = :snapshot_date AND snapshot_at = :snapshot_at
),
paired AS (
    -- Before a wallet's first entry stands its opening (or version 0, balance 0 for a new wallet).
    SELECT
        *,
        lag(wallet_version, 1, 0) OVER (PARTITION BY wallet_id ORDER BY kind = 2, wallet_version, kind)
            AS previous_version,
        lag(balance_after, 1, 0) OVER (PARTITION BY wallet_id ORDER BY kind = 2, wallet_version, kind)
            AS previous_balance_after,
        lag(balance_after - delta) OVER (PARTITION BY wallet_id ORDER BY kind = 2, wallet_version, kind)
            AS previous_opening,
        -- Same partition and order as the lags (a full frame), so one sort serves every window.
        max(CASE WHEN kind = 2 THEN wallet_version END) OVER (
            PARTITION BY wallet_id ORDER BY kind = 2, wallet_version, kind
            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
        ) AS snapshot_version
    FROM marked
),
flagged AS (
    -- Entries sharing a version are copies when identical (a re-delivered entry: same delta, same
    -- balance after) and a conflict otherwise. Chain: an entry's balance before it (balance_after
    -- minus delta) is the previous version's balance_after.
    SELECT
        *,
        kind = 1 AND coalesce(
            wallet_version = previous_version AND balance_after = previous_balance_after
            AND balance_after - delta = previous_opening,
            false
        ) AS is_copy,
        kind = 1 AND coalesce(
            wallet_version = previous_version AND NOT (
                balance_after = previous_balance_after AND balance_after - delta = previous_opening
            ),
            false
        ) AS is_conflict,
        kind = 1 AND wallet_version = previous_version + 1 AND balance_after - delta <> previous_balance_after
            AS is_break,
        kind = 1 AND wallet_version > previous_version + 1 AS is_gap
    FROM paired
),
