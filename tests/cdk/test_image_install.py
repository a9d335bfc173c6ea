"""The deploy check's stand-in for the API image's ``RUN pip install -r <lock>``.

uv carries the Dockerfile's install out (``walletlake_cdk.deploy_check.container``); these tests hold
what makes that a faithful stand-in: the installed set is exactly the lock's, a pip option it cannot
carry out is refused, and the ARM64 check finds a requirement with no wheel for the image.
They ask the package registry (as the layers' installs do); uv's cache keeps what it fetched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from walletlake_cdk.deploy_check.assembly import AssemblyError
from walletlake_cdk.deploy_check.container import (
    install_lock,
    installed_pins,
    lock_pins,
    missing_arm64_wheels,
)

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "deploy-check"


@pytest.fixture(autouse=True)
def _uv_cache_in_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """uv's cache where the Makefile puts it, when these tests run outside make."""
    import os

    monkeypatch.setenv("UV_CACHE_DIR", os.environ.get("UV_CACHE_DIR", str(ROOT / ".cache" / "uv")))


def _lock(tmp_path: Path, *lines: str) -> Path:
    lock = tmp_path / "requirements.txt"
    lock.write_text("# a lock\n" + "\n".join(lines) + "\n")
    return lock


def test_the_image_install_holds_exactly_the_locked_versions(tmp_path: Path) -> None:
    lock = _lock(tmp_path, "six==1.17.0", "jmespath==1.1.0  # pinned")
    site = tmp_path / "site"
    install_lock(["--no-deps", "--only-binary=:all:", "--no-cache-dir", "-r", "lock"], lock, site, CACHE)
    assert installed_pins(site) == lock_pins(lock) == {"six": "1.17.0", "jmespath": "1.1.0"}
    assert (site / "six.py").is_file()
    assert (site / "jmespath" / "__init__.py").is_file()


def test_a_pip_option_the_stand_in_cannot_carry_out_is_refused(tmp_path: Path) -> None:
    lock = _lock(tmp_path, "six==1.17.0")
    with pytest.raises(AssemblyError, match="--upgrade"):
        install_lock(["--no-deps", "--upgrade", "-r", "lock"], lock, tmp_path / "site", CACHE)
    assert not (tmp_path / "site").exists()


def test_a_requirement_with_no_arm64_wheel_is_named_and_the_lock_is_not_remembered(tmp_path: Path) -> None:
    # psycopg2 publishes no Linux wheel (its Linux wheels are psycopg2-binary's)
    lock = _lock(tmp_path, "six==1.17.0", "psycopg2==2.9.10")
    missing = missing_arm64_wheels(lock, tmp_path)
    assert any("psycopg2" in line for line in missing), missing
    assert not (tmp_path / "arm64-wheels").exists()


def test_a_lock_whose_every_requirement_has_an_arm64_wheel_is_remembered(tmp_path: Path) -> None:
    lock = _lock(tmp_path, "six==1.17.0", "orjson==3.13.0")
    assert missing_arm64_wheels(lock, tmp_path) == []
    assert len(list((tmp_path / "arm64-wheels").glob("*.ok"))) == 1
