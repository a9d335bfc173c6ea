"""AWS Lambda entry point of the wallet API (API Gateway / function URL → ASGI via Mangum).

The app and its DynamoDB connection pool are built once per execution environment, at import, so
warm invocations pay only for the request. The CDK app points the function's handler at
``wallet.aws_lambda.handler``.
"""

from __future__ import annotations

from mangum import Mangum

from wallet.api import create_service

#: ASGI lifespan is off: the app has no startup work beyond what create_service already did.
handler = Mangum(create_service(), lifespan="off")
