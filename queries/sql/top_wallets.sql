-- Wallets ranked by the money they moved (credits plus debits) over a range of UTC days. Amounts
-- are micro-USD; total_usd and net_usd the same in USD (exact decimals).
-- @param start_date  date     first day, inclusive
-- @param end_date    date     last day, inclusive
-- @param limit       count    how many wallets
WITH entries AS (
    SELECT
        wallet_id, direction, amount, delta,
        row_number() OVER (PARTITION BY entry_id ORDER BY ingested_at, stream_sequence) AS copy
    FROM ledger
    WHERE dt BETWEEN :start_date AND :end_date
)
SELECT
    wallet_id,
    count(*) AS entries,
    sum(amount) AS total_amount,
    coalesce(sum(CASE WHEN direction = 'credit' THEN amount END), 0) AS credit_amount,
    coalesce(sum(CASE WHEN direction = 'debit' THEN amount END), 0) AS debit_amount,
    sum(delta) AS net_amount,
    CAST(CAST(sum(amount) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS total_usd,
    CAST(CAST(sum(delta) AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(7, 6)) AS DECIMAL(38, 6)) AS net_usd
FROM entries
WHERE copy = 1
GROUP BY wallet_id
ORDER BY total_amount DESC, wallet_id
LIMIT :limit
