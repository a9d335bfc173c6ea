"""The deploy check's callers: signed requests through the Lattice stand-in, and around it.

The app is synthesized for the check with three roles (:data:`CHECK_CONTEXT`): a writer named for
every operation, a reader named for ``read`` only, and a stranger the map does not name. Each
signs with local credentials mapped to a role session whose name is a person's (an e-mail), from
the callers' VPC. :func:`run_lattice_step` then proves, against the running task:

- through the stand-in (the template's own auth policies): the writer's operations are served;
  the reader's deposit, the stranger's read, an unsigned request and a forged signature are
  refused 403 and never reach the task; a client-sent ``x-amzn-lattice-identity`` never reaches it;
  the writer's own views are served as deployed: its wallets (``me``) and the wallet's history;
- straight to the task (what a second service with auth type ``NONE`` would deliver), the server
  itself refuses what Lattice would not have vouched for: no identity, a forged identity of a role
  not permitted the operation, another Lattice service, a session name that is no person's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from walletlake_cdk.deploy_check.assembly import ACCOUNT, REGION, CloudAssembly
from walletlake_cdk.deploy_check.lattice import Caller, LatticeStandIn

if TYPE_CHECKING:
    from walletlake_cdk.deploy_check.container import ContainerProcess

WRITER_ROLE: Final = f"arn:aws:iam::{ACCOUNT}:role/walletlake-deploy-check"
READER_ROLE: Final = f"arn:aws:iam::{ACCOUNT}:role/walletlake-deploy-check-reader"
STRANGER_ROLE: Final = f"arn:aws:iam::{ACCOUNT}:role/walletlake-deploy-check-stranger"
CHECK_VPC: Final = "vpc-0dec0c4ec0de0c0de"
#: What the check synthesizes the app with besides ``lambda_deps`` (the Lattice front's options).
CHECK_CONTEXT: Final = {
    "api_callers": f"{WRITER_ROLE}=create_wallet+deposit+transfer+read,{READER_ROLE}=read",
    "caller_vpc_ids": CHECK_VPC,
    "lattice_prefix_list_id": "pl-0dec0c4ec0de0c0de",
}
#: A role session whose name is a person's (the default caller_session_pattern: an e-mail).
SESSION: Final = "deploy-check@example.com"


def _session(role: str, name: str = SESSION) -> str:
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role.rsplit('/', 1)[-1]}/{name}"


WRITER: Final = Caller("AKIDDEPLOYCHECKWRITE", "writer-secret-0", _session(WRITER_ROLE), CHECK_VPC)
READER: Final = Caller("AKIDDEPLOYCHECKREADS", "reader-secret-0", _session(READER_ROLE), CHECK_VPC)
STRANGER: Final = Caller("AKIDDEPLOYCHECKOTHER", "stranger-secret-0", _session(STRANGER_ROLE), CHECK_VPC)
#: The writer's role, with a session an SDK names by default (no person).
MACHINE: Final = Caller(
    "AKIDDEPLOYCHECKMACHN",
    "machine-secret-0",
    _session(WRITER_ROLE, "botocore-session-1700000000"),
    CHECK_VPC,
)
CALLERS: Final = (WRITER, READER, STRANGER, MACHINE)


class LatticeStepError(AssertionError):
    """A caller was answered otherwise than the front and the server should answer it."""


def stand_in_for(assembly: CloudAssembly, upstream: str) -> LatticeStandIn | None:
    """The template's Lattice service as a stand-in in front of ``upstream``; None without one."""
    services = assembly.resources("AWS::VpcLattice::Service")
    if not services:
        return None
    ((service_id, _),) = services.items()
    ((network_id, _),) = assembly.resources("AWS::VpcLattice::ServiceNetwork").items()
    ((target_group_id, target_group),) = assembly.resources("AWS::VpcLattice::TargetGroup").items()
    resolver = assembly.resolver
    policies: dict[str, Mapping[str, Any]] = {}
    for resource in assembly.resources("AWS::VpcLattice::AuthPolicy").values():
        properties = resolver.resolve(resource["Properties"])
        policies[properties["ResourceIdentifier"]] = properties["Policy"]
    return LatticeStandIn(
        upstream=upstream,
        service_arn=resolver.get_att(service_id, "Arn"),
        network_arn=resolver.get_att(network_id, "Arn"),
        target_group_arn=resolver.get_att(target_group_id, "Arn"),
        service_policy=policies[resolver.get_att(service_id, "Id")],
        network_policy=policies[resolver.get_att(network_id, "Id")],
        callers=CALLERS,
        region=REGION,
        upstream_protocol=target_group["Properties"]["Config"]["Protocol"],
    ).start()


def run_lattice_step(front: LatticeStandIn, task: ContainerProcess) -> dict[str, Any]:
    """Every caller of the module's docstring, each answer checked; the answers by case.

    ``front`` stands in front of ``task``, the API task running from its image's files.
    """
    created = front.request(WRITER, "POST", "/api/v1/wallets/", {"user_id": str(uuid.uuid4())})
    _expect(created.status == 201 and created.forwarded, "the writer creates a wallet", created)
    wallet = json.loads(created.body)["id"]
    deposit = f"/api/v1/wallets/{wallet}/deposit/"
    balance = f"/api/v1/wallets/{wallet}/balance"
    outcomes: dict[str, Any] = {"wallet": wallet}

    # --- through the stand-in: Lattice's answers -----------------------------------------------
    cases: dict[
        str, tuple[Caller | None, str, str, dict[str, str] | None, dict[str, str], str | None, int]
    ] = {
        "writer deposits": (WRITER, "PUT", deposit, {"amount": "7", "nonce": "lattice-1"}, {}, None, 204),
        "reader reads": (READER, "GET", balance, None, {}, None, 200),
        "reader deposits": (READER, "PUT", deposit, {"amount": "7", "nonce": "lattice-2"}, {}, None, 403),
        "stranger reads": (STRANGER, "GET", balance, None, {}, None, 403),
        "unsigned read": (None, "GET", balance, None, {}, None, 403),
        "forged signature": (WRITER, "GET", balance, None, {}, "not-the-secret", 403),
    }
    for name, (caller, method, path, body, headers, secret, status) in cases.items():
        answer = front.request(caller, method, path, body, extra_headers=headers, secret=secret)
        _expect(answer.status == status, f"{name}: {status}", answer)
        _expect(answer.forwarded == (status != 403), f"{name}: the task saw it only if allowed", answer)
        outcomes[name] = answer.status
    # The owner's own views, served by the task as deployed: its wallets (seed 000's ``me``) and the
    # wallet's history (the deposit, from DynamoDB: the lake holds nothing of it yet).
    mine = front.request(WRITER, "GET", "/api/v1/wallets/me/")
    # (the check's person opened wallets in earlier steps too: this one must be among them)
    _expect(mine.status == 200 and wallet in json.loads(mine.body)["wallets"], "the writer's wallets", mine)
    history = front.request(WRITER, "GET", f"/api/v1/wallets/{wallet}/transactions")
    entries = json.loads(history.body).get("entries") if history.status == 200 else None
    _expect(
        entries is not None
        and [(e["version"], e["type"], e["amount"], e["balance_after"], e["nonce"]) for e in entries]
        == [(1, "deposit", "7", "7", "lattice-1")]
        and entries[0]["initiated_by"] == WRITER.principal,
        "the writer's history: its one deposit, named as its caller",
        history,
    )
    outcomes["writer's wallets"], outcomes["writer's history"] = mine.status, history.status
    denials = {entry["authDeniedReason"] for entry in front.access_log if entry["responseCode"] == 403}
    _expect(denials == {"Service", "Network", "Unauthenticated"}, "Lattice's denial reasons logged", denials)

    # A client's own identity header never reaches the task: Lattice's replaces it.
    forged = {"x-amzn-lattice-identity": f"Principal={_session(WRITER_ROLE)}; Type=AWSIAM"}
    answer = front.request(READER, "GET", balance, extra_headers=forged)
    seen = front.forwarded[-1]["x-amzn-lattice-identity"]
    _expect(
        answer.status == 200 and seen.startswith(f"Principal={READER.principal};"), "identity replaced", seen
    )

    # --- straight to the task: the server's own answers -----------------------------------------
    target = front.forwarded[-1]["x-amzn-lattice-target"]
    elsewhere = target.replace(front.service_arn, front.service_arn[:-4] + "beef")
    direct = {
        "no Lattice header": ({}, "PUT", deposit, {401, 403}),
        "no identity": ({"x-amzn-lattice-target": target}, "PUT", deposit, {401}),
        "anonymous": (
            {"x-amzn-lattice-identity": "Type=Anonymous", "x-amzn-lattice-target": target},
            "PUT",
            deposit,
            {401},
        ),
        "reader's deposit, forged": (_identity(READER, target), "PUT", deposit, {403}),
        "another Lattice service": (_identity(WRITER, elsewhere), "PUT", deposit, {403}),
        "a machine's session": (_identity(MACHINE, target), "PUT", deposit, {403}),
        "stranger, forged": (_identity(STRANGER, target), "GET", balance, {403}),
    }
    for name, (headers, method, path, statuses) in direct.items():
        body = {"amount": "7", "nonce": f"direct-{len(outcomes)}"} if method == "PUT" else None
        status, text = task.request(method, path, body, headers=headers)
        _expect(status in statuses, f"straight to the task, {name}: {sorted(statuses)}", (status, text[:300]))
        outcomes[f"direct: {name}"] = status
    # Nothing was written by any refusal: the wallet holds the writer's one deposit.
    final = front.request(WRITER, "GET", balance)
    _expect(
        final.status == 200 and json.loads(final.body)["balance"] == "7", "only the allowed deposit", final
    )
    outcomes["access_log"] = list(front.access_log)
    return outcomes


def _identity(caller: Caller, target: str) -> dict[str, str]:
    """Headers as Lattice would have set them for ``caller``, forged (sent straight to the task)."""
    session = caller.principal.rsplit("/", 1)[-1]
    return {
        "x-amzn-lattice-identity": f"Principal={caller.principal}; SessionName={session}; Type=AWSIAM",
        "x-amzn-lattice-target": target,
    }


def _expect(condition: bool, what: str, seen: object) -> None:
    if not condition:
        raise LatticeStepError(f"{what}: got {seen!r}")
