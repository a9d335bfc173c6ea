"""The API task, run from the files its image is built from, without Docker.

The synthesized assembly stages the image's build context (``cdk.out/asset.<hash>/``) and names
its Dockerfile. :func:`build_image_root` carries out that Dockerfile's instructions on this machine:
``COPY`` into a folder standing in for the image's root, ``ENV`` and ``WORKDIR`` recorded, and
``RUN pip install --no-deps --only-binary=:all: -r <lock>`` as the same install into the image root's
site-packages, for this machine's architecture (the task runs on ARM64; the same locked versions are
installed here as x86_64 wheels, and :func:`missing_arm64_wheels` proves each has an ARM64 wheel for
the image's glibc). uv's pip interface carries it out, with the .pyc files pip writes in the image:
with ``--no-deps`` and every line pinned, the installed set is the lock's whichever installer unpacks
it, and :func:`build_image_root` checks that it is (pip took 24 s here from an empty cache, uv 2 s).
Any other instruction or pip option fails the check: it would have to be carried out too.

:class:`ContainerProcess` then runs the task definition's command with the task definition's
environment, from a fresh ``python -I -S`` whose ``sys.path`` is exactly the image's
(``PYTHONPATH`` from the Dockerfile, then its site-packages), listening on loopback on a free port
(the one substitution, with the endpoints: ``0.0.0.0:8080`` in the task). When the task definition
turns TLS on (``WALLETLAKE_TLS``), it is spoken to over HTTPS without checking the certificate the
server made at start, as VPC Lattice and the container's health check speak to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final

from contracts.settings import TLS_VARIABLE
from walletlake_cdk.deploy_check.assembly import AssemblyError
from walletlake_cdk.deploy_check.sandbox import folder_bytes
from walletlake_cdk.lambda_code import PIP_PYTHON_VERSION, normalized

BOOTSTRAP: Final = Path(__file__).with_name("container_bootstrap.py")
#: The image's platform, for the ARM64 wheel check: Debian bookworm's glibc 2.36 takes every
#: manylinux wheel up to manylinux_2_36 (uv's name for that set).
ARM64_PLATFORM: Final = "aarch64-manylinux_2_36"
#: The Dockerfile's pip options the image install understands, as uv spells them.
_PIP_OPTIONS: Final = {"--no-deps": ["--no-deps"], "--only-binary=:all:": ["--only-binary", ":all:"]}
#: Options that only tune pip's own output or cache, with nothing to carry out.
_PIP_QUIET: Final = frozenset({"--no-cache-dir", "--quiet", "-q", "--disable-pip-version-check"})


@dataclasses.dataclass(frozen=True, slots=True)
class ImageRoot:
    """What the Dockerfile built: the root folder, the image's environment and its site-packages."""

    root: Path
    site: Path
    environment: dict[str, str]
    workdir: str
    requirement_files: tuple[Path, ...]

    @property
    def python_path(self) -> list[str]:
        """The image's ``PYTHONPATH`` entries, as folders of :attr:`root`."""
        entries = self.environment.get("PYTHONPATH", "")
        return [str(self.root / entry.lstrip("/")) for entry in entries.split(":") if entry]

    @property
    def size_bytes(self) -> int:
        """The image's own files (the base image's Python not counted)."""
        return folder_bytes(self.root)


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        joined.append(pending + stripped)
        pending = ""
    return [
        (text.split(None, 1)[0].upper(), text.split(None, 1)[1] if " " in text else "") for text in joined
    ]


def build_image_root(context: Path, dockerfile: str, cache: Path) -> ImageRoot:
    """Carry out the Dockerfile's instructions into a folder (cached by the context's content).

    The cache outlives a run (``make deploy-check`` and the tests keep it under ``.cache/``): the
    same context builds the same image. A new image is built under a staging name and renamed
    into place once complete, so runs sharing the cache (two test sessions, ``make deploy-check``
    beside them) never see half of one: the first to finish wins and the other's copy is dropped.
    """
    path = context / dockerfile
    digest = hashlib.sha256()
    for file in sorted(context.rglob("*")):
        if file.is_file():
            digest.update(str(file.relative_to(context)).encode())
            digest.update(file.read_bytes())
    root = cache / "images" / digest.hexdigest()[:16]
    recipe = _instructions(path)
    environment: dict[str, str] = {}
    workdir = "/"
    requirements: list[Path] = []
    built = (root / ".built").is_file()
    staging = root
    if not built:
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root.parent))
        (staging / "site-packages").mkdir()
    for instruction, arguments in recipe:
        if instruction in ("FROM", "EXPOSE", "USER", "CMD", "ENTRYPOINT", "LABEL"):
            continue
        if instruction == "ENV":
            for word in shlex.split(arguments):
                name, _, value = word.partition("=")
                environment[name] = value
        elif instruction == "WORKDIR":
            workdir = arguments.strip()
        elif instruction == "COPY":
            *sources, destination = shlex.split(arguments)
            if not built:
                for source in sources:
                    _copy(context / source, staging / destination.lstrip("/"), multiple=len(sources) > 1)
        elif instruction == "RUN":
            words = shlex.split(arguments)
            if words[:2] != ["pip", "install"] or "-r" not in words:
                raise AssemblyError(f"{dockerfile}: the deploy check cannot carry out RUN {arguments!r}")
            lock = words[words.index("-r") + 1].lstrip("/")  # where the COPY above put it
            requirements.append(root / lock)
            if not built:
                install_lock(words[2:], staging / lock, staging / "site-packages", cache)
        else:
            raise AssemblyError(f"{dockerfile}: the deploy check cannot carry out {instruction}")
    if not built:
        (staging / ".built").write_text("ok\n")
        _publish(staging, root)
    return ImageRoot(
        root=root,
        site=root / "site-packages",
        environment=environment,
        workdir=workdir,
        requirement_files=tuple(requirements),
    )


def _publish(staging: Path, target: Path) -> None:
    """Move a finished image into place; an unfinished one left there by a killed run is replaced."""
    if target.is_dir() and not (target / ".built").is_file():
        shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:
        if not (target / ".built").is_file():
            raise
        shutil.rmtree(staging, ignore_errors=True)


def _copy(source: Path, destination: Path, *, multiple: bool) -> None:
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    target = destination / source.name if multiple or str(destination).endswith("/") else destination
    if destination.is_dir():
        target = destination / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def uv_command(arguments: list[str], cache: Path, *, quiet: bool = True) -> subprocess.CompletedProcess[str]:
    """``uv pip install [--quiet] ARGUMENTS`` for this interpreter (uv comes with the dev extra)."""
    beside = Path(sys.executable).with_name("uv")
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    if uv is None:
        raise AssemblyError("the deploy check installs the image's lock with uv: pip install -e '.[dev]'")
    environment = {**os.environ, "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR", str(cache / "uv"))}
    command = [uv, "pip", "install", *(["--quiet"] if quiet else []), "--python", sys.executable, *arguments]
    return subprocess.run(command, env=environment, capture_output=True, text=True, check=False)


def lock_pins(lock: Path) -> dict[str, str]:
    """``{normalized name: version}`` of a lock's ``name==version`` lines."""
    pins = {}
    for line in lock.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            name, _, version = text.partition("==")
            pins[normalized(name.strip())] = version.strip()
    return pins


def installed_pins(site: Path) -> dict[str, str]:
    """``{normalized name: version}`` of the distributions a ``--target`` folder holds."""
    pins = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        pins[normalized(name)] = version
    return pins


def install_lock(arguments: list[str], lock: Path, site: Path, cache: Path) -> None:
    """Carry out the Dockerfile's ``pip install ARGUMENTS`` of ``lock`` into ``site`` with uv.

    Only the pip options uv can carry out the same way are accepted, and the result must hold
    exactly the lock's pins. Nothing is compiled at install: the task's ``python -I`` ignores
    ``PYTHONDONTWRITEBYTECODE`` and writes the .pyc files of what it imports, once, into the
    cached image; compiling all of site-packages first took 12.9 CPU-seconds of a cold check.
    """
    flags = [word for word in arguments if word.startswith("-") and word != "-r"]
    unknown = [flag for flag in flags if flag not in _PIP_OPTIONS and flag not in _PIP_QUIET]
    if unknown:
        raise AssemblyError(f"the deploy check cannot carry out pip's {' '.join(unknown)}")
    options = [word for flag in flags for word in _PIP_OPTIONS.get(flag, [])]
    completed = uv_command([*options, "--target", str(site), "-r", str(lock)], cache)
    if completed.returncode != 0:
        raise AssemblyError(f"could not install the image's lock {lock.name}:\n{completed.stderr[-2000:]}")
    wanted, found = lock_pins(lock), installed_pins(site)
    if found != wanted:
        differences = sorted(set(wanted.items()) ^ set(found.items()))
        raise AssemblyError(f"the image's site-packages differ from {lock.name}: {differences}")


def missing_arm64_wheels(lock: Path, cache: Path) -> list[str]:
    """Requirements of ``lock`` with no wheel for the image's ARM64 platform (empty: all have one).

    uv resolves the pinned requirements, binary only, for :data:`ARM64_PLATFORM` without
    installing anything (``--dry-run``: the index's metadata only) and says what it would
    install. A lock found complete is remembered under ``cache/arm64-wheels``, by its content and
    the platform: a published wheel of a pinned version stays published, so the same lock is not
    asked about again. Anything else (a wheel missing, uv failing) is asked again next time.
    """
    key = hashlib.sha256("\n".join([ARM64_PLATFORM, lock.read_text()]).encode()).hexdigest()[:16]
    complete = cache / "arm64-wheels" / f"{key}.ok"
    if complete.is_file():
        return []
    with tempfile.TemporaryDirectory() as scratch:
        completed = uv_command(
            [
                "--dry-run",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-platform",
                ARM64_PLATFORM,
                "--python-version",
                PIP_PYTHON_VERSION,
                "--target",
                str(Path(scratch) / "target"),
                "-r",
                str(lock),
            ],
            cache,
            quiet=False,  # the "+ name==version" lines it would install are the answer
        )
    if completed.returncode != 0:
        return [line for line in completed.stderr.splitlines() if line.strip()][:20] or ["uv failed"]
    found = {
        normalized(line.split("==")[0].lstrip(" +"))
        for line in completed.stderr.splitlines()
        if line.lstrip().startswith("+ ")
    }
    missing = [name for name in lock_pins(lock) if name not in found]
    if not missing:
        complete.parent.mkdir(parents=True, exist_ok=True)
        complete.write_text(f"{lock.name}: every requirement has a wheel for {ARM64_PLATFORM}\n")
    return missing


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ContainerProcess:
    """The task's command running from the image's files, on loopback."""

    def __init__(
        self, image: ImageRoot, command: list[str], environment: dict[str, str], log_path: Path
    ) -> None:
        self.image = image
        self.port = free_port()
        self.command = _on_loopback(command, self.port)
        self.environment = {**image.environment, **environment}
        self.environment.pop("PYTHONPATH", None)  # -I ignores it; the bootstrap puts it on sys.path
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.started_seconds: float | None = None
        #: Whether the task definition turns TLS on: the server then speaks HTTPS only.
        self.tls = self.environment.get(TLS_VARIABLE, "off") not in ("", "off")
        self._context = unverified_context() if self.tls else None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, or ``https://`` when the task speaks TLS."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        """Start it and wait until ``/healthz`` answers (the container health check's request)."""
        if self.command[:3] != ["python", "-m", "walletlake.cli"]:
            raise AssemblyError(f"unexpected container command {self.command}")
        paths = [*self.image.python_path, str(self.image.site)]
        argv = [sys.executable, "-I", "-S", str(BOOTSTRAP), json.dumps(paths), *self.command[2:]]
        started = time.monotonic()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(argv, env=self.environment, stdout=log, stderr=log)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssemblyError(f"the container exited with {self.process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(  # noqa: S310
                    f"{self.url}/healthz", timeout=2, context=self._context
                ) as answer:
                    if answer.status == 200:
                        self.started_seconds = time.monotonic() - started
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        raise AssemblyError(
            f"the container did not answer /healthz within {timeout:.0f} s: {self.log_tail()}"
        )

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """One HTTP request straight to the task (no front); the status and body."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310  # http://127.0.0.1 only
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"content-type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as answer:  # noqa: S310
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as ECS stops a task, and the exit code (killed after ``timeout``: -9)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9

    def peak_memory_mb(self) -> float:
        """The server processes' resident memory now (the parent and its workers), MB."""
        assert self.process is not None
        total = 0
        pids = [self.process.pid, *_children(self.process.pid)]
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024

    def log_tail(self) -> str:
        """The last lines of the container's output."""
        return self.log_path.read_text(errors="replace")[-2000:] if self.log_path.is_file() else ""


def unverified_context() -> ssl.SSLContext:
    """A client context that encrypts and checks no certificate: what VPC Lattice sends a target."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == pid:
                    found.append(int(status.parent.name))
        except OSError:
            continue
    return found


def _on_loopback(command: list[str], port: int) -> list[str]:
    """The command with ``--host`` 127.0.0.1 and ``--port`` a free one (tests bind loopback only)."""
    result = list(command)
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag in result:
            result[result.index(flag) + 1] = value
        else:
            result.extend([flag, value])
    return result
