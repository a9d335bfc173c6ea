-- Per wallet, what the nightly reconciliation classifies: the opening (the day before's reconciled
-- close), the day's entries and close, the lake's integrity checks over the ledger from the day
-- through the snapshot's day (entry copies, version conflicts, amount/delta disagreements, chain
-- breaks where the running balance does not follow, version gaps) and the snapshot the lake is
-- compared with. Reads one partition of daily_balances, the ledger partitions from the day through
-- the snapshot's day, and one snapshot: cost follows a day or two of ledger plus the wallet count.
-- One pass: the opening and the snapshot join each wallet's ledger rows as marker rows (kind 0 sorts
-- before the wallet's entries, kind 2 after them), so a single window pairs every entry with the
-- one before it (the first with the opening) and one aggregation gives each wallet's row; the
-- details of problems (versions named) are aggregated from the flagged entries alone.
-- @param date           date       the day being reconciled
-- @param previous_date  date       the day before it (its daily_balances are the opening)
-- @param snapshot_date  date       dt of the snapshot compared with (the day itself or later)
-- @param snapshot_at    timestamp  snapshot_at of that snapshot
WITH marked AS (
    SELECT
        wallet_id, wallet_version, balance_after, delta, created_at, 1 AS kind,
        dt = :date AS in_day,
        txn_type = 'deposit' AS is_deposit,
        amount <= 0 OR delta <> CASE WHEN direction = 'credit' THEN amount ELSE -amount END AS is_bad_amount
    FROM ledger
    WHERE dt >= :date AND dt <= :snapshot_date
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
),
per_wallet AS (
    SELECT
        wallet_id,
        max(wallet_version) FILTER (WHERE kind = 0) AS opening_version,
        max(balance_after) FILTER (WHERE kind = 0) AS opening_balance,
        count_if(kind = 1) AS observed_rows,
        count_if(in_day) AS day_rows,
        count_if(in_day AND NOT is_copy) AS day_entries,
        coalesce(sum(delta) FILTER (WHERE in_day AND NOT is_copy), 0) AS day_net_delta,
        coalesce(sum(delta) FILTER (WHERE in_day AND NOT is_copy AND is_deposit), 0) AS day_deposits,
        max(wallet_version) FILTER (WHERE in_day) AS day_last_version,
        max_by(balance_after, wallet_version) FILTER (WHERE in_day) AS day_last_balance,
        min(wallet_version) FILTER (WHERE kind = 1) AS first_version,
        min(created_at) FILTER (WHERE kind = 1) AS earliest_created_at,
        max(wallet_version) FILTER (WHERE kind = 1) AS last_version,
        max(balance_after) FILTER (WHERE kind = 1 AND wallet_version = snapshot_version)
            AS balance_at_snapshot_version,
        count_if(is_copy) AS copies,
        max(wallet_version) FILTER (WHERE kind = 2) AS snapshot_version,
        max(balance_after) FILTER (WHERE kind = 2) AS snapshot_balance,
        max(created_at) FILTER (WHERE kind = 2) AS snapshot_updated_at
    FROM flagged
    GROUP BY wallet_id
)
SELECT
    w.wallet_id, w.opening_version, w.opening_balance, w.observed_rows, w.day_rows, w.day_entries,
    w.day_net_delta, w.day_deposits, w.day_last_version, w.day_last_balance, w.first_version,
    w.earliest_created_at, w.last_version, w.balance_at_snapshot_version, w.copies,
    p.copy_versions, p.conflict_versions, p.bad_amount_versions, p.break_versions,
    p.first_break_expected, p.first_break_actual, p.gap_starts, p.gap_ends, p.oldest_gap_bound,
    w.snapshot_version, w.snapshot_balance, w.snapshot_updated_at
FROM per_wallet w
LEFT JOIN problems p ON p.wallet_id = w.wallet_id
