-- Per UTC day: deposits and transfers (how many, how much) and how many wallets moved money.
-- A transfer counts once (its debit leg); amounts are micro-USD, the *_usd columns the same in USD
-- (exact decimals).
-- @param start_date  date  first day, inclusive
-- @param end_date    date  last day, inclusive
WITH entries AS (
    SELECT
        dt, wallet_id, txn_type, direction, amount,
        row_number() OVER (PARTITION BY entry_id ORDER BY ingested_at, stream_sequence) AS copy
    FROM ledger
    WHERE dt BETWEEN :start_date AND :end_date
)
SELECT
    dt AS day,
    count_if(txn_type = 'deposit') AS deposits,
    coalesce(sum(CASE WHEN txn_type = 'deposit' THEN amount END), 0) AS deposit_amount,
    count_if(txn_type = 'transfer' AND direction = 'debit') AS transfers,
    coalesce(sum(CASE WHEN txn_type = 'transfer' AND direction = 'debit' THEN amount END), 0)
        AS transfer_amount,
    count(DISTINCT wallet_id) AS active_wallets,
    CAST(CAST(coalesce(sum(CASE WHEN txn_type = 'deposit' THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS deposit_usd,
    CAST(CAST(coalesce(sum(CASE WHEN txn_type = 'transfer' AND direction = 'debit' THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))
        AS transfer_usd
FROM entries
WHERE copy = 1
GROUP BY dt
ORDER BY dt
