"""The embedded stack: DynamoDB Local and a moto server on 127.0.0.1, standing in for AWS."""

from walletlake.local._provision import provision
from walletlake.local._servers import StackError, free_port
from walletlake.local._stack import LOCAL_CREDENTIALS, EmbeddedStack, Endpoints, patched_environ
from walletlake.local._tools import dynamodb_local_dir, tools_dir

__all__ = [
    "LOCAL_CREDENTIALS",
    "EmbeddedStack",
    "Endpoints",
    "StackError",
    "dynamodb_local_dir",
    "free_port",
    "patched_environ",
    "provision",
    "tools_dir",
]
