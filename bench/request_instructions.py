"""Instructions the API process executes per request, counted by valgrind: a figure no drift moves.

The CPU figures of ``bench/write_path.py`` and ``bench/hot_wallet.py`` are seconds, and this
machine's speed varies by half over an hour; a change of a few percent hides in that. This bench
counts instructions instead (``valgrind --tool=callgrind``: the same count for the same code and
inputs whatever else the machine runs). One process serves requests one after the other
through :func:`wallet.service.create_service` (the ASGI app ``walletlake serve`` runs: every layer,
the fast movement path, the real DynamoDB client and its signing) against a canned DynamoDB on
loopback (``bench/write_path.py --canned-latency-ms``'s: every call answers at once). It is run
twice, with ``--warm-up`` + ``--requests`` requests and with ``--warm-up`` + ``--requests`` x 6, and the
difference divided by the extra requests is the cost of one request: imports, start and warm-up
cancel out. valgrind counts user space only: the kernel's part of a socket write is not in it, nor
uvicorn's HTTP parsing (the app is called directly).

Per request kind (``transfer``: ``PUT .../transfer/{id}/``; ``read``: ``GET .../balance``) and
front (``local``: no trusted front, what the other benches serve; ``lattice``: a caller VPC
Lattice vouched for, a caller map with the owner rule where the tree has one, the audit log
written to a file), for this tree and, with ``--baseline``, an earlier checkout served from the
same virtualenv, side by side with their ratio.

    .venv/bin/python bench/request_instructions.py
    git worktree add ../walletlake-before 692806e   # before issue 44
    .venv/bin/python bench/request_instructions.py --baseline ../walletlake-before

Needs valgrind (Debian's package; on this machine kind already).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

_ROOT = Path(__file__).resolve().parents[1]
_ROLE = "arn:aws:iam::111122223333:role/payments"
_LATTICE_HEADERS = [
    (
        b"x-amzn-lattice-identity",
        b"Principal=arn:aws:sts::111122223333:assumed-role/payments/alice; PrincipalOrgID=o-1; "
        b"SessionName=alice; Type=AWSIAM",
    ),
    (
        b"x-amzn-lattice-target",
        b"ServiceArn=arn:aws:vpc-lattice:us-east-1:111122223333:service/svc-1; "
        b"ServiceNetworkArn=arn:aws:vpc-lattice:us-east-1:111122223333:servicenetwork/sn-1; "
        b"TargetGroupArn=arn:aws:vpc-lattice:us-east-1:111122223333:targetgroup/tg-1",
    ),
    (b"x-amzn-lattice-network", b"SourceVpcArn=arn:aws:ec2:us-east-1:111122223333:vpc/vpc-1"),
]
_COLLECTED = re.compile(rb"Collected : (\d+)")


def drive_environment(tree: Path, port: int, front: str, audit_log: Path) -> dict[str, str]:
    """The served process's variables: the canned DynamoDB, and for ``lattice`` the trusted front."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }
    if front == "lattice":
        # a tree with owners needs ":any" for a caller acting on wallets it does not own (the canned
        # wallet has no owner); one from before owners does not know the suffix
        any_wallet = ":any" if (tree / "wallet" / "ownership.py").exists() else ""
        operations = "+".join(f"{operation}{any_wallet}" for operation in ("transfer", "deposit", "read"))
        environment |= {
            "WALLETLAKE_TRUST_FRONT": "lattice",
            "WALLETLAKE_CALLER_PERMISSIONS": f"{_ROLE}={operations}",
            "WALLETLAKE_CALLER_SESSION_PATTERN": "[a-z]+",
            "WALLETLAKE_AUDIT_LOG": str(audit_log),
        }
    return environment


def drive(requests: int, kind: str, front: str) -> None:
    """Serve ``requests`` requests of ``kind`` through the app, one at a time (run under valgrind)."""
    import uvloop

    from contracts.settings import Settings

    try:
        from wallet.service import create_service
    except ImportError:  # a tree from before wallet/service.py (0ea1ce7 and earlier)
        from wallet.api import create_service  # type: ignore[attr-defined,no-redef]

    app = create_service(Settings.from_env())
    payer, payee = str(uuid.uuid4()), str(uuid.uuid4())
    extra = _LATTICE_HEADERS if front == "lattice" else []
    answers: dict[int, int] = {}

    async def one() -> None:
        if kind == "transfer":
            method, path = "PUT", f"/api/v1/wallets/{payer}/transfer/{payee}/"
            body = orjson.dumps({"amount": "5", "nonce": uuid.uuid4().hex})
        else:
            method, path, body = "GET", f"/api/v1/wallets/{payer}/balance", b""
        headers = [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"user-agent", b"bench"),
            *extra,
        ]
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answers[message["status"]] = answers.get(message["status"], 0) + 1

        await app(scope, receive, send)

    async def run() -> None:
        for _ in range(requests):
            await one()

    uvloop.run(run())
    expected = 204 if kind == "transfer" else 200
    if set(answers) != {expected}:
        raise SystemExit(f"{kind} answered {answers}, not only {expected}")


def count(tree: Path, port: int, requests: int, kind: str, front: str) -> int:
    """Instructions of one served process of ``requests`` requests (callgrind's total)."""
    with tempfile.TemporaryDirectory(prefix="walletlake-instructions-") as tmp:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--drive",
                str(requests),
                kind,
                front,
            ],
            cwd=tree,
            env=drive_environment(tree, port, front, Path(tmp) / "audit.log"),
            capture_output=True,
            check=False,
        )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the count in {tree} failed:\n{done.stderr.decode()[-2000:]}")
    return int(found[1])


def per_request(tree: Path, port: int, args: argparse.Namespace, kind: str, front: str) -> float:
    """Instructions of one request: the difference of two runs over the requests it adds."""
    small, large = args.warm_up + args.requests, args.warm_up + 6 * args.requests
    with ThreadPoolExecutor(2) as pool:  # valgrind's counts do not depend on the load: both at once
        first, second = pool.map(lambda n: count(tree, port, n, kind, front), (small, large))
    return (second - first) / (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", metavar="DIR", help="an earlier checkout (git worktree add DIR COMMIT)")
    parser.add_argument(
        "--requests", type=int, default=200, help="the run's extra requests / 5 (default 200)"
    )
    parser.add_argument("--warm-up", type=int, default=50, help="requests in both runs (default 50)")
    parser.add_argument("--kinds", default="transfer,read", help="transfer,read (default both)")
    parser.add_argument("--fronts", default="local,lattice", help="local,lattice (default both)")
    parser.add_argument("--drive", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        drive(int(args.drive[0]), args.drive[1], args.drive[2])
        return 0
    # imported here, not at the top: a counted process (--drive) imports nothing but the tree it serves
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from write_path import canned_dynamodb

    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH (Debian: apt-get install valgrind)")
    trees = [("this tree", _ROOT)]
    if args.baseline:
        trees.append(("baseline", Path(args.baseline).resolve()))
    with canned_dynamodb(0) as port:
        rows = []
        for kind in args.kinds.split(","):
            for front in args.fronts.split(","):
                figures = []
                for name, tree in trees:
                    print(f"counting {kind} ({front}) in {name} ({tree}) ...", flush=True)
                    figures.append(per_request(tree, port, args, kind, front))
                rows.append((kind, front, figures))
    print("\ninstructions per request (callgrind, the API process, a canned DynamoDB)")
    header = f"{'request':10} {'front':8} {'this tree':>12}"
    if args.baseline:
        header += f" {'baseline':>12} {'ratio':>7}"
    print(header)
    for kind, front, figures in rows:
        line = f"{kind:10} {front:8} {figures[0]:12,.0f}"
        if args.baseline:
            line += f" {figures[1]:12,.0f} {figures[0] / figures[1]:7.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
