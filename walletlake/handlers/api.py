"""The wallet API as a Lambda function (API Gateway → ASGI via Mangum), for ``api=lambda`` deployments.

The settings, the app and its DynamoDB connection pool are built once per execution environment,
at import, so warm invocations pay only for the request, and a function deployed without a
variable it needs (or with one it cannot use) fails its init phase with one line naming it. The
API's own counters are published by the app (:mod:`wallet.emf`), so this handler adds logging
only: one JSON line per invocation with its request id.
"""

from __future__ import annotations

from typing import Any, Final, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum
from mangum.types import ASGI
from mangum.types import LambdaContext as MangumContext

from contracts.api_metrics import SERVICE
from contracts.settings import DEPLOYED_VARIABLES, Settings
from wallet.service import create_service

#: What the CDK app sets for the API function (``cdk/walletlake_cdk/write_api.py``).
REQUIRED_VARIABLES: Final = DEPLOYED_VARIABLES

#: The function's settings; this module is only ever imported as the Lambda entry point.
SETTINGS: Final = Settings.from_env(require=REQUIRED_VARIABLES)

logger = Logger(service=SERVICE)

#: ASGI lifespan is off: the app has no startup work beyond what create_service already did.
_asgi = Mangum(cast(ASGI, create_service(SETTINGS)), lifespan="off")


@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer one API Gateway request through the same app ``walletlake serve`` runs."""
    # The same object Lambda passes; Mangum declares its own protocol for it.
    return _asgi(event, cast(MangumContext, context))
