"""Size and pace of the demo (``walletlake demo``'s options and their defaults).

Apart from the demo itself (:mod:`walletlake.demo`: rich, pandas, boto3, the embedded stack), so
that the command line shows the defaults without loading any of them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True, slots=True)
class DemoConfig:
    """Size and pace of the demo; the defaults finish in about a minute on two cores."""

    wallets: int = 200
    deposits_per_wallet: int = 2
    transfers: int = 1_000
    concurrency: int = 8
    seed: int = 20261122
    #: Transaction items expire this long after commit, so TTL deletions happen during the demo.
    hot_ttl_seconds: int = 5
    #: How long to watch DynamoDB Local's TTL sweeper after the workload. It deletes about 20 items
    #: per 10-second sweep (measured here), so the demo shows some expiries, not all of them.
    ttl_wait_seconds: float = 15.0
    output_dir: Path = Path("demo-output")
