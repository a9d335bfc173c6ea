"""AWS's limits and list prices the capacity model relies on, each with the page that gives it.

Integer micro-USD per quantity, us-east-1. Apart from :mod:`capacity` so a price change is a
one-line diff in a file that holds nothing else.
"""

from __future__ import annotations

import math
from typing import Final

SECONDS_PER_DAY: Final = 86_400
#: A month is billed as 30 days.
DAYS_PER_MONTH: Final = 30


def ceil_div(numerator: float, denominator: float) -> int:
    return max(0, math.ceil(numerator / denominator))


def cost(quantity: float, micro_usd: int, per: int) -> int:
    """Integer micro-USD of ``quantity`` at ``micro_usd`` per ``per`` units, rounded up."""
    return ceil_div(quantity * micro_usd, per)


# --- AWS limits -------------------------------------------------------------------------------
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html : 15-minute timeout,
# 10,240 MB memory, 10,240 MB /tmp, 6 MB synchronous invocation payload (an event source
# mapping's batch is cut at it).
LAMBDA_TIMEOUT_SECONDS: Final = 900
LAMBDA_MAX_MEMORY_MB: Final = 10_240
LAMBDA_MAX_TMP_MB: Final = 10_240
LAMBDA_PAYLOAD_BYTES: Final = 6 * 1024 * 1024
# https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html : CPU grows with memory,
# one vCPU at 1,769 MB.
LAMBDA_MB_PER_VCPU: Final = 1_769
# https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html : BatchSize up to 10,000,
# ParallelizationFactor up to 10 concurrent batches per shard.
STREAM_MAX_BATCH: Final = 10_000
STREAM_MAX_PARALLELIZATION: Final = 10
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html : a partition
# serves up to 1,000 write units/s;
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html : stream shards
# follow the table's partitions (one shard per partition, as a lower bound here).
WRITE_UNITS_PER_PARTITION: Final = 1_000
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html : a
# transactional write costs 2 write units per item (up to 1 KB).
TRANSACTIONAL_WRU_PER_ITEM: Final = 2
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html :
# an eventually consistent read is half a read unit per 4 KB (a Scan sums the items it reads).
READ_UNIT_BYTES: Final = 4_096
# https://docs.aws.amazon.com/athena/latest/ug/service-limits.html : DML queries time out after
# 30 minutes by default (raisable to 240); active DML queries default to 25 in most regions.
ATHENA_DML_TIMEOUT_SECONDS: Final = 1_800
ATHENA_ACTIVE_DML_QUERIES: Final = 25
# https://docs.aws.amazon.com/step-functions/latest/dg/limits-overview.html : a Distributed Map
# runs up to 10,000 child executions at once; an inline Map keeps its iterations in the parent's
# 25,000-event history.
DISTRIBUTED_MAP_MAX_CONCURRENCY: Final = 10_000

# --- prices, us-east-1, integer micro-USD per quantity -----------------------------------------
# https://aws.amazon.com/athena/pricing/ : $5.00 per TB scanned (10 MB minimum per query).
ATHENA_MICRO_USD_PER_TB: Final = 5_000_000
ATHENA_MIN_BYTES_PER_QUERY: Final = 10 * 1_000_000
# https://aws.amazon.com/lambda/pricing/ : $0.0000166667 per GB-second (x86), $0.20 per 1M requests.
LAMBDA_MICRO_USD_PER_MILLION_GB_SECONDS: Final = 16_666_700
LAMBDA_MICRO_USD_PER_MILLION_REQUESTS: Final = 200_000
# https://aws.amazon.com/dynamodb/pricing/on-demand/ : $0.625 per million write request units,
# $0.125 per million read request units; GetRecords calls made by Lambda's DynamoDB trigger are
# free (Streams read request units are billed only for other readers).
DYNAMODB_MICRO_USD_PER_MILLION_WRU: Final = 625_000
# https://aws.amazon.com/dynamodb/pricing/on-demand/ : $0.25 per GB-month of table storage
# (Standard table class; the first 25 GB free, ignored here).
DYNAMODB_MICRO_USD_PER_GB_MONTH: Final = 250_000
# https://aws.amazon.com/dynamodb/pricing/on-demand/ : continuous backups (point-in-time recovery)
# $0.20 per GB-month of table size; both tables have it (cdk/walletlake_cdk).
DYNAMODB_PITR_MICRO_USD_PER_GB_MONTH: Final = 200_000
DYNAMODB_MICRO_USD_PER_MILLION_RRU: Final = 125_000
STREAMS_MICRO_USD_PER_LAMBDA_READ: Final = 0
# https://aws.amazon.com/s3/pricing/ : S3 Standard $0.005 per 1,000 PUT, $0.0004 per 1,000 GET,
# $0.023 per GB-month (first 50 TB).
S3_MICRO_USD_PER_THOUSAND_PUT: Final = 5_000
S3_MICRO_USD_PER_THOUSAND_GET: Final = 400
S3_MICRO_USD_PER_GB_MONTH: Final = 23_000
# https://aws.amazon.com/step-functions/pricing/ : Standard workflows $0.025 per 1,000 state transitions.
SFN_MICRO_USD_PER_THOUSAND_TRANSITIONS: Final = 25_000
# https://aws.amazon.com/s3/pricing/ : LIST requests are billed as PUT ($0.005 per 1,000).
S3_MICRO_USD_PER_THOUSAND_LIST: Final = 5_000
# https://aws.amazon.com/glue/pricing/ : Data Catalog requests $1.00 per million (the first million a
# month free, ignored here: a conservative bound); Iceberg table optimization (compaction, snapshot
# retention, orphan file deletion) $0.44 per DPU-hour, billed per second with a 1-minute minimum.
GLUE_MICRO_USD_PER_MILLION_REQUESTS: Final = 1_000_000
GLUE_MICRO_USD_PER_DPU_HOUR: Final = 440_000
