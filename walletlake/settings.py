"""The one place where walletlake reads its configuration.

Every other module receives a :class:`Settings` instance; nothing deep inside the code reads
``os.environ``. The AWS SDK's own variables (``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL_*``) are
left to the SDK, which honours them exactly as it would on AWS; we only look at them to pick the
query engine's default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Literal

QueryEngine = Literal["duckdb", "athena"]

#: Eight hours: the hot window of seed 000, after which DynamoDB's TTL removes transaction items
#: and the lake becomes the only history.
DEFAULT_HOT_TTL_SECONDS = 8 * 60 * 60

#: Transactions one API process keeps in flight (``bench/hot_wallet.py`` measures the choice).
DEFAULT_WRITES_IN_FLIGHT = 2

_S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


class SettingsError(ValueError):
    """A ``WALLETLAKE_*`` variable holds a value walletlake cannot use."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Names of the resources walletlake talks to and the knobs it honours.

    Attributes
    ----------
    region:
        AWS region; the SDK's ``AWS_DEFAULT_REGION`` (``us-east-1`` when unset, so local runs work).
    table:
        The DynamoDB table holding wallets, user claims and hot transactions.
    bucket, lake_prefix:
        Where the lake lives: ``s3://{bucket}/{lake_prefix}/{table}/dt=YYYY-MM-DD/``.
    glue_database:
        Glue database holding one table per lake table (Athena reads through it).
    athena_workgroup:
        Workgroup the Athena engine runs in; it owns the result location and the scan cutoff.
    query_engine:
        ``duckdb`` (embedded stack) or ``athena`` (AWS).
    hot_ttl_seconds:
        Lifetime of transaction items in DynamoDB, which is also how long a nonce is remembered.
    checkpoint_table:
        DynamoDB table of the local stream consumer's per-shard checkpoints.
    writes_in_flight:
        TransactWriteItems one API process keeps in flight at once; requests arriving while all
        are busy leave together in the next one (group commit, :mod:`wallet.commit_queue`).
    """

    region: str = "us-east-1"
    table: str = "wallets"
    bucket: str = "walletlake-lake"
    lake_prefix: str = "lake"
    glue_database: str = "walletlake"
    athena_workgroup: str = "walletlake"
    query_engine: QueryEngine = "athena"
    hot_ttl_seconds: int = DEFAULT_HOT_TTL_SECONDS
    checkpoint_table: str = "walletlake-checkpoints"
    writes_in_flight: int = DEFAULT_WRITES_IN_FLIGHT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``WALLETLAKE_*`` variables, with the defaults of ARCHITECTURE.md.

        Examples
        --------
        >>> Settings.from_env({"WALLETLAKE_TABLE": "t", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000"}).table
        't'
        """
        env = os.environ if environ is None else environ
        has_local_s3 = any(env.get(name) for name in _S3_ENDPOINT_VARIABLES)
        engine = env.get("WALLETLAKE_QUERY_ENGINE") or ("duckdb" if has_local_s3 else "athena")
        if engine not in ("duckdb", "athena"):
            raise SettingsError(f"WALLETLAKE_QUERY_ENGINE must be duckdb or athena, not {engine!r}")
        ttl_text = env.get("WALLETLAKE_HOT_TTL_SECONDS", str(DEFAULT_HOT_TTL_SECONDS))
        if not ttl_text.isdigit() or int(ttl_text) < 1:
            raise SettingsError(f"WALLETLAKE_HOT_TTL_SECONDS must be a positive integer, not {ttl_text!r}")
        in_flight_text = env.get("WALLETLAKE_WRITES_IN_FLIGHT", str(DEFAULT_WRITES_IN_FLIGHT))
        if not in_flight_text.isdigit() or not 1 <= int(in_flight_text) <= 1000:
            raise SettingsError(
                f"WALLETLAKE_WRITES_IN_FLIGHT must be an integer in 1..1000, not {in_flight_text!r}"
            )
        defaults = cls()
        return cls(
            region=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or defaults.region,
            table=env.get("WALLETLAKE_TABLE") or defaults.table,
            bucket=env.get("WALLETLAKE_BUCKET") or defaults.bucket,
            lake_prefix=(env.get("WALLETLAKE_LAKE_PREFIX") or defaults.lake_prefix).strip("/"),
            glue_database=env.get("WALLETLAKE_GLUE_DATABASE") or defaults.glue_database,
            athena_workgroup=env.get("WALLETLAKE_ATHENA_WORKGROUP") or defaults.athena_workgroup,
            query_engine=engine,  # type: ignore[arg-type]  # checked above
            hot_ttl_seconds=int(ttl_text),
            checkpoint_table=env.get("WALLETLAKE_CHECKPOINT_TABLE") or defaults.checkpoint_table,
            writes_in_flight=int(in_flight_text),
        )

    def replace(self, **changes: object) -> Settings:
        """A copy with some fields changed (tests and the demo use their own table and bucket)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


#: Every ``WALLETLAKE_*`` variable with its meaning, for ``--help`` texts and the README table.
ENVIRONMENT_VARIABLES: dict[str, str] = {
    "WALLETLAKE_TABLE": "the DynamoDB table (default wallets)",
    "WALLETLAKE_BUCKET": "the lake bucket (default walletlake-lake)",
    "WALLETLAKE_LAKE_PREFIX": "key prefix of the lake inside the bucket (default lake)",
    "WALLETLAKE_GLUE_DATABASE": "Glue database holding the lake tables (default walletlake)",
    "WALLETLAKE_ATHENA_WORKGROUP": "Athena workgroup for the AWS engine (default walletlake)",
    "WALLETLAKE_QUERY_ENGINE": "duckdb or athena (default duckdb when an S3 endpoint variable is set)",
    "WALLETLAKE_HOT_TTL_SECONDS": "lifetime of transaction items in DynamoDB (default 28800)",
    "WALLETLAKE_CHECKPOINT_TABLE": "DynamoDB table of the local consumer's checkpoints",
    "WALLETLAKE_WRITES_IN_FLIGHT": "transactions one API process keeps in flight; the rest group-commit "
    f"(default {DEFAULT_WRITES_IN_FLIGHT})",
}
