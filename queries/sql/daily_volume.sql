-- Per UTC day: the money that entered the system, the money that left it, and the movements
-- between wallets (how many, how much), and how many wallets moved money. Which legs are which
-- is movement_legs' (made from contracts.movement_types): a movement between wallets counts once
-- (its debit leg). Amounts are micro-USD, the *_usd columns the same in USD (exact decimals).
-- @param start_date  date  first day, inclusive
-- @param end_date    date  last day, inclusive
WITH
-- @include movement_legs
entries AS (
    SELECT
        l.dt, l.wallet_id, l.direction, l.amount, m.flow,
        row_number() OVER (PARTITION BY l.entry_id ORDER BY l.ingested_at, l.stream_sequence) AS copy
    FROM ledger l
    LEFT JOIN movement_legs m ON m.txn_type = l.txn_type AND m.direction = l.direction
    WHERE l.dt BETWEEN :start_date AND :end_date
)
SELECT
    dt AS day,
    count_if(flow = 1) AS money_in_movements,
    coalesce(sum(CASE WHEN flow = 1 THEN amount END), 0) AS money_in,
    count_if(flow = -1) AS money_out_movements,
    coalesce(sum(CASE WHEN flow = -1 THEN amount END), 0) AS money_out,
    count_if(flow = 0 AND direction = 'debit') AS transfers,
    coalesce(sum(CASE WHEN flow = 0 AND direction = 'debit' THEN amount END), 0) AS transfer_amount,
    count(DISTINCT wallet_id) AS active_wallets,
    CAST(CAST(coalesce(sum(CASE WHEN flow = 1 THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS money_in_usd,
    CAST(CAST(coalesce(sum(CASE WHEN flow = -1 THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS money_out_usd,
    CAST(CAST(coalesce(sum(CASE WHEN flow = 0 AND direction = 'debit' THEN amount END), 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))
        AS transfer_usd
FROM entries
WHERE copy = 1
GROUP BY dt
ORDER BY dt
