-- Every reconciliation run in a range of days with its findings counted by class and its verdict.
-- One row per (day, run_at), oldest first: findings; ok, lagging, missing, duplicate, mismatch,
-- chain_break; other (any further status, e.g. a global check's); failing (anything but ok and
-- lagging, which fails the job); passed. A day reconciled twice has two runs: the latest counts.
-- @param start_date  date  first reconciled day (dt), inclusive
-- @param end_date    date  last reconciled day (dt), inclusive
SELECT
    dt AS day,
    run_at,
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
ORDER BY dt, run_at
