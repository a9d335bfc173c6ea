-- What the nightly reconciliation found for one UTC day: one row per wallet that was not ok and
-- one per global check, worst first, from the day's latest run (every run is kept: see
-- reconciliation_runs).
-- @param date  date  the reconciled day
SELECT wallet_id, status, expected, actual, detail, run_at
FROM reconciliation
WHERE dt = :date
  AND run_at = (SELECT max(run_at) FROM reconciliation WHERE dt = :date)
ORDER BY CASE status WHEN 'ok' THEN 2 WHEN 'lagging' THEN 1 ELSE 0 END, status, wallet_id
