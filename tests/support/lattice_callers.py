"""Requests as VPC Lattice forwards them: the identity, target and network headers of a signed caller.

The deployed tasks trust these headers (``trust_front=lattice``); tests that play the deployment
send them straight to the app, as Lattice would, as a second service would, or as a forger would.
"""

from __future__ import annotations

from typing import Final

ACCOUNT: Final = "111122223333"
#: The Lattice service the tasks are deployed behind (``WALLETLAKE_LATTICE_SERVICE_ARN``).
SERVICE: Final = f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:service/svc-0123456789abcdef0"
#: A session-name rule naming people (``WALLETLAKE_CALLER_SESSION_PATTERN``).
PERSON: Final = r"[a-z]+\.[a-z]+@example\.com"


def role_arn(role: str) -> str:
    """The IAM role ARN of ``role`` in the test account."""
    return f"arn:aws:iam::{ACCOUNT}:role/{role}"


def principal(role: str, session: str = "alice.smith@example.com") -> str:
    """The assumed-role ARN Lattice verifies for a session of ``role``."""
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


def caller(role: str, session: str = "alice.smith@example.com", *, target: str = SERVICE) -> dict[str, str]:
    """The headers VPC Lattice adds for a SigV4-signed caller of ``role`` through ``target``."""
    identity = f"Principal={principal(role, session)}; SessionName={session}; Type=AWSIAM"
    return {
        "x-amzn-lattice-identity": identity,
        "x-amzn-lattice-target": f"ServiceArn={target};ServiceNetworkArn=arn:sn;TargetGroupArn=arn:tg",
        "x-amzn-lattice-network": f"SourceVpcArn=arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/vpc-0caller",
    }
