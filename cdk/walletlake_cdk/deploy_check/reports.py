"""The deploy check's report: one line per deployed function, and the API task's."""

from __future__ import annotations

import dataclasses

from walletlake_cdk.deploy_check.sandbox import UNZIPPED_LIMIT_BYTES


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerReport:
    """The API task's line of the report."""

    logical_id: str
    image_bytes: int
    start_seconds: float
    memory_mb: int
    missing_arm64: tuple[str, ...]
    peak_rss_mb: float = 0.0
    exit_code: int | None = None

    @property
    def passed(self) -> bool:
        """Started, answered, stopped cleanly on SIGTERM, within memory, every wheel on ARM64."""
        return not self.missing_arm64 and self.exit_code == 0 and self.peak_rss_mb <= self.memory_mb

    def line(self) -> str:
        """The task's line, in the functions' columns."""
        result = "ok (served the API, exited 0 on SIGTERM)" if self.passed else "FAILED"
        if self.missing_arm64:
            result += f" no ARM64 wheel: {', '.join(self.missing_arm64)}"
        if self.exit_code not in (0, None):
            result += f" exit {self.exit_code}"
        return (
            f"{self.logical_id + ' (task)':<36} {self.image_bytes / 2**20:6.1f} MB image   "
            f"start {self.start_seconds:5.2f} s  "
            f"memory {self.peak_rss_mb:6.0f} / {self.memory_mb:>5} MB  {result}"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionReport:
    """One line of the check's report."""

    logical_id: str
    handler: str
    memory_mb: int
    unzipped_bytes: int
    import_seconds: float | None
    max_rss_mb: float
    invocations: int
    failures: int
    last_error: str | None

    @property
    def passed(self) -> bool:
        """Invoked, never failed, within the size and memory limits."""
        return (
            self.invocations > 0
            and self.failures == 0
            and self.unzipped_bytes <= UNZIPPED_LIMIT_BYTES
            and self.max_rss_mb <= self.memory_mb
        )

    def line(self) -> str:
        """``name  size  import  memory  result``: what ``make deploy-check`` prints."""
        imported = f"{self.import_seconds:5.2f} s" if self.import_seconds is not None else "   —   "
        if self.invocations == 0:
            result = "NOT INVOKED"
        elif self.failures:
            result = f"FAILED {self.failures}/{self.invocations}: {self.last_error}"
        else:
            result = f"ok ({self.invocations} invocation{'s' if self.invocations != 1 else ''})"
        if self.unzipped_bytes > UNZIPPED_LIMIT_BYTES:
            result += " OVER 250 MB"
        if self.max_rss_mb > self.memory_mb:
            result += " OVER MemorySize"
        return (
            f"{self.logical_id:<36} {self.unzipped_bytes / 2**20:6.1f} / 250 MB  import {imported}  "
            f"memory {self.max_rss_mb:6.0f} / {self.memory_mb:>5} MB  {result}"
        )
