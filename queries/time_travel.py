"""Reading the Iceberg tables as of recorded snapshots: what makes a past night's reconciliation reproducible.

A reconciliation records, per Iceberg table, the snapshot id it read (:func:`current_versions`).
Rerunning it reads those snapshots instead of the tables' current state: on Athena every reference
to a pinned table gets Trino's ``FOR VERSION AS OF <id>`` (:func:`pin_versions`, one parse of the
rendered SQL by sqlglot); on DuckDB the table's view reads ``iceberg_scan`` at that snapshot
(:mod:`queries._duckdb`). The snapshots a night reads are tagged when the night is planned, before
anything reads them (:func:`pin_night`), and again ``reconciled-{day}`` once a day is recorded
(:func:`tag_versions`), so snapshot expiry keeps them (and their files) for the audit retention
(``WALLETLAKE_AUDIT_TAG_RETENTION_DAYS``, :mod:`lake.snapshot_tags`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from contracts.lake_tables import STREAM_TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from contracts.settings import Settings

#: Per Iceberg table, the snapshot id a query reads; None for a table that had no snapshot yet
#: (read as empty on DuckDB; Athena cannot pin "no snapshot", so it reads such a table as it is).
LakeVersions = Mapping[str, int | None]


def pin_versions(sql: str, versions: LakeVersions) -> str:
    """Trino SQL reading each pinned table ``FOR VERSION AS OF`` its snapshot (CTEs untouched).

    Examples
    --------
    >>> pin_versions("WITH l AS (SELECT * FROM ledger) SELECT * FROM l JOIN wallets w ON true", {"ledger": 7})
    'WITH l AS (SELECT * FROM ledger FOR VERSION AS OF 7) SELECT * FROM l JOIN wallets AS w ON TRUE'
    """
    if not versions:
        return sql
    tree = sqlglot.parse_one(sql, read="trino")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if table.name in versions and table.name not in ctes and not table.db:
            version = exp.Version(
                this="VERSION", kind="AS OF", expression=exp.Literal.number(versions[table.name])
            )
            table.set("version", version)
    return tree.sql(dialect="trino")


def split_versions(sql: str) -> tuple[str, dict[str, int]]:
    """Trino SQL without its ``FOR VERSION AS OF`` clauses, and the versions they named.

    What lets an engine without Trino's syntax (DuckDB, which pins a table by its view) run the
    very statements Athena runs. A table pinned to two snapshots in one statement is refused, as
    is ``FOR TIMESTAMP AS OF`` (pin by :func:`versions_as_of` instead).

    Examples
    --------
    >>> split_versions("SELECT * FROM ledger FOR VERSION AS OF 7 AS l")
    ('SELECT * FROM ledger AS l', {'ledger': 7})
    """
    tree = sqlglot.parse_one(sql, read="trino")
    versions: dict[str, int] = {}
    for table in tree.find_all(exp.Table):
        version = table.args.get("version")
        if version is None:
            continue
        if str(version.this).upper() != "VERSION" or not isinstance(version.expression, exp.Literal):
            raise ValueError(
                f"{table.name}: only FOR VERSION AS OF <snapshot id> can be read here, not {version.sql()}"
            )
        snapshot = int(version.expression.this)
        if versions.setdefault(table.name, snapshot) != snapshot:
            raise ValueError(f"{table.name} is read at two snapshots in one statement")
        table.set("version", None)
    return (tree.sql(dialect="trino"), versions) if versions else (sql, {})


def current_versions(settings: Settings, catalog: Catalog | None = None) -> dict[str, int | None]:
    """The current snapshot id of every Iceberg table (None for one never committed to): what a run
    records so that it can be read again exactly, an empty table as empty."""
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import identifier

    catalog = catalog or cached_catalog(settings)
    versions: dict[str, int | None] = {}
    for name in STREAM_TABLES:
        snapshot = catalog.load_table(identifier(settings.glue_database, name)).current_snapshot()
        versions[name] = snapshot.snapshot_id if snapshot is not None else None
    return versions


def versions_as_of(
    settings: Settings, moment: dt.datetime, catalog: Catalog | None = None
) -> dict[str, int | None]:
    """Per Iceberg table, the snapshot that was current at ``moment`` (None: the table had none then).

    What "the lake as we knew it at 09:00 on the 3rd" reads, as long as the snapshots of then are
    kept (a tag keeps one; expiry removes untagged ones after ``DEFAULT_SNAPSHOT_AGE_SECONDS``);
    an instant whose snapshot expired is refused, never answered with another snapshot.
    """
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import SNAPSHOT_RETENTION_HOURS, identifier
    from lake.snapshot_log import snapshot_at

    catalog = catalog or cached_catalog(settings)
    at_ms = int(moment.astimezone(dt.UTC).timestamp() * 1000)
    versions: dict[str, int | None] = {}
    for name in STREAM_TABLES:
        metadata = catalog.load_table(identifier(settings.glue_database, name)).metadata
        # exact or refused in one line (lake.snapshot_log.NotRetainedError, a ValueError)
        versions[name] = snapshot_at(metadata, at_ms, table=name, retention_hours=SNAPSHOT_RETENTION_HOURS)
    return versions


def pin_night(settings: Settings, day: dt.date, catalog: Catalog | None = None) -> dict[str, int | None]:
    """The current snapshot of every Iceberg table, each tagged ``night-{day}-{id}`` before it is
    returned (:func:`lake.snapshot_tags.night_tag`): what a night's planning pins, protected
    before anything reads it, so no expiry can remove it while the night (or a rerun of it) runs,
    and a replay finds it as long as the tag lives. Planning again with the same snapshots
    changes nothing."""
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import identifier
    from lake.snapshot_tags import DAY_MS, keep_tag, night_tag

    catalog = catalog or cached_catalog(settings)
    versions: dict[str, int | None] = {}
    for name in STREAM_TABLES:
        table = catalog.load_table(identifier(settings.glue_database, name))
        snapshot = table.current_snapshot()
        versions[name] = snapshot.snapshot_id if snapshot is not None else None
        if snapshot is not None:
            retention_ms = settings.audit_tag_retention_days * DAY_MS
            keep_tag(
                table, snapshot.snapshot_id, night_tag(day, snapshot.snapshot_id), max_ref_age_ms=retention_ms
            )
    return versions


def gone_versions(settings: Settings, versions: LakeVersions, catalog: Catalog | None = None) -> list[str]:
    """The tables whose pinned snapshot no longer exists (its tags expired with the retention)."""
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import identifier

    catalog = catalog or cached_catalog(settings)
    gone = []
    for name, snapshot_id in versions.items():
        table = catalog.load_table(identifier(settings.glue_database, name))
        if snapshot_id is not None and table.metadata.snapshot_by_id(snapshot_id) is None:
            gone.append(name)
    return gone


def tag_versions(
    settings: Settings, versions: LakeVersions, tag: str, catalog: Catalog | None = None
) -> None:
    """Tag each table's snapshot ``tag`` (replacing an older tag of that name), kept for the audit
    retention (``WALLETLAKE_AUDIT_TAG_RETENTION_DAYS``).

    Raises :class:`lake.snapshot_tags.SnapshotGoneError` (a ``ValueError``) when a snapshot is no
    longer in its table: a tag is never moved onto another snapshot in its place."""
    from lake.iceberg_catalog import cached_catalog
    from lake.iceberg_tables import identifier
    from lake.snapshot_tags import DAY_MS, set_tag

    catalog = catalog or cached_catalog(settings)
    for name, snapshot_id in versions.items():
        if snapshot_id is None:
            continue
        table = catalog.load_table(identifier(settings.glue_database, name))
        set_tag(table, snapshot_id, tag, max_ref_age_ms=settings.audit_tag_retention_days * DAY_MS)
