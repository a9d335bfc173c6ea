-- Each day's latest balance snapshot: one row per wallet and dt, from the last snapshot scan taken
-- that day (the nightly job may snapshot a day more than once; balance_snapshots keeps every scan),
-- so sum(balance) over a dt is the money at that scan, never twice it. Same columns as
-- balance_snapshots. A Trino window partitioned by dt keeps a dt filter on the partitions.
SELECT wallet_id, balance, version, updated_at, snapshot_at, dt
FROM (
    SELECT
        wallet_id,
        balance,
        version,
        updated_at,
        snapshot_at,
        dt,
        max(snapshot_at) OVER (PARTITION BY dt) AS latest_snapshot_at
    FROM balance_snapshots
) AS scans
WHERE snapshot_at = latest_snapshot_at
