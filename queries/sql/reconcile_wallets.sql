-- Per wallet, what the nightly reconciliation classifies: the opening (the day before's reconciled
-- close), the day's entries and close, how many entries fail each integrity check (copies, version
-- conflicts, amount/delta disagreements, chain breaks, gaps) and the snapshot compared with. Which
-- versions fail is reconcile_wallet_problems' answer, asked only when a count here is not zero.
-- @param date           date       the day being reconciled
-- @param previous_date  date       the day before it (its daily_balances are the opening)
-- @param snapshot_date  date       dt of the snapshot compared with (the day itself or later)
-- @param snapshot_at    timestamp  snapshot_at of that snapshot
WITH
-- @include movement_legs
-- @include reconcile_entries
per_wallet AS (
    SELECT
        wallet_id,
        max(wallet_version) FILTER (WHERE kind = 0) AS opening_version,
        max(balance_after) FILTER (WHERE kind = 0) AS opening_balance,
        count_if(kind = 1) AS observed_rows,
        count_if(in_day) AS day_rows,
        count_if(in_day AND NOT is_copy) AS day_entries,
        coalesce(sum(delta) FILTER (WHERE in_day AND NOT is_copy), 0) AS day_net_delta,
        coalesce(sum(delta) FILTER (WHERE in_day AND NOT is_copy AND is_external), 0) AS day_external_net,
        max(wallet_version) FILTER (WHERE in_day) AS day_last_version,
        max_by(balance_after, wallet_version) FILTER (WHERE in_day) AS day_last_balance,
        min(wallet_version) FILTER (WHERE kind = 1) AS first_version,
        min(created_at) FILTER (WHERE kind = 1) AS earliest_created_at,
        max(wallet_version) FILTER (WHERE kind = 1) AS last_version,
        max(balance_after) FILTER (WHERE kind = 1 AND wallet_version = snapshot_version)
            AS balance_at_snapshot_version,
        count_if(is_copy) AS copies,
        count_if(is_conflict) AS conflicts,
        count_if(is_bad_amount) AS bad_amounts,
        count_if(is_break) AS breaks,
        count_if(is_gap) AS gaps,
        max(wallet_version) FILTER (WHERE kind = 2) AS snapshot_version,
        max(balance_after) FILTER (WHERE kind = 2) AS snapshot_balance,
        max(created_at) FILTER (WHERE kind = 2) AS snapshot_updated_at
    FROM flagged
    GROUP BY wallet_id
)
SELECT
    wallet_id, opening_version, opening_balance, observed_rows, day_rows, day_entries, day_net_delta,
    day_external_net, day_last_version, day_last_balance, first_version, earliest_created_at, last_version,
    balance_at_snapshot_version, copies, conflicts, bad_amounts, breaks, gaps, snapshot_version,
    snapshot_balance, snapshot_updated_at
FROM per_wallet
