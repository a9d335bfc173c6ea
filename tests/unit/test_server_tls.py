"""The server's TLS settings and the certificate it makes at start, without a server.

``WALLETLAKE_TLS`` is read like every other server knob (a ``walletlake serve`` flag with the
variable as its default); a certificate file given where it would be ignored, or ``files`` without
both, is refused in one line. A self-signed certificate is a real one (``ssl`` loads it with its
key), private to the server's user, and gone when the server stops.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from contracts.settings import (
    SERVER_VARIABLES,
    TLS_CERT_FILE_VARIABLE,
    TLS_KEY_FILE_VARIABLE,
    TLS_VARIABLE,
    Settings,
    SettingsError,
)
from walletlake.cli import build_parser
from walletlake.tls import SELF_SIGNED_DAYS, self_signed_certificate, server_certificate


def test_tls_is_off_unless_asked_and_each_mode_is_read_from_its_variable() -> None:
    # GIVEN no TLS variable: plain HTTP, as a laptop and the embedded stack run
    assert Settings.from_env({}).tls == "off"
    # THEN each mode reads back, and the files are absolute paths
    assert Settings.from_env({TLS_VARIABLE: "self-signed"}).tls == "self-signed"
    files = Settings.from_env(
        {
            TLS_VARIABLE: "files",
            TLS_CERT_FILE_VARIABLE: "/run/tls/c.pem",
            TLS_KEY_FILE_VARIABLE: "/run/tls/k.pem",
        }
    )
    assert (files.tls, files.tls_cert_file, files.tls_key_file) == (
        "files",
        "/run/tls/c.pem",
        "/run/tls/k.pem",
    )
    assert Settings.from_env(files.to_env()) == files
    # AND a value the server cannot use is refused naming the variable and the value
    with pytest.raises(SettingsError, match=r"WALLETLAKE_TLS must be off or self-signed or files, not 'on'"):
        Settings.from_env({TLS_VARIABLE: "on"})
    with pytest.raises(SettingsError, match=r"WALLETLAKE_TLS_CERT_FILE must be an absolute file path"):
        Settings.from_env({TLS_VARIABLE: "files", TLS_CERT_FILE_VARIABLE: "c.pem"})


def test_certificate_files_are_refused_where_they_would_be_ignored_and_files_needs_both() -> None:
    # GIVEN files named while the server would make its own certificate
    with pytest.raises(SettingsError) as ignored:
        Settings.from_env({TLS_VARIABLE: "self-signed", TLS_CERT_FILE_VARIABLE: "/run/tls/c.pem"})
    # THEN the line says which variable would be ignored and why
    assert (
        str(ignored.value)
        == "WALLETLAKE_TLS_CERT_FILE is read only with WALLETLAKE_TLS=files, not self-signed"
    )
    # AND `files` without the key (or without both) names what is missing
    with pytest.raises(SettingsError, match=r"^WALLETLAKE_TLS=files needs WALLETLAKE_TLS_KEY_FILE$"):
        Settings.from_env({TLS_VARIABLE: "files", TLS_CERT_FILE_VARIABLE: "/run/tls/c.pem"})
    with pytest.raises(SettingsError, match="needs WALLETLAKE_TLS_CERT_FILE and WALLETLAKE_TLS_KEY_FILE"):
        Settings(tls="files").check_tls()


def test_the_tls_variables_are_serve_flags() -> None:
    # GIVEN the command line
    assert {TLS_VARIABLE, TLS_CERT_FILE_VARIABLE, TLS_KEY_FILE_VARIABLE} <= set(SERVER_VARIABLES)
    # WHEN serve is given the flags
    args = build_parser().parse_args(
        ["serve", "--tls", "files", "--tls-cert-file", "/run/tls/c.pem", "--tls-key-file", "/run/tls/k.pem"]
    )
    # THEN they land on the settings fields, read as the variables are
    assert (args.tls, args.tls_cert_file, args.tls_key_file) == ("files", "/run/tls/c.pem", "/run/tls/k.pem")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--tls", "yes"])


def test_a_self_signed_certificate_is_private_and_loads_with_its_key(tmp_path: Path) -> None:
    # GIVEN a certificate made now
    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    made = self_signed_certificate(tmp_path, now=now)
    # THEN both files are the server's user's alone
    for path in (made.cert_file, made.key_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # AND TLS loads them as a pair (uvicorn does exactly this in each worker)
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(made.cert_file, made.key_file)
    # AND the certificate names loopback, for servers only, valid from now for its days
    certificate = x509.load_pem_x509_certificate(made.cert_file.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    assert certificate.not_valid_before_utc <= now < certificate.not_valid_after_utc
    assert certificate.not_valid_after_utc - now == dt.timedelta(days=SELF_SIGNED_DAYS)
    # AND a second certificate is never written over the first (O_EXCL)
    with pytest.raises(FileExistsError):
        self_signed_certificate(tmp_path)


def test_the_server_certificate_lives_in_a_private_folder_while_the_server_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a TMPDIR, as the task's /dev/shm
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    # WHEN the server runs with tls=self-signed
    with server_certificate(Settings(tls="self-signed")) as certificate:
        assert certificate is not None
        folder = certificate.key_file.parent
        # THEN its folder is under TMPDIR and the user's alone
        assert folder.parent == tmp_path
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert certificate.key_file.is_file()
    # AND nothing is left once it stops
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []
    # AND tls=off presents nothing (plain HTTP)
    with server_certificate(Settings()) as none:
        assert none is None


def test_files_that_cannot_be_read_fail_the_start_in_one_line(tmp_path: Path) -> None:
    # GIVEN a CA-issued pair, mounted, and a key that is not there
    made = self_signed_certificate(tmp_path)
    settings = Settings(
        tls="files", tls_cert_file=str(made.cert_file), tls_key_file=str(tmp_path / "gone.key")
    )
    # THEN the start is refused naming the variable and the path
    refused = pytest.raises(
        SettingsError, match=rf"^WALLETLAKE_TLS_KEY_FILE names {tmp_path}/gone.key, which"
    )
    with refused, server_certificate(settings):
        pass
    # AND files that are there are presented as they are, nothing made or removed
    given = settings.replace(tls_key_file=str(made.key_file))
    with server_certificate(given) as certificate:
        assert certificate is not None
        assert (certificate.cert_file, certificate.key_file) == (made.cert_file, made.key_file)
    assert made.key_file.is_file()
    assert os.access(made.cert_file, os.R_OK)
