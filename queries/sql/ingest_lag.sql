-- Per day, how long ledger rows took from commit (created_at) to the lake (ingested_at): the trend
-- of the stream consumer's lag. One row per day: day, entries, p50_lag_seconds and p99_lag_seconds
-- (approximate percentiles), max_lag_seconds (exact). Rows written by a replay or a backfill carry
-- their late ingest time, so an incident shows as a spike.
-- @param start_date  date  first day (dt), inclusive
-- @param end_date    date  last day (dt), inclusive
SELECT
    dt AS day,
    count(*) AS entries,
    approx_percentile(date_diff('millisecond', created_at, ingested_at), 0.5) / 1000.0 AS p50_lag_seconds,
    approx_percentile(date_diff('millisecond', created_at, ingested_at), 0.99) / 1000.0 AS p99_lag_seconds,
    max(date_diff('millisecond', created_at, ingested_at)) / 1000.0 AS max_lag_seconds
FROM ledger
WHERE dt BETWEEN :start_date AND :end_date
GROUP BY dt
ORDER BY dt
