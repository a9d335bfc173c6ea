"""What a synthesized cloud assembly deploys, read back from its template and asset manifest.

Pure reading, no AWS: every Lambda function with its handler, code asset folder, layers (the
project's own from ``cdk.out``, the AWS-published ones by ARN), memory and environment, and every
state machine's definition, with CloudFormation's intrinsic functions resolved the way
CloudFormation would resolve them in one account and region. The deploy check never keeps its
own list of functions: whatever the template holds is what it checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

#: The account and region the check pretends to deploy to (no AWS account is involved).
ACCOUNT: Final = "123456789012"
REGION: Final = "us-east-1"
PARTITION: Final = "aws"

_PSEUDO: Final = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "WalletLake",
    "AWS::NoValue": None,
}

#: The property of a resource type that CloudFormation's ``Ref`` returns when it is a name set in
#: the template (otherwise ``Ref`` gives a generated name; the logical id stands in for it).
_NAME_PROPERTIES: Final = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Athena::WorkGroup": "Name",
    "AWS::Glue::Database": "DatabaseInput",
}


#: VPC Lattice's resources: the type in their ARN and their ids' prefix.
_LATTICE_KINDS: Final = {
    "AWS::VpcLattice::Service": ("service", "svc"),
    "AWS::VpcLattice::ServiceNetwork": ("servicenetwork", "sn"),
    "AWS::VpcLattice::TargetGroup": ("targetgroup", "tg"),
}


class AssemblyError(ValueError):
    """The assembly holds something the deploy check cannot read (a new intrinsic, a missing asset)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Layer:
    """One layer of a function: a folder of the assembly, or an AWS-published layer's ARN."""

    arn: str
    folder: Path | None

    @property
    def published(self) -> bool:
        """True for a layer AWS publishes (its files are reconstructed, not in ``cdk.out``)."""
        return self.folder is None


@dataclasses.dataclass(frozen=True, slots=True)
class DeployedFunction:
    """A Lambda function as the template deploys it."""

    logical_id: str
    handler: str
    runtime: str
    architecture: str
    memory_mb: int
    timeout_seconds: int
    ephemeral_mb: int
    code: Path
    layers: tuple[Layer, ...]
    environment: dict[str, str]

    @property
    def arn(self) -> str:
        """The ARN the state machines name it by (``Fn::GetAtt [id, Arn]``)."""
        return function_arn(self.logical_id)


def function_arn(logical_id: str) -> str:
    """The ARN :class:`Resolver` gives a function of the template."""
    return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{logical_id}"


class Resolver:
    """CloudFormation's intrinsic functions over one template, in one account and region."""

    def __init__(self, template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> None:
        self._resources: Mapping[str, Any] = template.get("Resources", {})
        self._mappings: Mapping[str, Any] = template.get("Mappings", {})
        self._overrides = dict(overrides or {})

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic replaced by what CloudFormation would put there."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            handler = _INTRINSICS.get(key)
            if handler is not None:
                return handler(self, argument)
            if key.startswith("Fn::"):
                raise AssemblyError(f"intrinsic {key} is not supported by the deploy check")
        return {key: self.resolve(item) for key, item in value.items()}

    def ref(self, name: str) -> Any:
        """``Ref``: a pseudo parameter, or a resource's physical name."""
        if name in self._overrides:
            return self._overrides[name]
        if name in _PSEUDO:
            return _PSEUDO[name]
        resource = self._resources.get(name)
        if resource is None:
            raise AssemblyError(f"Ref to {name!r}, which is not in the template")
        kind = resource["Type"]
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}"
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if kind == "AWS::Lambda::LayerVersion":
            return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:layer:{name}:1"
        prop = _NAME_PROPERTIES.get(kind)
        if prop and prop in resource.get("Properties", {}):
            named = self.resolve(resource["Properties"][prop])
            return named["Name"] if isinstance(named, dict) else named
        return name

    def get_att(self, logical_id: str, attribute: str) -> str:
        """``Fn::GetAtt``: the ARNs and names the state machines and environments use."""
        resource = self._resources.get(logical_id)
        if resource is None:
            raise AssemblyError(f"GetAtt of {logical_id!r}, which is not in the template")
        kind = resource["Type"]
        if attribute == "Arn":
            service = kind.split("::")[1].lower()
            arns = {
                "lambda": function_arn(logical_id),
                "sns": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{logical_id}",
                "sqs": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{logical_id}",
                "dynamodb": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{self.ref(logical_id)}",
                "s3": f"arn:{PARTITION}:s3:::{self.ref(logical_id)}",
                "kms": f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{logical_id}",
                "iam": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{logical_id}",
                "stepfunctions": f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:{logical_id}",
                "logs": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{logical_id}:*",
            }
            if service in arns:
                return arns[service]
        if kind in _LATTICE_KINDS and attribute in ("Arn", "Id"):
            # An id of Lattice's form (a prefix and 17 characters), fixed per logical id.
            resource_type, prefix = _LATTICE_KINDS[kind]
            identifier = f"{prefix}-{hashlib.sha256(logical_id.encode()).hexdigest()[:17]}"
            arn = f"arn:{PARTITION}:vpc-lattice:{REGION}:{ACCOUNT}:{resource_type}/{identifier}"
            return arn if attribute == "Arn" else identifier
        if attribute == "QueueName":
            return logical_id
        if attribute == "TopicName":
            return logical_id
        raise AssemblyError(f"GetAtt {logical_id}.{attribute} ({kind}) is not supported by the deploy check")


def _join(resolver: Resolver, argument: Any) -> str:
    separator, parts = argument
    return str(separator).join(str(resolver.resolve(part)) for part in parts)


def _sub(resolver: Resolver, argument: Any) -> str:
    text, variables = (argument, {}) if isinstance(argument, str) else argument
    values = {name: resolver.resolve(value) for name, value in variables.items()}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return str(values[name])
        if "." in name:
            logical_id, attribute = name.split(".", 1)
            return resolver.get_att(logical_id, attribute)
        return str(resolver.ref(name))

    return re.sub(r"\$\{([^}!]+)\}", replace, text)


def _find_in_map(resolver: Resolver, argument: Any) -> Any:
    name, top, second = (resolver.resolve(part) for part in argument)
    try:
        return resolver._mappings[name][top][second]
    except KeyError:
        raise AssemblyError(f"Fn::FindInMap {name}/{top}/{second} is not in the template") from None


def _get_att(resolver: Resolver, argument: Any) -> str:
    logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
    return resolver.get_att(logical_id, attribute)


def _select(resolver: Resolver, argument: Any) -> Any:
    index, items = argument
    return resolver.resolve(items)[int(index)]


_INTRINSICS: Final = {
    "Ref": lambda resolver, argument: resolver.ref(argument),
    "Fn::Join": _join,
    "Fn::Sub": _sub,
    "Fn::FindInMap": _find_in_map,
    "Fn::GetAtt": _get_att,
    "Fn::Select": _select,
}


class CloudAssembly:
    """One stack of a synthesized cloud assembly."""

    def __init__(self, directory: Path, stack_name: str = "WalletLake") -> None:
        self.directory = directory.resolve()
        template_path = self.directory / f"{stack_name}.template.json"
        assets_path = self.directory / f"{stack_name}.assets.json"
        if not template_path.is_file():
            raise AssemblyError(f"no template {template_path.name} in {directory}: synthesize the app first")
        self.template: dict[str, Any] = json.loads(template_path.read_text())
        manifest = json.loads(assets_path.read_text()) if assets_path.is_file() else {}
        files = manifest.get("files", {})
        self._images: dict[str, tuple[Path, str]] = {
            digest: (
                self.directory / entry["source"]["directory"],
                entry["source"].get("dockerFile", "Dockerfile"),
            )
            for digest, entry in manifest.get("dockerImages", {}).items()
        }
        self._assets: dict[str, Path] = {
            f"{digest}.zip": self.directory / entry["source"]["path"]
            for digest, entry in files.items()
            if entry["source"].get("packaging") == "zip"
        }
        self.resolver = Resolver(self.template)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every resource of one CloudFormation type, by logical id."""
        return {
            logical_id: resource
            for logical_id, resource in self.template.get("Resources", {}).items()
            if resource["Type"] == kind
        }

    def _asset(self, content: Mapping[str, Any], owner: str) -> Path:
        key = content.get("S3Key")
        folder = self._assets.get(str(key))
        if folder is None or not folder.is_dir():
            raise AssemblyError(f"{owner}: its code {key} is not a folder asset of {self.directory}")
        return folder

    def image_context(self, image: str) -> tuple[Path, str]:
        """The staged build context and Dockerfile of a container image the template names by tag."""
        digest = image.rsplit(":", 1)[-1]
        if digest not in self._images:
            raise AssemblyError(f"image {image} is not an image asset of {self.directory}")
        return self._images[digest]

    def functions(self) -> list[DeployedFunction]:
        """Every ``AWS::Lambda::Function`` of the template, in template order."""
        found = []
        for logical_id, resource in self.resources("AWS::Lambda::Function").items():
            properties = resource["Properties"]
            layers = []
            for layer in properties.get("Layers", []):
                if isinstance(layer, dict) and set(layer) == {"Ref"}:
                    layer_resource = self.template["Resources"][layer["Ref"]]
                    folder = self._asset(layer_resource["Properties"]["Content"], layer["Ref"])
                    layers.append(Layer(arn=str(self.resolver.ref(layer["Ref"])), folder=folder))
                else:
                    layers.append(Layer(arn=str(self.resolver.resolve(layer)), folder=None))
            variables = properties.get("Environment", {}).get("Variables", {})
            found.append(
                DeployedFunction(
                    logical_id=logical_id,
                    handler=properties["Handler"],
                    runtime=properties["Runtime"],
                    architecture=(properties.get("Architectures") or ["x86_64"])[0],
                    memory_mb=int(properties.get("MemorySize", 128)),
                    timeout_seconds=int(properties.get("Timeout", 3)),
                    ephemeral_mb=int(properties.get("EphemeralStorage", {}).get("Size", 512)),
                    code=self._asset(properties["Code"], logical_id),
                    layers=tuple(layers),
                    environment={
                        name: str(self.resolver.resolve(value)) for name, value in variables.items()
                    },
                )
            )
        return found

    def state_machines(self) -> dict[str, dict[str, Any]]:
        """Every state machine's definition (parsed JSON), by logical id."""
        machines = {}
        for logical_id, resource in self.resources("AWS::StepFunctions::StateMachine").items():
            properties = resource["Properties"]
            text = properties.get("DefinitionString")
            definition = (
                json.loads(self.resolver.resolve(text)) if text is not None else properties["Definition"]
            )
            machines[logical_id] = definition
        return machines
