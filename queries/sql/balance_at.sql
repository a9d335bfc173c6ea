-- A wallet's balance at any instant, from the ledger itself: its last entry at or before the
-- instant, on that UTC day or any day before, whether or not a reconciled close exists. 0 (version
-- 0) before the wallet's first entry. It reads the wallet's whole history up to the day (cheap on
-- compacted days, whose files are sorted by wallet_id); balance_as_of reads two partitions when a
-- reconciled close covers the day before. balance is micro-USD, balance_usd USD.
-- No row when the lake has no such wallet by the instant, neither its creation nor an entry (a
-- mistyped id is not a balance of 0).
-- @empty no wallet :wallet_id in the lake by :at (wallets): check the id
-- @param wallet_id  string     the wallet
-- @param at         timestamp  ISO-8601 UTC
WITH last_entry AS (
    SELECT
        max(wallet_version) AS version,
        max_by(balance_after, wallet_version) AS balance,
        max(created_at) AS entry_at
    FROM ledger
    WHERE dt <= date_format(:at, '%Y-%m-%d')
      AND wallet_id = :wallet_id
      AND created_at <= :at
)
SELECT
    :wallet_id AS wallet_id,
    :at AS as_of,
    coalesce(balance, 0) AS balance,
    CAST(CAST(coalesce(balance, 0) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6))
        AS balance_usd,
    coalesce(version, 0) AS version,
    entry_at AS last_entry_at
FROM last_entry
WHERE version IS NOT NULL OR EXISTS (
    SELECT 1
    FROM wallets
    WHERE dt <= date_format(:at, '%Y-%m-%d')
      AND wallet_id = :wallet_id
      AND created_at <= :at
)
