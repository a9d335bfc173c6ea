"""Settings come from WALLETLAKE_* variables with ARCHITECTURE.md's defaults."""

from __future__ import annotations

import pytest

from walletlake.settings import DEFAULT_HOT_TTL_SECONDS, Settings, SettingsError


def test_defaults_match_the_architecture() -> None:
    # GIVEN no variables WHEN settings are read
    settings = Settings.from_env({})
    # THEN every default is the documented one, and with no local endpoint the engine is Athena
    assert settings.table == "wallets"
    assert settings.bucket == "walletlake-lake"
    assert settings.lake_prefix == "lake"
    assert settings.glue_database == "walletlake"
    assert settings.athena_workgroup == "walletlake"
    assert settings.query_engine == "athena"
    assert settings.hot_ttl_seconds == DEFAULT_HOT_TTL_SECONDS == 28_800
    assert settings.checkpoint_table == "walletlake-checkpoints"
    assert settings.region == "us-east-1"


def test_a_local_s3_endpoint_selects_duckdb() -> None:
    assert Settings.from_env({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000"}).query_engine == "duckdb"


def test_variables_override_defaults() -> None:
    settings = Settings.from_env(
        {
            "WALLETLAKE_TABLE": "t",
            "WALLETLAKE_LAKE_PREFIX": "/p/",
            "WALLETLAKE_HOT_TTL_SECONDS": "5",
            "WALLETLAKE_QUERY_ENGINE": "athena",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000",
            "AWS_DEFAULT_REGION": "eu-west-1",
        }
    )
    assert (settings.table, settings.lake_prefix, settings.hot_ttl_seconds) == ("t", "p", 5)
    assert (settings.query_engine, settings.region) == ("athena", "eu-west-1")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WALLETLAKE_HOT_TTL_SECONDS", "8h"),
        ("WALLETLAKE_HOT_TTL_SECONDS", "0"),
        ("WALLETLAKE_QUERY_ENGINE", "spark"),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})
