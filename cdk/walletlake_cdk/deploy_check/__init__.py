"""The deploy check: every function and state machine of the synthesized app, run as AWS would run it.

Nothing here is deployed. It reads a synthesized cloud assembly (``cdk.out``), assembles each
Lambda function's files exactly as Lambda would see them, imports and invokes its handler in a
fresh interpreter with only those files on ``sys.path``, and executes the state machines'
definitions with an Amazon States Language interpreter against the embedded stack. ``make
deploy-check`` runs it (``python -m walletlake_cdk.deploy_check``); ``tests/cdk/test_deploy_check.py``
runs it in the suite. ``docs/operations.md`` ("Deploy check") says what each step proves.
"""
