-- Per wallet, what the nightly reconciliation classifies: the opening (the day before's reconciled
-- close), the day's entries and close, the lake's integrity checks over the ledger from the day
-- through the snapshot's day (entry copies, version conflicts, amount/delta disagreements, chain
-- breaks where the running balance does not follow, version gaps) and the snapshot the lake is
-- compared with. Reads one partition of daily_balances, the ledger partitions from the day through
-- the snapshot's day, and one snapshot: cost follows a day or two of ledger plus the wallet count.
-- @param date           date       the day being reconciled
-- @param previous_date  date       the day before it (its daily_balances are the opening)
-- @param snapshot_date  date       dt of the snapshot compared with (the day itself or later)
-- @param snapshot_at    timestamp  snapshot_at of that snapshot
WITH opening AS (
    SELECT wallet_id, closing_version AS version, closing_balance AS balance
    FROM daily_balances
    WHERE dt = :previous_date
),
snapshot AS (
    SELECT wallet_id, version, balance, updated_at
    FROM balance_snapshots
    WHERE dt = :snapshot_date AND snapshot_at = :snapshot_at
),
observed AS (
    SELECT
        wallet_id, wallet_version, delta, balance_after, created_at,
        dt = :date AS in_day,
        CASE WHEN txn_type = 'deposit' THEN delta ELSE 0 END AS deposit_delta,
        amount <= 0 OR delta <> CASE WHEN direction = 'credit' THEN amount ELSE -amount END AS is_bad_amount,
        lag(wallet_version) OVER (PARTITION BY wallet_id ORDER BY wallet_version) AS previous_version,
        lag(balance_after) OVER (PARTITION BY wallet_id ORDER BY wallet_version) AS previous_balance_after,
        lag(balance_after - delta) OVER (PARTITION BY wallet_id ORDER BY wallet_version) AS previous_opening
    FROM ledger
    WHERE dt >= :date AND dt <= :snapshot_date
),
flagged AS (
    -- Rows sharing a version are copies when identical (a re-delivered entry: same delta, same
    -- balance after) and a conflict otherwise. Chain: a version's balance before it (balance_after
    -- minus delta) is the previous version's balance_after.
    SELECT
        *,
        coalesce(
            wallet_version = previous_version AND balance_after = previous_balance_after
            AND balance_after - delta = previous_opening,
            false
        ) AS is_copy,
        coalesce(
            wallet_version = previous_version AND NOT (
                balance_after = previous_balance_after AND balance_after - delta = previous_opening
            ),
            false
        ) AS is_conflict,
        coalesce(
            wallet_version = previous_version + 1 AND balance_after - delta <> previous_balance_after, false
        ) AS is_break,
        coalesce(wallet_version > previous_version + 1, false) AS is_gap
    FROM observed
),
at_snapshot AS (
    SELECT s.wallet_id, max(l.balance_after) AS balance
    FROM snapshot s
    JOIN ledger l ON l.wallet_id = s.wallet_id AND l.wallet_version = s.version
    WHERE l.dt >= :date AND l.dt <= :snapshot_date
    GROUP BY s.wallet_id
),
checks AS (
    SELECT
        wallet_id,
        count(*) AS observed_rows,
        count_if(in_day) AS day_rows,
        count_if(in_day AND NOT is_copy) AS day_entries,
        coalesce(sum(CASE WHEN in_day AND NOT is_copy THEN delta END), 0) AS day_net_delta,
        coalesce(sum(CASE WHEN in_day AND NOT is_copy THEN deposit_delta END), 0)
            AS day_deposits,
        max(CASE WHEN in_day THEN wallet_version END) AS day_last_version,
        max_by(balance_after, wallet_version) FILTER (WHERE in_day) AS day_last_balance,
        min(wallet_version) AS first_version,
        min_by(balance_after - delta, wallet_version) AS first_opening_balance,
        min_by(created_at, wallet_version) AS first_created_at,
        min(created_at) AS earliest_created_at,
        max(wallet_version) AS last_version,
        count_if(is_copy) AS copies,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_copy)), ',')
            AS copy_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_conflict)), ',') AS conflict_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_bad_amount)), ',') AS bad_amount_versions,
        array_join(array_sort(array_agg(wallet_version) FILTER (WHERE is_break)), ',') AS break_versions,
        min_by(previous_balance_after + delta, wallet_version) FILTER (WHERE is_break) AS first_break_expected,
        min_by(balance_after, wallet_version) FILTER (WHERE is_break) AS first_break_actual,
        array_join(array_sort(array_agg(previous_version + 1) FILTER (WHERE is_gap)), ',') AS gap_starts,
        array_join(array_sort(array_agg(wallet_version - 1) FILTER (WHERE is_gap)), ',') AS gap_ends,
        min(created_at) FILTER (WHERE is_gap) AS oldest_gap_bound
    FROM flagged
    GROUP BY wallet_id
),
known AS (
    SELECT
        coalesce(c.wallet_id, o.wallet_id) AS wallet_id,
        o.version AS opening_version,
        o.balance AS opening_balance,
        c.observed_rows, c.day_rows, c.day_entries, c.day_net_delta, c.day_deposits,
        c.day_last_version, c.day_last_balance, c.first_version, c.first_opening_balance,
        c.first_created_at, c.earliest_created_at, c.last_version,
        c.copies, c.copy_versions, c.conflict_versions, c.bad_amount_versions,
        c.break_versions, c.first_break_expected, c.first_break_actual, c.gap_starts, c.gap_ends, c.oldest_gap_bound
    FROM checks c
    FULL OUTER JOIN opening o ON o.wallet_id = c.wallet_id
)
SELECT
    coalesce(k.wallet_id, s.wallet_id) AS wallet_id,
    k.opening_version, k.opening_balance,
    k.observed_rows, k.day_rows, k.day_entries, k.day_net_delta, k.day_deposits,
    k.day_last_version, k.day_last_balance, k.first_version, k.first_opening_balance,
    k.first_created_at, k.earliest_created_at, k.last_version, a.balance AS balance_at_snapshot_version,
    k.copies, k.copy_versions, k.conflict_versions, k.bad_amount_versions,
    k.break_versions, k.first_break_expected, k.first_break_actual, k.gap_starts, k.gap_ends, k.oldest_gap_bound,
    s.version AS snapshot_version,
    s.balance AS snapshot_balance,
    s.updated_at AS snapshot_updated_at
FROM known k
FULL OUTER JOIN snapshot s ON s.wallet_id = k.wallet_id
LEFT JOIN at_snapshot a ON a.wallet_id = s.wallet_id
