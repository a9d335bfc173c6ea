-- One UTC day's money checks: every transfer's debit and credit cancel out, transfer debits equal
-- transfer credits, and the net change of all balances equals the deposits (money is only created
-- by deposits). conserved is true when all three hold.
-- @param date  date  the day
WITH entries AS (
    SELECT
        txn_id, txn_type, direction, amount, delta,
        row_number() OVER (PARTITION BY entry_id ORDER BY ingested_at, stream_sequence) AS copy
    FROM ledger
    WHERE dt = :date
),
unique_entries AS (
    SELECT * FROM entries WHERE copy = 1
),
totals AS (
    SELECT
        count_if(txn_type = 'deposit') AS deposits,
        coalesce(sum(CASE WHEN txn_type = 'deposit' THEN amount END), 0) AS deposit_amount,
        count_if(txn_type = 'transfer' AND direction = 'debit') AS transfer_debits,
        coalesce(sum(CASE WHEN txn_type = 'transfer' AND direction = 'debit' THEN amount END), 0)
            AS debit_amount,
        count_if(txn_type = 'transfer' AND direction = 'credit') AS transfer_credits,
        coalesce(sum(CASE WHEN txn_type = 'transfer' AND direction = 'credit' THEN amount END), 0)
            AS credit_amount,
        coalesce(sum(delta), 0) AS net_change
    FROM unique_entries
),
transfers AS (
    SELECT txn_id, sum(delta) AS net, count_if(direction = 'debit') AS debits,
           count_if(direction = 'credit') AS credits
    FROM unique_entries
    WHERE txn_type = 'transfer'
    GROUP BY txn_id
),
checks AS (
    SELECT count_if(net <> 0 OR debits <> 1 OR credits <> 1) AS unbalanced_transfers
    FROM transfers
)
SELECT
    :date AS day,
    t.deposits,
    t.deposit_amount,
    t.transfer_debits,
    t.debit_amount,
    t.transfer_credits,
    t.credit_amount,
    t.net_change,
    c.unbalanced_transfers,
    t.debit_amount = t.credit_amount
        AND c.unbalanced_transfers = 0
        AND t.net_change = t.deposit_amount AS conserved
FROM totals t
CROSS JOIN checks c
