-- Wallets by balance, bucketed by powers of ten of USD, from each wallet's latest balance snapshot
-- taken in a range of days. One row per bucket, in order: bucket_order, bucket (label), wallets,
-- total_balance (micro-USD), snapshot_at (the newest snapshot counted). Buckets compare integer
-- micro-USD, so every wallet lands in exactly one.
-- @param start_date  date  first snapshot day (dt), inclusive
-- @param end_date    date  last snapshot day (dt), inclusive
WITH latest AS (
    SELECT
        wallet_id,
        balance,
        snapshot_at,
        row_number() OVER (PARTITION BY wallet_id ORDER BY snapshot_at DESC) AS recency
    FROM balance_snapshots
    WHERE dt BETWEEN :start_date AND :end_date
),
bucketed AS (
    SELECT
        CASE
            WHEN balance = 0 THEN 0
            WHEN balance < 1000000 THEN 1
            WHEN balance < 10000000 THEN 2
            WHEN balance < 100000000 THEN 3
            WHEN balance < 1000000000 THEN 4
            WHEN balance < 10000000000 THEN 5
            ELSE 6
        END AS bucket_order,
        balance,
        snapshot_at
    FROM latest
    WHERE recency = 1
)
SELECT
    bucket_order,
    CASE bucket_order
        WHEN 0 THEN '0'
        WHEN 1 THEN 'under 1 USD'
        WHEN 2 THEN '1 to 10 USD'
        WHEN 3 THEN '10 to 100 USD'
        WHEN 4 THEN '100 to 1k USD'
        WHEN 5 THEN '1k to 10k USD'
        ELSE '10k USD and more'
    END AS bucket,
    count(*) AS wallets,
    CAST(sum(balance) AS bigint) AS total_balance,
    max(snapshot_at) AS snapshot_at
FROM bucketed
GROUP BY bucket_order
ORDER BY bucket_order
