-- One UTC day's money checks: every movement between two wallets (a transfer) has its debit and
-- credit cancel out, their debits equal their credits, every entry is a leg of a registered
-- movement type, and the net change of all balances equals the money that entered the system
-- minus the money that left it (money in and out are the legs movement_legs, made from
-- contracts.movement_types, says come from or go outside). conserved is true when all hold.
-- @param date  date  the day
WITH
-- @include movement_legs
entries AS (
    SELECT
        l.txn_id, l.direction, l.amount, l.delta, m.flow,
        row_number() OVER (PARTITION BY l.entry_id ORDER BY l.ingested_at, l.stream_sequence) AS copy
    FROM ledger l
    LEFT JOIN movement_legs m ON m.txn_type = l.txn_type AND m.direction = l.direction
    WHERE l.dt = :date
),
unique_entries AS (
    SELECT * FROM entries WHERE copy = 1
),
totals AS (
    SELECT
        count(*) AS entries,
        count_if(flow = 1) AS money_in_entries,
        coalesce(sum(CASE WHEN flow = 1 THEN amount END), 0) AS money_in,
        count_if(flow = -1) AS money_out_entries,
        coalesce(sum(CASE WHEN flow = -1 THEN amount END), 0) AS money_out,
        count_if(flow = 0 AND direction = 'debit') AS transfer_debits,
        coalesce(sum(CASE WHEN flow = 0 AND direction = 'debit' THEN amount END), 0) AS debit_amount,
        count_if(flow = 0 AND direction = 'credit') AS transfer_credits,
        coalesce(sum(CASE WHEN flow = 0 AND direction = 'credit' THEN amount END), 0) AS credit_amount,
        count_if(flow IS NULL) AS unregistered_entries,
        coalesce(sum(delta), 0) AS net_change
    FROM unique_entries
),
transfers AS (
    SELECT txn_id, sum(delta) AS net, count_if(direction = 'debit') AS debits,
           count_if(direction = 'credit') AS credits
    FROM unique_entries
    WHERE flow = 0
    GROUP BY txn_id
),
checks AS (
    SELECT count_if(net <> 0 OR debits <> 1 OR credits <> 1) AS unbalanced_transfers
    FROM transfers
)
SELECT
    :date AS day,
    t.entries,
    t.money_in_entries,
    t.money_in,
    t.money_out_entries,
    t.money_out,
    t.transfer_debits,
    t.debit_amount,
    t.transfer_credits,
    t.credit_amount,
    t.unregistered_entries,
    t.net_change,
    c.unbalanced_transfers,
    t.debit_amount = t.credit_amount
        AND c.unbalanced_transfers = 0
        AND t.unregistered_entries = 0
        AND t.net_change = t.money_in - t.money_out AS conserved
FROM totals t
CROSS JOIN checks c
