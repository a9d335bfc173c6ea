"""The AWS deployment of walletlake: one CDK stack built from the project's own definitions.

Every resource name, key, TTL attribute, lake schema and Glue table definition is imported from
the packages the pipeline runs (``walletlake.settings``, ``wallet.table``, ``lake.schemas``,
``lake.glue``, ``queries/sql``); this package only decides how they are deployed.
"""

from walletlake_cdk.config import DeploymentConfig, DeploymentConfigError
from walletlake_cdk.stack import WalletLakeStack

__all__ = [
    "DeploymentConfig",
    "DeploymentConfigError",
    "WalletLakeStack",
]
