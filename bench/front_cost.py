"""What the deployed front's checks cost: API CPU per request with and without them, in one run.

The deployed tasks run behind VPC Lattice with ``trust_front=lattice``, the role map, this
service's ARN, the session-name rule and an audit line per request (``wallet.authorization``,
``wallet.audit``). This script runs the same API (``walletlake serve``, the whole HTTP path) on
one embedded stack twice per round, alternating:

- ``plain``: no trusted front, no audit log (the embedded stack's default);
- ``deployed``: the settings above, every request carrying the headers Lattice adds for a signed
  caller, the audit lines written to a file;

and reports, per front, the median over rounds of the server's CPU per transfer and per balance
read (all server CPU, as ``bench/write_path.py`` counts it), and their ratio deployed / plain. The
machine's speed drifts over minutes, so the fronts alternate and only the ratio within one run
is compared.

    .venv/bin/python bench/front_cost.py --rounds 3 --seconds 15
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

import orjson
import urllib3
from write_path import Phase, _default_stack_parent, fund, run_phase

from walletlake.api_server import ApiServer
from walletlake.local import EmbeddedStack, patched_environ

ACCOUNT = "111122223333"
SERVICE = f"arn:aws:vpc-lattice:us-east-1:{ACCOUNT}:service/svc-0123456789abcdef0"
SESSION = "bench.runner@example.com"
#: What Lattice adds to a signed caller's request (wallet.principals, wallet.authorization).
LATTICE_HEADERS = {
    "x-amzn-lattice-identity": (
        f"Principal=arn:aws:sts::{ACCOUNT}:assumed-role/bench/{SESSION}; SessionName={SESSION}; Type=AWSIAM"
    ),
    "x-amzn-lattice-target": f"ServiceArn={SERVICE};ServiceNetworkArn=arn:sn;TargetGroupArn=arn:tg",
    "x-amzn-lattice-network": f"SourceVpcArn=arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/vpc-0bench",
}


def deployed_environment(audit_log: Path) -> dict[str, str]:
    """The deployed tasks' authorization and audit settings (cdk/walletlake_cdk)."""
    return {
        "WALLETLAKE_TRUST_FRONT": "lattice",
        "WALLETLAKE_LATTICE_SERVICE_ARN": SERVICE,
        "WALLETLAKE_CALLER_PERMISSIONS": (
            f"arn:aws:iam::{ACCOUNT}:role/bench=create_wallet+deposit+transfer+read"
        ),
        "WALLETLAKE_CALLER_SESSION_PATTERN": r"[a-z.]+@example\.com",
        "WALLETLAKE_AUDIT_LOG": str(audit_log),
    }


def measure(
    front: str, environment: dict[str, str], headers: dict[str, str], args: argparse.Namespace
) -> tuple[Phase, Phase]:
    """One server on ``environment``: fund, then a transfer phase and a read phase."""
    with ApiServer(env=environment) as api:
        ids = fund(api.url, args.wallets, args.clients, headers)
        sent = {"Content-Type": "application/json", **headers}

        def transfer(pool: urllib3.HTTPConnectionPool, rng: random.Random, nonce: str) -> int:
            payer, payee = rng.sample(ids, 2)
            body = orjson.dumps({"amount": str(rng.randint(1, 1_000_000)), "nonce": nonce})
            path = f"/api/v1/wallets/{payer}/transfer/{payee}/"
            return int(pool.urlopen("PUT", path, body=body, headers=sent).status)

        def read(pool: urllib3.HTTPConnectionPool, rng: random.Random, nonce: str) -> int:
            path = f"/api/v1/wallets/{rng.choice(ids)}/balance"
            return int(pool.urlopen("GET", path, headers=headers).status)

        transfers = run_phase(
            f"{front} transfers", api.url, api.pid, args.clients, args.seconds, transfer, headers
        )
        reads = run_phase(f"{front} reads", api.url, api.pid, args.clients, args.seconds, read, headers)
    for phase in (transfers, reads):
        refused = {status: n for status, n in phase.statuses.items() if status >= 400}
        if refused:
            raise SystemExit(f"{phase.name}: refused answers {refused}: the comparison would be void")
    return transfers, reads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both fronts (default 3)")
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each phase (default 15)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (default 8)")
    parser.add_argument("--wallets", type=int, default=200, help="wallets to spread transfers over")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, list[float]]] = {
        front: {"transfer": [], "read": []} for front in ("plain", "deployed")
    }
    with tempfile.TemporaryDirectory(prefix="walletlake-bench-", dir=_default_stack_parent()) as tmp:
        print(f"starting the embedded stack under {tmp} ...", flush=True)
        with EmbeddedStack(Path(tmp) / "stack") as stack:
            base = {key: value for key, value in stack.environment().items() if key != "WALLETLAKE_AUDIT_LOG"}
            with patched_environ(base):
                for round_number in range(1, args.rounds + 1):
                    for front in ("plain", "deployed"):
                        if front == "plain":
                            environment, headers = base, {}
                        else:
                            audit = Path(tmp) / f"audit-{round_number}.jsonl"
                            environment, headers = {**base, **deployed_environment(audit)}, LATTICE_HEADERS
                        transfers, reads = measure(front, environment, headers, args)
                        figures[front]["transfer"].append(transfers.cpu_us_per_request)
                        figures[front]["read"].append(reads.cpu_us_per_request)
                        print(
                            f"round {round_number} {front:>8}: "
                            f"{transfers.cpu_us_per_request:,.0f} us/transfer "
                            f"({transfers.requests} in {transfers.seconds:.0f} s), "
                            f"{reads.cpu_us_per_request:,.0f} us/read ({reads.requests})",
                            flush=True,
                        )
    print()
    for kind in ("transfer", "read"):
        plain = statistics.median(figures["plain"][kind])
        deployed = statistics.median(figures["deployed"][kind])
        print(
            f"{kind}: plain {plain:,.0f} us, deployed {deployed:,.0f} us of API CPU per request "
            f"(medians of {args.rounds}); deployed / plain = {deployed / plain:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
