-- Per UTC day and principal: the movements each caller initiated (initiated_by, the IAM
-- principal the API's front verified), how many and how much: money brought in, money taken out,
-- movements between wallets (which legs are which is movement_legs', made from
-- contracts.movement_types; a movement between wallets counts once, its debit leg). Amounts are
-- micro-USD, amount_usd the same in USD (exact decimals). Rows written before attribution existed
-- have no principal: they are grouped under '(unattributed)'.
-- @param start_date  date  first day, inclusive
-- @param end_date    date  last day, inclusive
WITH
-- @include movement_legs
entries AS (
    SELECT
        l.dt, l.initiated_by, l.direction, l.wallet_id, l.amount, m.flow,
        row_number() OVER (PARTITION BY l.entry_id ORDER BY l.ingested_at, l.stream_sequence) AS copy
    FROM ledger l
    LEFT JOIN movement_legs m ON m.txn_type = l.txn_type AND m.direction = l.direction
    WHERE l.dt BETWEEN :start_date AND :end_date
)
SELECT
    dt AS day,
    coalesce(initiated_by, '(unattributed)') AS initiated_by,
    count_if(flow = 1) AS money_in_movements,
    count_if(flow = -1) AS money_out_movements,
    count_if(flow = 0 AND direction = 'debit') AS transfers,
    coalesce(sum(CASE WHEN flow <> 0 OR direction = 'debit' THEN amount END), 0) AS amount,
    count(DISTINCT wallet_id) AS wallets,
    CAST(CAST(coalesce(sum(CASE WHEN flow <> 0 OR direction = 'debit' THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS amount_usd
FROM entries
WHERE copy = 1
GROUP BY dt, coalesce(initiated_by, '(unattributed)')
ORDER BY dt, amount DESC, initiated_by
