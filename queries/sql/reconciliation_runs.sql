-- Every reconciliation run in a range of days with its findings counted by class and its verdict.
-- One row per (day, run_at), oldest first: findings (rows of the reconciliation table: a wallet
-- that reconciled ok has none, a global check has one); ok, lagging, missing, duplicate, mismatch,
-- chain_break (rows by status; ok rows are passing global checks); other (any further status, e.g.
-- a failed global check); failing (anything but ok and lagging, which fails the job); passed;
-- wallets (closes the day's daily_balances holds: the latest run's) and ok_wallets (those with no
-- finding). A day reconciled twice has two runs: the latest counts.
-- @param start_date  date  first reconciled day (dt), inclusive
-- @param end_date    date  last reconciled day (dt), inclusive
WITH closes AS (
    SELECT dt, count(*) AS wallets
    FROM daily_balances
    WHERE dt BETWEEN :start_date AND :end_date
    GROUP BY dt
),
runs AS (
    SELECT
        dt,
        run_at,
        count(DISTINCT CASE WHEN status <> 'ok' THEN wallet_id END) AS wallets_with_findings,
        count(*) AS findings,
        count_if(status = 'ok') AS ok,
        count_if(status = 'lagging') AS lagging,
        count_if(status = 'missing') AS missing,
        count_if(status = 'duplicate') AS duplicate,
        count_if(status = 'mismatch') AS mismatch,
        count_if(status = 'chain_break') AS chain_break,
        count_if(status NOT IN ('ok', 'lagging', 'missing', 'duplicate', 'mismatch', 'chain_break')) AS other,
        count_if(status NOT IN ('ok', 'lagging')) AS failing,
        count_if(status NOT IN ('ok', 'lagging')) = 0 AS passed
    FROM reconciliation
    WHERE dt BETWEEN :start_date AND :end_date
    GROUP BY dt, run_at
)
SELECT
    r.dt AS day,
    r.run_at,
    r.findings,
    r.ok,
    r.lagging,
    r.missing,
    r.duplicate,
    r.mismatch,
    r.chain_break,
    r.other,
    r.failing,
    r.passed,
    coalesce(c.wallets, 0) AS wallets,
    greatest(coalesce(c.wallets, 0) - r.wallets_with_findings, 0) AS ok_wallets
FROM runs r
LEFT JOIN closes c ON c.dt = r.dt
ORDER BY r.dt, r.run_at
