"""wallet.principals: a client cannot choose its principal; a trusted front's verified one is taken."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.settings import Settings, SettingsError
from wallet.principals import principal_of

ROLE = "arn:aws:sts::123456789012:assumed-role/payments/s1"
FORGED = "arn:aws:iam::123456789012:role/admin"


def scope(headers: dict[str, str], event: dict[str, Any] | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    if event is not None:
        made["aws.event"] = event
    return made


LATTICE = {"x-amzn-lattice-identity": f"Principal={ROLE}; PrincipalOrgID=o-abc; SessionName=s1; Type=AWSIAM"}
FORGED_HEADER = {"x-amzn-lattice-identity": f"Principal={FORGED}; Type=AWSIAM"}
API_GATEWAY_IAM = {"requestContext": {"authorizer": {"iam": {"userArn": ROLE}}}}


def test_without_trust_every_request_is_the_default_whatever_it_claims() -> None:
    assert principal_of(scope(FORGED_HEADER), "none", "local") == "local"
    assert principal_of(scope({}), "none", "laptop") == "laptop"


def test_behind_lattice_the_identity_header_names_the_principal() -> None:
    assert principal_of(scope(LATTICE), "lattice", "local") == ROLE
    # no header: the request did not come through Lattice; no one is named, never the default
    assert principal_of(scope({}), "lattice", "local") is None
    assert principal_of(scope({"x-amzn-lattice-identity": "Type=Anonymous"}), "lattice", "local") is None


def test_behind_api_gateway_only_the_event_counts_never_a_header() -> None:
    assert principal_of(scope(FORGED_HEADER, API_GATEWAY_IAM), "apigateway", "local") == ROLE
    assert principal_of(scope(FORGED_HEADER), "apigateway", "local") is None
    jwt = {"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "u-1", "iss": "https://idp"}}}}}
    assert principal_of(scope({}, jwt), "apigateway", "local") == "https://idp#u-1"


def test_the_settings_read_the_trust_and_refuse_what_they_cannot_use() -> None:
    settings = Settings.from_env(
        {
            "WALLETLAKE_TRUST_FRONT": "lattice",
            "WALLETLAKE_DEFAULT_PRINCIPAL": "ci",
            "WALLETLAKE_ADMIN_ROUTES": "off",
        }
    )
    assert (settings.trust_front, settings.default_principal, settings.admin_routes) == (
        "lattice",
        "ci",
        False,
    )
    assert Settings.from_env(settings.to_env(["WALLETLAKE_ADMIN_ROUTES"])).admin_routes is False
    with pytest.raises(SettingsError, match="WALLETLAKE_TRUST_FRONT must be none, lattice or apigateway"):
        Settings.from_env({"WALLETLAKE_TRUST_FRONT": "header"})
