"""The AWS deployment of walletlake: one CDK stack built from the project's own definitions.

Every resource name, key, TTL attribute, lake schema and Glue table definition is imported from
the bottom layer the pipeline runs on (``contracts``: settings, the DynamoDB table, the lake's
tables) and from ``lake.glue`` and ``queries/sql``; this package only decides how they are
deployed.
"""

from walletlake_cdk.config import DeploymentConfig, DeploymentConfigError
from walletlake_cdk.stack import WalletLakeStack

__all__ = [
    "DeploymentConfig",
    "DeploymentConfigError",
    "WalletLakeStack",
]
