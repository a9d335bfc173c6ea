-- A wallet's ledger entries between two instants, oldest first, with the running balance.
-- running_balance starts from the balance before the first entry shown and adds each delta;
-- balance_after is what the table recorded at that version, so the two agree on a healthy lake.
-- Copies of an entry (possible before compaction) are shown once. Amounts are micro-USD;
-- amount_usd and balance_after_usd the same in USD (exact decimals).
-- @param wallet_id  string     the wallet
-- @param start      timestamp  ISO-8601 UTC, inclusive
-- @param end        timestamp  ISO-8601 UTC, exclusive
WITH entries AS (
    SELECT
        created_at, wallet_version, txn_id, txn_type, direction, counterparty_wallet_id,
        amount, delta, balance_after,
        row_number() OVER (PARTITION BY entry_id ORDER BY ingested_at, stream_sequence) AS copy
    FROM ledger
    WHERE dt BETWEEN date_format(:start, '%Y-%m-%d') AND date_format(:end, '%Y-%m-%d')
      AND wallet_id = :wallet_id
      AND created_at >= :start
      AND created_at < :end
)
SELECT
    created_at,
    wallet_version,
    txn_id,
    txn_type,
    direction,
    counterparty_wallet_id,
    amount,
    delta,
    first_value(balance_after - delta) OVER (ORDER BY wallet_version)
        + sum(delta) OVER (ORDER BY wallet_version ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        AS running_balance,
    balance_after,
    CAST(CAST(amount AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS amount_usd,
    CAST(CAST(balance_after AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS balance_after_usd
FROM entries
WHERE copy = 1
ORDER BY wallet_version
