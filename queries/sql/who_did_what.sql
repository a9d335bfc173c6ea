-- Who did what, when: every request the API's front recorded between two instants, oldest
-- first. On AWS the rows are VPC Lattice's access logs (every request it saw, those its auth
-- policies denied included: refused_because is then Lattice's reason); on the embedded stack the
-- API's own audit lines (WALLETLAKE_AUDIT_LOG), with the same fields. principal is the verified
-- caller (an assumed-role ARN ending in its session name, the person who acted), null when no
-- one was verified. Lattice writes '-' for a field it has no value for: read here as null.
-- @param start  timestamp  ISO-8601 UTC, inclusive
-- @param end    timestamp  ISO-8601 UTC, exclusive
SELECT
    from_iso8601_timestamp(startTime) AS at,
    nullif(callerPrincipal, '-') AS principal,
    requestMethod AS method,
    requestPath AS path,
    responseCode AS status,
    coalesce(nullif(authDeniedReason, '-'), refusal) AS refused_because,
    nullif(sourceVpcArn, '-') AS source_vpc
FROM api_access_log
WHERE from_iso8601_timestamp(startTime) >= :start
  AND from_iso8601_timestamp(startTime) < :end
ORDER BY at, principal, path
