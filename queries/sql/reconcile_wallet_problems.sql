-- The entries behind reconcile_wallets' non-zero counts, per wallet: the versions that are copies,
-- share a version with a different entry, disagree between amount and delta, or break the chain
-- (with the first break's expected and actual balance), and the gaps (first and last absent
-- version of each, with the oldest commit time bounding them). Reads what reconcile_wallets reads;
-- the nightly job asks it only on a day with something to explain.
-- @param date           date       the day being reconciled
-- @param previous_date  date       the day before it (its daily_balances are the opening)
-- @param snapshot_date  date       dt of the snapshot compared with (the day itself or later)
-- @param snapshot_at    timestamp  snapshot_at of that snapshot
WITH
-- @include movement_legs
-- @include reconcile_entries
problems AS (
    -- Only the flagged entries (none on a clean day) reach this aggregation.
    SELECT
        wallet_id,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_copy)), ',') AS copy_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_conflict)), ',') AS conflict_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_bad_amount)), ',') AS bad_amount_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_break)), ',') AS break_versions,
        min_by(previous_balance_after + delta, wallet_version) FILTER (WHERE is_break) AS first_break_expected,
        min_by(balance_after, wallet_version) FILTER (WHERE is_break) AS first_break_actual,
        array_join(array_sort(array_agg(previous_version + 1) FILTER (WHERE is_gap)), ',') AS gap_starts,
        array_join(array_sort(array_agg(wallet_version - 1) FILTER (WHERE is_gap)), ',') AS gap_ends,
        min(created_at) FILTER (WHERE is_gap) AS oldest_gap_bound
    FROM flagged
    WHERE is_copy OR is_conflict OR is_break OR is_gap OR is_bad_amount
    GROUP BY wallet_id
)
SELECT
    wallet_id, copy_versions, conflict_versions, bad_amount_versions, break_versions,
    first_break_expected, first_break_actual, gap_starts, gap_ends, oldest_gap_bound
FROM problems
ORDER BY wallet_id
