-- The wallets a user owns (one per user in this system), from user_id: when each was created and
-- its balance now, from its latest ledger entry (0 before its first). The wallets table is one
-- small row per wallet, so it is read whole (every dt); the ledger only for these wallets.
-- balance is micro-USD, balance_usd the same amount in USD (exact decimal).
-- @empty no wallet of user :user_id in the lake (wallets): check the id
-- @param user_id  string  the user (the user_id the API was given)
WITH owned AS (
    SELECT wallet_id, user_id, created_at, dt AS created_day
    FROM wallets
    WHERE dt >= '2020-01-01'
      AND user_id = :user_id
),
latest AS (
    SELECT wallet_id, max(wallet_version) AS version, max_by(balance_after, wallet_version) AS balance
    FROM ledger
    WHERE dt >= '2020-01-01'
      AND wallet_id IN (SELECT wallet_id FROM owned)
    GROUP BY wallet_id
)
SELECT
    o.user_id,
    o.wallet_id,
    o.created_at,
    coalesce(l.balance, 0) AS balance,
    CAST(CAST(coalesce(l.balance, 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))
        AS balance_usd,
    coalesce(l.version, 0) AS version
FROM owned o
LEFT JOIN latest l ON l.wallet_id = o.wallet_id
ORDER BY o.created_at, o.wallet_id
