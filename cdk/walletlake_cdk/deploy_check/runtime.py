"""The Lambda Python 3.11 runtime's own SDK, rebuilt for the sandbox.

The managed runtime carries boto3 and its dependencies in
``/var/lang/lib/python3.11/site-packages``, after every layer on ``sys.path``
(https://docs.aws.amazon.com/lambda/latest/dg/python-package.html#python-package-searchpath).
Its version depends on the runtime release and the Region and is not published any more
(https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html#python-sdk-included), so the
sandbox uses the boto3 release the project is tested with, installed for Lambda's platform by the
same pip step as the layers.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import tempfile
from pathlib import Path

from walletlake_cdk.lambda_code import CACHE_ROOT, RUNTIME_DISTRIBUTIONS, pip_install_for_lambda


def runtime_requirements() -> tuple[str, ...]:
    """``boto3==…`` and ``botocore==…`` at the versions installed here."""
    return tuple(f"{name}=={importlib.metadata.version(name)}" for name in ("boto3", "botocore"))


def runtime_folder(cache_root: Path = CACHE_ROOT) -> Path:
    """A folder holding boto3 and its dependencies (and nothing else), cached by version."""
    requirements = runtime_requirements()
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    target = cache_root / "lambda-runtime" / digest
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    pip_install_for_lambda(requirements, staging, cache_root / "pip")
    installed = {path.name.split("-")[0].lower().replace("_", "-") for path in staging.glob("*.dist-info")}
    unexpected = installed - RUNTIME_DISTRIBUTIONS
    if unexpected:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"boto3 brought {sorted(unexpected)}, which RUNTIME_DISTRIBUTIONS does not list")
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target
