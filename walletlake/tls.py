"""The certificate ``walletlake serve`` presents when it speaks HTTPS (``WALLETLAKE_TLS``).

Behind VPC Lattice every request reaches a task with the caller's identity in
``x-amzn-lattice-identity``; over plain HTTP that header, and every body, crosses the VPC in clear
text. An HTTPS target group makes Lattice encrypt that hop, and Lattice **validates no target
certificate**: it sets up TLS with whatever certificate the target presents and checks neither its
issuer nor its expiry, so a self-signed one serves; the hop is authenticated at the packet level
instead, which is what keeps a man in the middle out (VPC Lattice User Guide, "Target groups in VPC
Lattice", routing configuration: https://docs.aws.amazon.com/vpc-lattice/latest/ug/target-groups.html).
So a task needs no certificate authority to be encrypted to: :func:`self_signed_certificate` makes
a fresh key and certificate at every start, which never leave the task and die with it (nothing to
store, rotate or leak from a secret store). A caller that does validate (another service reaching
the task directly, an auditor's rule) gets ``files``: a certificate issued by ACM Private CA,
mounted into the task.

The files live in a private temporary folder (``mkdtemp``: mode 0700, under ``TMPDIR``) and are
written 0600, each opened with ``O_EXCL`` so no file placed there earlier is reused;
:func:`server_certificate` removes the folder when the server stops. The deployed task's root
filesystem is read-only, so the CDK app points ``TMPDIR`` at ``/dev/shm`` (memory: the key is never
on a disk). Every uvicorn worker reads the same two files: the supervisor makes them before any
worker starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import ipaddress
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from contracts.settings import TLS_CERT_FILE_VARIABLE, TLS_KEY_FILE_VARIABLE, Settings, SettingsError

_logger = logging.getLogger(__name__)

#: Days a self-signed certificate is valid. Lattice checks no expiry; the bound only keeps a key
#: of a task that somehow runs for years from being presented forever.
SELF_SIGNED_DAYS: Final = 397
#: RSA rather than ECDSA: an RSA certificate is accepted by every TLS 1.2 and 1.3 suite a client's
#: security policy may offer (Lattice's listener policy names the suites of its hop to targets).
RSA_KEY_BITS: Final = 2048
#: Mode of the key and certificate files: the server's user only.
PRIVATE_FILE_MODE: Final = 0o600


@dataclasses.dataclass(frozen=True, slots=True)
class ServerCertificate:
    """The two PEM files uvicorn loads (``ssl_certfile``, ``ssl_keyfile``)."""

    cert_file: Path
    key_file: Path


def self_signed_certificate(folder: Path, *, now: dt.datetime | None = None) -> ServerCertificate:
    """Write a new RSA key and a certificate it signs into ``folder``, both mode 0600.

    The certificate names the task's own host name and the loopback addresses (what the container's
    health check and a person on the task call it); no client checks the names, Lattice included.

    Examples
    --------
    >>> with tempfile.TemporaryDirectory() as folder:  # doctest: +SKIP
    ...     certificate = self_signed_certificate(Path(folder))
    ...     oct(certificate.key_file.stat().st_mode & 0o777)
    '0o600'
    """
    now = now or dt.datetime.now(dt.UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    host = socket.gethostname() or "localhost"
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "walletlake"),
            x509.NameAttribute(NameOID.COMMON_NAME, host[:64]),
        ]
    )
    alternatives: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    if host != "localhost":
        with contextlib.suppress(ValueError):
            alternatives.insert(0, x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    written = ServerCertificate(cert_file=folder / "server.crt", key_file=folder / "server.key")
    _write_private(written.key_file, key_pem)
    _write_private(written.cert_file, certificate.public_bytes(serialization.Encoding.PEM))
    return written


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` 0600 (never an existing file: ``O_EXCL``) and write ``data`` whole."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


@contextlib.contextmanager
def server_certificate(settings: Settings) -> Iterator[ServerCertificate | None]:
    """The certificate the server presents while the block runs (None: ``tls=off``, plain HTTP).

    ``self-signed`` makes one in a fresh private folder, removed on the way out; ``files`` checks
    that both files can be read now, so a missing mount fails the task at start in one line rather
    than in every worker.

    Raises
    ------
    SettingsError
        ``files`` with a file that cannot be read (the variable named).
    """
    settings.check_tls()
    if settings.tls == "off":
        yield None
        return
    if settings.tls == "files":
        given = {TLS_CERT_FILE_VARIABLE: settings.tls_cert_file, TLS_KEY_FILE_VARIABLE: settings.tls_key_file}
        for name, path in given.items():
            if path is None or not os.access(path, os.R_OK):
                raise SettingsError(f"{name} names {path}, which this process cannot read")
        cert_file, key_file = given.values()
        assert cert_file is not None
        assert key_file is not None
        yield ServerCertificate(cert_file=Path(cert_file), key_file=Path(key_file))
        return
    folder = Path(tempfile.mkdtemp(prefix="walletlake-tls-"))
    try:
        certificate = self_signed_certificate(folder)
        _logger.info("event=tls_self_signed folder=%s", folder)
        yield certificate
    finally:
        shutil.rmtree(folder, ignore_errors=True)
