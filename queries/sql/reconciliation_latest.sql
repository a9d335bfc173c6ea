-- The findings of the most recent reconciliation run in a range of days, failing findings first.
-- One row per finding: day, run_at, wallet_id (null for a global check), status, expected, actual,
-- detail; ordered failing (neither ok nor lagging), then lagging, then ok.
-- @param start_date  date  first reconciled day (dt), inclusive
-- @param end_date    date  last reconciled day (dt), inclusive
WITH latest AS (
    SELECT dt, run_at
    FROM reconciliation
    WHERE dt BETWEEN :start_date AND :end_date
    ORDER BY dt DESC, run_at DESC
    LIMIT 1
)
SELECT
    r.dt AS day,
    r.run_at,
    r.wallet_id,
    r.status,
    r.expected,
    r.actual,
    r.detail
FROM reconciliation AS r
JOIN latest AS l ON r.dt = l.dt AND r.run_at = l.run_at
WHERE r.dt BETWEEN :start_date AND :end_date
ORDER BY
    CASE r.status WHEN 'ok' THEN 2 WHEN 'lagging' THEN 1 ELSE 0 END,
    r.wallet_id
