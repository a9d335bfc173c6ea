-- Transfers of one UTC day whose legs do not cancel out: a leg missing or doubled with different
-- values, or a debit and a credit of different sizes. Copies of a leg (possible before
-- compaction) are not counted twice. Reads one ledger partition.
-- @param date  date  the day
SELECT
    txn_id,
    max(CASE WHEN direction = 'debit' THEN wallet_id END) AS debit_wallet_id,
    max(CASE WHEN direction = 'debit' THEN wallet_version END) AS debit_version,
    max(CASE WHEN direction = 'debit' THEN delta END) AS debit_delta,
    max(CASE WHEN direction = 'credit' THEN wallet_id END) AS credit_wallet_id,
    max(CASE WHEN direction = 'credit' THEN wallet_version END) AS credit_version,
    max(CASE WHEN direction = 'credit' THEN delta END) AS credit_delta
FROM ledger
WHERE dt = :date AND txn_type = 'transfer'
GROUP BY txn_id
HAVING count_if(direction = 'debit') = 0
    OR count_if(direction = 'credit') = 0
    OR max(CASE WHEN direction = 'debit' THEN delta END) <> min(CASE WHEN direction = 'debit' THEN delta END)
    OR max(CASE WHEN direction = 'credit' THEN delta END) <> min(CASE WHEN direction = 'credit' THEN delta END)
    OR max(CASE WHEN direction = 'debit' THEN delta END) + max(CASE WHEN direction = 'credit' THEN delta END) <> 0
ORDER BY txn_id
