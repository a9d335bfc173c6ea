"""What a ``WALLETLAKE_*`` variable holds when unset, and what its text may be: the defaults, one
:class:`Variable` per variable, and the parsers that read its text (each raising
:class:`ValueError` on text it cannot take, which :meth:`Variable.read` turns into one line naming
the variable).

Apart from :mod:`contracts.settings` (which lists the rows, :data:`contracts.settings.VARIABLES`)
so that the settings object and its table of variables stay readable; the parsers are pure.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Callable, Iterable
from typing import Final, Literal

QueryEngine = Literal["duckdb", "athena"]

#: Eight hours: the hot window of seed 000, after which DynamoDB's TTL removes transaction items
#: and the lake becomes the only history.
DEFAULT_HOT_TTL_SECONDS = 8 * 60 * 60

#: Two days: how long a nonce is remembered (seed 000 keeps its nonces 2 days), by an idempotency
#: record of its own (``contracts.idempotency_table``), whatever became of the hot
#: transaction item. Never shorter than the hot TTL: a nonce forgotten while its transaction item is
#: still in the table would make a second request with it a replay of the first by chance alone.
DEFAULT_IDEMPOTENCY_WINDOW_SECONDS: Final = 2 * 24 * 60 * 60

#: Transactions one API process keeps in flight (``bench/hot_wallet.py`` measures the choice).
DEFAULT_WRITES_IN_FLIGHT = 2

#: Where ``walletlake serve`` listens unless told otherwise: loopback, so a laptop never exposes the
#: API by accident; the container's environment says ``0.0.0.0`` (the load balancer reaches the task).
DEFAULT_BIND_HOST: Final = "127.0.0.1"

#: Seconds from SIGTERM to exit: a load balancer's deregistration delay must be longer (ALB's default
#: is 300 s; walletlake's deployment sets 30 s), so no request is routed to a server that has left.
DEFAULT_DRAIN_SECONDS: Final = 25
#: The smallest drain bound: one second for requests, two for the commit queue and the last metrics.
MIN_DRAIN_SECONDS: Final = 3

#: Seconds an idle keep-alive connection stays open: longer than the load balancer's idle timeout
#: (ALB's default is 60 s), so the balancer, never the server, closes an idle connection and never
#: sends a request down one the server is closing.
DEFAULT_KEEP_ALIVE_SECONDS: Final = 65

#: Requests one API process serves at once before it answers 429 (admission control). At the
#: 500-700 requests/s one process serves, 128 in flight is about 200 ms of waiting.
DEFAULT_MAX_REQUESTS_IN_FLIGHT: Final = 128

#: Seconds between two embedded-metric-format lines of one API process (0: none).
DEFAULT_METRICS_INTERVAL_SECONDS: Final = 60

#: Minutes one compaction unit may span (:mod:`lake.compaction_units`): whole five-minute slots
#: that divide an hour, so units tile a day.
COMPACTION_UNIT_MINUTES_CHOICES: Final = (5, 10, 15, 20, 30, 60)
DEFAULT_COMPACTION_UNIT_MINUTES: Final = 60

#: Parallel-scan segments of the AWS nightly snapshot (:mod:`lake.snapshots`), at
#: most as many as a Distributed Map runs at once.
DEFAULT_SNAPSHOT_SEGMENTS: Final = 4
MAX_SNAPSHOT_SEGMENTS: Final = 10_000

#: Days a night's tags keep the Iceberg snapshots it read (``reconciled-{day}``, ``night-…``:
#: replays and audits), a year and a month; at least two, so a night's run and a rerun keep them.
DEFAULT_AUDIT_TAG_RETENTION_DAYS: Final = 400

#: How the stream's tables (ledger, wallets, quarantine) are kept: ``iceberg`` tables committed by one
#: committer (:mod:`lake.committer`), or the older plain Parquet under ``dt=`` prefixes.
LakeFormat = Literal["parquet", "iceberg"]
DEFAULT_LAKE_FORMAT: Final = "iceberg"
#: Seconds between two commits of the committer: each commit appends everything landed since the
#: last one, so this is the lake's freshness bound and one table's commit rate (one per interval).
DEFAULT_COMMIT_INTERVAL_SECONDS: Final = 30

#: Whose identity headers the API believes (:mod:`wallet.principals`): ``none`` (every write is
#: attributed to ``default_principal``; identity headers are ignored, since any client can send
#: them), ``lattice`` (VPC Lattice's ``x-amzn-lattice-identity``, on the ECS tasks only Lattice
#: reaches) or ``apigateway`` (the IAM identity API Gateway verified, in the Lambda event).
TrustFront = Literal["none", "lattice", "apigateway"]
DEFAULT_TRUST_FRONT: Final = "none"
#: Who a write is attributed to when no front vouches for its caller (a laptop, the embedded stack).
DEFAULT_PRINCIPAL: Final = "local"

#: Where the AWS reconciliation's UNLOADs write, under the workgroup's results prefix.
DEFAULT_UNLOAD_PREFIX: Final = "athena-results/unload/reconcile"


class SettingsError(ValueError):
    """A ``WALLETLAKE_*`` variable is missing or holds a value walletlake cannot use."""


# Named as its public home, :mod:`contracts.settings`, in tracebacks (a Lambda's init error line).
SettingsError.__module__ = "contracts.settings"


@dataclasses.dataclass(frozen=True, slots=True)
class Variable:
    """One ``WALLETLAKE_*`` variable: the :class:`contracts.settings.Settings` field it sets and how
    its text is read.

    Attributes
    ----------
    name:
        The variable.
    field:
        The :class:`contracts.settings.Settings` field it sets.
    expects:
        What a usable value is, for the error (``"an integer in 1..1000"``).
    meaning:
        One line for ``--help`` and the README, with the default.
    parse:
        Text (never empty) to the field's value; raises :class:`ValueError` when it is not
        ``expects``.
    """

    name: str
    field: str
    expects: str
    meaning: str
    parse: Callable[[str], object] = str

    def read(self, text: str) -> object:
        """The field's value for ``text``, or :class:`SettingsError` naming the variable and the text."""
        try:
            return self.parse(text)
        except ValueError:
            # repr() keeps the message on one line whatever the value holds
            raise SettingsError(f"{self.name} must be {self.expects}, not {text!r}") from None


def integer_in(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text) if text.isascii() and text.isdigit() else low - 1
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value

    return parse


def one_of(choices: Iterable[object]) -> Callable[[str], object]:
    by_text = {str(choice): choice for choice in choices}

    def parse(text: str) -> object:
        if text not in by_text:
            raise ValueError(text)
        return by_text[text]

    return parse


def positive_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(text)
    return value


def key_prefix(text: str) -> str:
    """A key prefix inside the bucket, without its surrounding slashes."""
    prefix = text.strip("/")
    if not prefix or "://" in prefix or any(character.isspace() for character in prefix):
        raise ValueError(text)
    return prefix


def http_url(text: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", text):
        raise ValueError(text)
    return text.rstrip("/")


KEY_PREFIX_TEXT = "a key prefix inside the bucket (no s3://, no spaces)"

_HOST_LABEL: Final = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME: Final = re.compile(rf"{_HOST_LABEL}(\.{_HOST_LABEL})*")


def principal_name(text: str) -> str:
    if len(text) > 256 or not text.isprintable():
        raise ValueError(text)
    return text


def on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise ValueError(text)
    return text == "on"


def host_or_address(text: str) -> str:
    """An IP address (``0.0.0.0``, ``::``) or a host name to listen on."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        if len(text) > 253 or not _HOSTNAME.fullmatch(text):
            raise
        return text
