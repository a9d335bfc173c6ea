-- One wallet's ledger rows in version order, checked the way reconciliation checks them. One row
-- per ledger row: day, wallet_version, entry_id, txn_id, txn_type, direction, delta, balance_after,
-- created_at, running_balance (balance before the window's first row plus the running sum of
-- delta), chain_ok (running_balance = balance_after), copies (rows with this version; more than 1
-- is a duplicate), gap_before (versions missing just before this one). The first row anchors the
-- running balance, so the window may start mid-history. Sums are cast to bigint (Trino's sum of
-- bigint is bigint; DuckDB's would be 128-bit).
-- @param wallet_id   string  the wallet
-- @param start_date  date    first day (dt), inclusive
-- @param end_date    date    last day (dt), inclusive
WITH rows_in_window AS (
    SELECT dt, wallet_version, entry_id, txn_id, txn_type, direction, delta, balance_after, created_at
    FROM ledger
    WHERE dt BETWEEN :start_date AND :end_date
      AND wallet_id = :wallet_id
),
ordered AS (
    SELECT
        *,
        count(*) OVER (PARTITION BY wallet_version) AS copies,
        lag(wallet_version) OVER (ORDER BY wallet_version, entry_id) AS previous_version,
        first_value(balance_after - delta) OVER (
            ORDER BY wallet_version, entry_id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
        ) AS opening_balance,
        CAST(sum(delta) OVER (
            ORDER BY wallet_version, entry_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS bigint) AS running_delta
    FROM rows_in_window
)
SELECT
    dt AS day,
    wallet_version,
    entry_id,
    txn_id,
    txn_type,
    direction,
    delta,
    balance_after,
    created_at,
    opening_balance + running_delta AS running_balance,
    opening_balance + running_delta = balance_after AS chain_ok,
    copies,
    greatest(coalesce(wallet_version - previous_version - 1, 0), 0) AS gap_before
FROM ordered
ORDER BY wallet_version, entry_id
