"""The API tier of the capacity model: tasks, Lattice, the ALB and API Gateway + Lambda fronts, priced.

From the server's CPU per request at the fleet's target CPU (cdk/walletlake_cdk/api_service.py's
scaling rule) and the bytes a request carries; pure arithmetic over the prices in
:mod:`capacity_prices`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capacity_measure import API_CPU_US_PER_REQUEST
from capacity_prices import (
    DAYS_PER_MONTH,
    LAMBDA_MICRO_USD_PER_MILLION_GB_SECONDS,
    LAMBDA_MICRO_USD_PER_MILLION_REQUESTS,
    SECONDS_PER_DAY,
    ceil_div,
    cost,
)
from request_sizes import RESPONSE_BYTES, signed_request_bytes

# --- the API tier (cdk/walletlake_cdk/api_service.py and write_api.py) ------------------------
HOURS_PER_MONTH: Final = 720
#: The fleet's tasks: 2 vCPU / 4 GB ARM64, one worker per vCPU, scaled to 50 % CPU (seed 000's
#: rule), at least one task per Availability Zone.
API_TASK_VCPU: Final = 2
API_TASK_GB: Final = 4
API_TARGET_CPU_PERCENT: Final = 50
API_AZS: Final = 3
#: Bytes a request and its answer carry through the front: a deposit SigV4-signed by botocore for
#: vpc-lattice-svcs with a role session's token (bench/request_sizes.py), and the 204 answer.
API_BYTES_PER_REQUEST: Final = signed_request_bytes() + RESPONSE_BYTES
#: The Lambda front: 30 ms at 1,024 MB per request (assumed, not measured on AWS), one access
#: log line of about 250 bytes per request (write_api.ACCESS_LOG_FORMAT).
API_LAMBDA_SECONDS: Final = 0.030
API_LAMBDA_MB: Final = 1_024
API_ACCESS_LOG_BYTES: Final = 250
# https://aws.amazon.com/fargate/pricing/ : Linux/ARM $0.03238 per vCPU-hour, $0.00356 per GB-hour.
FARGATE_ARM_MICRO_USD_PER_VCPU_HOUR: Final = 32_380
FARGATE_ARM_MICRO_USD_PER_GB_HOUR: Final = 3_560
# https://aws.amazon.com/vpc/lattice/pricing/ : $0.025 per service-hour, $0.025 per GB processed,
# $0.10 per million requests beyond the first 300,000 of each hour.
LATTICE_MICRO_USD_PER_SERVICE_HOUR: Final = 25_000
LATTICE_MICRO_USD_PER_GB: Final = 25_000
LATTICE_MICRO_USD_PER_MILLION_REQUESTS: Final = 100_000
LATTICE_FREE_REQUESTS_PER_HOUR: Final = 300_000
# https://aws.amazon.com/elasticloadbalancing/pricing/ : ALB $0.0225 per hour and $0.008 per LCU-hour;
# an LCU is 1 GB processed per hour (the dimension that binds for small keep-alive requests; new
# connections, 25/s, and rule evaluations, 1,000/s, stay below it with pooled connections).
ALB_MICRO_USD_PER_HOUR: Final = 22_500
ALB_MICRO_USD_PER_LCU_HOUR: Final = 8_000
ALB_BYTES_PER_LCU_HOUR: Final = 10**9
# https://aws.amazon.com/privatelink/pricing/ : interface endpoints $0.01 per AZ-hour (ECR api,
# ECR dkr, CloudWatch Logs); gateway endpoints (DynamoDB, S3) are free.
INTERFACE_ENDPOINTS: Final = 3
INTERFACE_ENDPOINT_MICRO_USD_PER_AZ_HOUR: Final = 10_000
# https://aws.amazon.com/api-gateway/pricing/ : HTTP APIs $1.00 per million (first 300 million a
# month), $0.90 after.
APIGW_MICRO_USD_PER_MILLION: Final = 1_000_000
APIGW_MICRO_USD_PER_MILLION_AFTER: Final = 900_000
APIGW_FIRST_TIER_REQUESTS: Final = 300_000_000
# https://aws.amazon.com/cloudwatch/pricing/ : logs $0.50 per GB ingested.
LOGS_MICRO_USD_PER_GB: Final = 500_000


def api_tier(
    requests_per_second: float, cpu_us_per_request: float = API_CPU_US_PER_REQUEST
) -> dict[str, Any]:
    """Monthly cost (micro-USD) of each way to serve the write path at ``requests_per_second`` (pure).

    ``fleet_lattice`` is the default (ECS Fargate ARM behind VPC Lattice with IAM auth),
    ``fleet_alb`` the internal-ALB option, ``lambda`` API Gateway HTTP API + Lambda.
    """
    requests_month = requests_per_second * SECONDS_PER_DAY * DAYS_PER_MONTH
    busy_vcpus = requests_per_second * cpu_us_per_request / 1e6
    vcpus = busy_vcpus * 100 / API_TARGET_CPU_PERCENT
    tasks = max(API_AZS, ceil_div(vcpus, API_TASK_VCPU))
    task_hour = (
        API_TASK_VCPU * FARGATE_ARM_MICRO_USD_PER_VCPU_HOUR + API_TASK_GB * FARGATE_ARM_MICRO_USD_PER_GB_HOUR
    )
    fargate = cost(tasks * HOURS_PER_MONTH, task_hour, 1)
    endpoints = cost(
        INTERFACE_ENDPOINTS * API_AZS * HOURS_PER_MONTH, INTERFACE_ENDPOINT_MICRO_USD_PER_AZ_HOUR, 1
    )
    gigabytes = requests_month * API_BYTES_PER_REQUEST / 1e9
    billable = max(0.0, requests_month - LATTICE_FREE_REQUESTS_PER_HOUR * HOURS_PER_MONTH)
    lattice = (
        cost(HOURS_PER_MONTH, LATTICE_MICRO_USD_PER_SERVICE_HOUR, 1)
        + cost(gigabytes, LATTICE_MICRO_USD_PER_GB, 1)
        + cost(billable, LATTICE_MICRO_USD_PER_MILLION_REQUESTS, 10**6)
    )
    lcu = max(1.0, requests_per_second * 3600 * API_BYTES_PER_REQUEST / ALB_BYTES_PER_LCU_HOUR)
    alb = cost(HOURS_PER_MONTH, ALB_MICRO_USD_PER_HOUR, 1) + cost(
        lcu * HOURS_PER_MONTH, ALB_MICRO_USD_PER_LCU_HOUR, 1
    )
    first = min(requests_month, APIGW_FIRST_TIER_REQUESTS)
    apigw = cost(first, APIGW_MICRO_USD_PER_MILLION, 10**6) + cost(
        requests_month - first, APIGW_MICRO_USD_PER_MILLION_AFTER, 10**6
    )
    function = cost(
        requests_month * API_LAMBDA_SECONDS * API_LAMBDA_MB / 1024,
        LAMBDA_MICRO_USD_PER_MILLION_GB_SECONDS,
        10**6,
    ) + cost(requests_month, LAMBDA_MICRO_USD_PER_MILLION_REQUESTS, 10**6)
    access_logs = cost(requests_month * API_ACCESS_LOG_BYTES / 1e9, LOGS_MICRO_USD_PER_GB, 1)
    return {
        "requests_per_month": round(requests_month),
        "tasks": tasks,
        "busy_vcpus": round(busy_vcpus, 2),
        "monthly_micro_usd": {
            "fleet_lattice": fargate + endpoints + lattice,
            "fleet_alb": fargate + endpoints + alb,
            "lambda": apigw + function + access_logs,
        },
        "items_micro_usd": {
            "fargate": fargate,
            "interface_endpoints": endpoints,
            "lattice": lattice,
            "alb": alb,
            "api_gateway": apigw,
            "api_lambda": function,
            "api_access_logs": access_logs,
        },
    }
