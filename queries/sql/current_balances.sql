-- Every wallet's current balance from the lake: its latest ledger entry (the highest wallet_version,
-- copies counted once), 0 for a wallet with no entry yet. As current as the lake (a commit every
-- 30 s); DynamoDB holds the live figure. Reads the whole ledger (every dt): for the close of a
-- reconciled day, daily_balances is one small partition. balance is micro-USD, balance_usd USD.
WITH latest AS (
    SELECT
        wallet_id,
        max(wallet_version) AS version,
        max_by(balance_after, wallet_version) AS balance,
        max(created_at) AS last_entry_at
    FROM ledger
    WHERE dt >= '2020-01-01'
    GROUP BY wallet_id
)
SELECT
    w.wallet_id,
    w.user_id,
    w.owner,
    w.created_at,
    coalesce(l.balance, 0) AS balance,
    CAST(CAST(coalesce(l.balance, 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))
        AS balance_usd,
    coalesce(l.version, 0) AS version,
    l.last_entry_at
FROM wallets w
LEFT JOIN latest l ON l.wallet_id = w.wallet_id
WHERE w.dt >= '2020-01-01'
ORDER BY balance DESC, w.wallet_id
