-- Transfers (movements between two wallets: the types movement_legs, made from
-- contracts.movement_types, gives flow 0) of one UTC day whose legs do not cancel out: a debit and a
-- credit of different sizes, or a leg without its other half. A transfer landed twice whole (possible before compaction) is
-- not one. Reads one ledger partition: a first pass keeps the transfers whose rows do not sum to
-- zero in exactly two rows (none on a clean day), the second looks only at those.
-- @param date  date  the day
WITH
-- @include movement_legs
transfer_types AS (
    SELECT DISTINCT txn_type FROM movement_legs WHERE flow = 0
),
candidates AS (
    SELECT txn_id
    FROM ledger
    WHERE dt = :date AND txn_type IN (SELECT txn_type FROM transfer_types)
    GROUP BY txn_id
    HAVING sum(delta) <> 0 OR count(*) <> 2
)
SELECT
    l.txn_id,
    max(CASE WHEN l.direction = 'debit' THEN l.wallet_id END) AS debit_wallet_id,
    max(CASE WHEN l.direction = 'debit' THEN l.wallet_version END) AS debit_version,
    max(CASE WHEN l.direction = 'debit' THEN l.delta END) AS debit_delta,
    max(CASE WHEN l.direction = 'credit' THEN l.wallet_id END) AS credit_wallet_id,
    max(CASE WHEN l.direction = 'credit' THEN l.wallet_version END) AS credit_version,
    max(CASE WHEN l.direction = 'credit' THEN l.delta END) AS credit_delta
FROM ledger l
JOIN candidates c ON c.txn_id = l.txn_id
WHERE l.dt = :date AND l.txn_type IN (SELECT txn_type FROM transfer_types)
GROUP BY l.txn_id
HAVING count_if(l.direction = 'debit') = 0
    OR count_if(l.direction = 'credit') = 0
    OR min(CASE WHEN l.direction = 'debit' THEN l.delta END) <> max(CASE WHEN l.direction = 'debit' THEN l.delta END)
    OR min(CASE WHEN l.direction = 'credit' THEN l.delta END) <> max(CASE WHEN l.direction = 'credit' THEN l.delta END)
    OR max(CASE WHEN l.direction = 'debit' THEN l.delta END) + max(CASE WHEN l.direction = 'credit' THEN l.delta END) <> 0
ORDER BY l.txn_id
