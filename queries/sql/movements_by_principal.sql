-- Per UTC day and principal: the movements each caller initiated (initiated_by, the IAM
-- principal the API's front verified), how many and how much. A transfer counts once (its debit
-- leg); amounts are micro-USD, amount_usd the same in USD (exact decimals). Rows written before
-- attribution existed have no principal: they are grouped under '(unattributed)'.
-- @param start_date  date  first day, inclusive
-- @param end_date    date  last day, inclusive
WITH entries AS (
    SELECT
        dt, initiated_by, txn_type, direction, wallet_id, amount,
        row_number() OVER (PARTITION BY entry_id ORDER BY ingested_at, stream_sequence) AS copy
    FROM ledger
    WHERE dt BETWEEN :start_date AND :end_date
)
SELECT
    dt AS day,
    coalesce(initiated_by, '(unattributed)') AS initiated_by,
    count_if(txn_type = 'deposit') AS deposits,
    count_if(txn_type = 'transfer' AND direction = 'debit') AS transfers,
    coalesce(sum(CASE WHEN txn_type = 'deposit' OR direction = 'debit' THEN amount END), 0) AS amount,
    count(DISTINCT wallet_id) AS wallets,
    CAST(CAST(coalesce(sum(CASE WHEN txn_type = 'deposit' OR direction = 'debit' THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS amount_usd
FROM entries
WHERE copy = 1
GROUP BY dt, coalesce(initiated_by, '(unattributed)')
ORDER BY dt, amount DESC, initiated_by
