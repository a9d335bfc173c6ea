"""AWS Lambda entry point of the wallet API (API Gateway / function URL → ASGI via Mangum).

The settings, the app and its DynamoDB connection pool are built once per execution environment,
at import, so warm invocations pay only for the request, and a function deployed without a
variable it needs (or with one it cannot use) fails its init phase with one line naming it. The
CDK app points the function's handler at ``wallet.aws_lambda.handler``.
"""

from __future__ import annotations

from typing import Final

from mangum import Mangum

from contracts.settings import DEPLOYED_VARIABLES, Settings
from wallet.api import create_service

#: What the CDK app sets for the API function (``cdk/walletlake_cdk/write_api.py``).
REQUIRED_VARIABLES: Final = DEPLOYED_VARIABLES

#: The function's settings; this module is only ever imported as the Lambda entry point.
SETTINGS: Final = Settings.from_env(require=REQUIRED_VARIABLES)

#: ASGI lifespan is off: the app has no startup work beyond what create_service already did.
handler = Mangum(create_service(SETTINGS), lifespan="off")
