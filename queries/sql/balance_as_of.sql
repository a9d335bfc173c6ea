-- A wallet's balance at an instant, from the lake: the wallet's last ledger entry of that UTC day at
-- or before the instant, else the reconciled close of the day before (daily_balances, which the
-- nightly reconciliation derives from the ledger). It reads one partition of each, however old the
-- wallet. source says which answered; it is null (and balance too) when the wallet has no entry
-- that day and the day before has no reconciled close for it: balance_at then reads the ledger
-- itself. balance is micro-USD, balance_usd the same amount in USD (exact decimal).
-- @param wallet_id  string     the wallet
-- @param at         timestamp  ISO-8601 UTC
WITH day_entries AS (
    SELECT wallet_version, balance_after
    FROM ledger
    WHERE dt = date_format(:at, '%Y-%m-%d')
      AND wallet_id = :wallet_id
      AND created_at <= :at
),
last_entry AS (
    SELECT max(wallet_version) AS version, max_by(balance_after, wallet_version) AS balance
    FROM day_entries
),
previous_close AS (
    SELECT max(closing_version) AS version, max_by(closing_balance, closing_version) AS balance
    FROM daily_balances
    WHERE dt = date_format(date_add('day', -1, :at), '%Y-%m-%d')
      AND wallet_id = :wallet_id
)
SELECT
    :wallet_id AS wallet_id,
    :at AS as_of,
    coalesce(e.balance, c.balance) AS balance,
    CAST(CAST(coalesce(e.balance, c.balance) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS balance_usd,
    coalesce(e.version, c.version) AS version,
    CASE
        WHEN e.version IS NOT NULL THEN 'ledger'
        WHEN c.version IS NOT NULL THEN 'daily_balances'
    END AS source
FROM last_entry e
CROSS JOIN previous_close c
