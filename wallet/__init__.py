"""The wallet write path: domain rules, DynamoDB access and the HTTP API of seed 000.

Modules, by job:

- :mod:`contracts.wallets_table`: the DynamoDB item contract (keys, attribute names), shared with the stream
  processor, the local stack and the CDK app;
- :mod:`wallet.validation` and :mod:`wallet.commands`: untrusted JSON → validated requests, and what
  makes two requests "the same" (idempotency);
- :mod:`wallet.posting`: the pure ledger arithmetic of one request;
- :mod:`wallet.errors`: every refusal and failure, each with its public code;
- :mod:`wallet.store` and :mod:`wallet.dynamodb`: the TransactWriteItems protocol and the lean
  signed client it runs on;
- :mod:`wallet.api`: the FastAPI app (the one place errors become HTTP), :mod:`wallet.telemetry`
  its counters;
- :mod:`wallet.admission` (429 past a bound of requests in flight), :mod:`wallet.emf` (the counters
  as CloudWatch embedded-metric-format lines) and :mod:`wallet.commit_queue` (group commits): the
  parts a long-running server puts around the app.

The processes that run the app are the application's (``walletlake/``): :mod:`walletlake.server`
for the fleet's long-running servers (``walletlake serve``), :mod:`walletlake.handlers.api` for a
Lambda deployment.

Only the light, pure parts are re-exported here: importing :mod:`contracts.wallets_table` (as the stream
processor's Lambda does) must not pull in FastAPI, botocore or the CRT.
"""

from contracts.money import MAX_AMOUNT
from wallet.commands import CreateWallet, Deposit, Transfer, request_hash
from wallet.errors import WalletError
from wallet.validation import parse_amount, parse_nonce, parse_uuid

__all__ = [
    "MAX_AMOUNT",
    "CreateWallet",
    "Deposit",
    "Transfer",
    "WalletError",
    "parse_amount",
    "parse_nonce",
    "parse_uuid",
    "request_hash",
]
