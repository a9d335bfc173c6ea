"""The embedded stack on 127.0.0.1: DynamoDB Local, SeaweedFS (S3) and a moto server (Glue)."""

from walletlake.local._provision import provision
from walletlake.local._servers import StackError, free_port
from walletlake.local._stack import (
    LOCAL_CREDENTIALS,
    EmbeddedStack,
    Endpoints,
    StackFootprint,
    patched_environ,
)
from walletlake.local._tools import dynamodb_local_dir, tools_dir

__all__ = [
    "LOCAL_CREDENTIALS",
    "EmbeddedStack",
    "Endpoints",
    "StackError",
    "StackFootprint",
    "dynamodb_local_dir",
    "free_port",
    "patched_environ",
    "provision",
    "tools_dir",
]
