"""The AWS Lambda entry points: every function the CDK app deploys names a handler of this package.

They sit in the application layer, above the domain packages they call (docs/architecture.md,
"Layers"), and share one shape so an operator reads every function's logs and metrics alike:

- settings are read once per execution environment (``HandlerSettings`` over the variables the CDK
  app sets), so a function deployed without one it needs fails its cold start naming it;
- boto3 clients are made once per execution environment and named for their service (``s3``,
  ``dynamodb``), as everywhere in the project;
- every handler is ``handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]``
  decorated with Powertools' ``Logger.inject_lambda_context`` (structured JSON lines carrying the
  request id) and, where it publishes metrics, ``Metrics.log_metrics``, which flushes them even
  when the handler raises; namespace, services and metric names are in
  :mod:`contracts.lambda_metrics`;
- the work itself is a plain function of the domain packages, or of the handler module for the
  steps that only compose them, called with explicit arguments so the suite runs it without Lambda.

The deploy check (``make deploy-check``) imports these modules from the synthesized assets and
invokes them through Lambda's runtime interface, with a context like Lambda's.
"""
