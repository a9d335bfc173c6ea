"""A lost catalog rebuilt from the lake's own files: each table registered from its newest metadata
file, with its schemas, snapshots, refs and properties (the committer's progress among them).

The metadata files are the table: the catalog only points at the newest one. When the catalog's
entries are gone (a Glue database deleted, the embedded stack's catalog wiped) the files still hold
everything, and creating an empty table in their place would carry on over the history (3 of 15
entries visible, and on AWS an orphan-file deletion would then remove the rest). So provisioning
never creates a table where one's metadata already is (:func:`lake.iceberg_tables.ensure_tables`
refuses in one line naming ``walletlake lake register``), and :func:`register_tables` puts each
such table back.

Registration is the REST protocol's ``register`` (a catalog that implements it takes the file as
it is). SeaweedFS's catalog answers it with an empty table pointing at the file (no schema, no
snapshot), so whatever the registered table lacks is committed onto it from the file, as the
protocol's own table updates (schemas, partition specs, sort orders, properties, snapshots in
sequence order, refs); the result is then compared with the file and refused in one line if it
still differs. Nothing is rewritten: the data and manifest files are the ones the file names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from contracts.lake_tables import STREAM_TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableUpdate

T = TypeVar("T")

#: The folder of a table's location holding its metadata files.
METADATA_FOLDER: Final = "metadata"
#: The command that registers lost tables again, named by every refusal to create one.
REGISTER_COMMAND: Final = "walletlake lake register"
#: A metadata file's name: ``v12.metadata.json`` (SeaweedFS, pyiceberg's SQL catalog writes
#: ``00012-uuid.metadata.json`` as Iceberg's Java library does); the number orders them.
_METADATA_NAME: Final = re.compile(r"^v?(\d+)(?:-[^/]*)?\.metadata\.json$")


class RegisterError(RuntimeError):
    """A table could not be registered as its metadata file describes it (one line: which, why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Registered:
    """What registering one table did: ``state`` is ``registered``, ``in the catalog`` (nothing to
    do), ``no metadata`` (no file under its location: provisioning creates it) or ``would register``
    (a dry run)."""

    table: str
    state: str
    metadata: str = ""
    snapshots: int = 0
    restored: int = 0  # table updates committed after the catalog's own registration

    def line(self) -> str:
        """One line for a person."""
        detail = f" from {self.metadata} ({self.snapshots} snapshots)" if self.metadata else ""
        restored = f"; {self.restored} table updates restored from the file" if self.restored else ""
        return f"{self.table}: {self.state}{detail}{restored}"


def table_location(catalog: Catalog, namespace: str, table: str, location_root: str | None) -> str | None:
    """Where ``table`` lives: ``{location_root}/{table}`` where provisioning places the tables (AWS:
    the lake bucket's ``iceberg/`` folder), else where the catalog places a table itself: a
    warehouse that is a bucket's name (SeaweedFS's table bucket) at
    ``s3://{warehouse}/{namespace}/{table}``, a warehouse that is a URI (pyiceberg's SQL catalog)
    at ``{warehouse}/{namespace}.db/{table}``; None for a catalog without a warehouse.

    Examples
    --------
    >>> from types import SimpleNamespace as Catalog
    >>> table_location(Catalog(properties={"warehouse": "walletlake-tables"}), "ns", "ledger", None)
    's3://walletlake-tables/ns/ledger'
    >>> table_location(Catalog(properties={}), "ns", "ledger", "s3://lake/lake/iceberg/")
    's3://lake/lake/iceberg/ledger'
    """
    if location_root:
        return f"{location_root.rstrip('/')}/{table}"
    warehouse = catalog.properties.get("warehouse")
    if not warehouse:
        return None
    if "://" in warehouse:
        return f"{warehouse.rstrip('/')}/{namespace}.db/{table}"
    return f"s3://{warehouse}/{namespace}/{table}"


def lost_table(catalog: Catalog, namespace: str, table: str, location_root: str | None) -> str | None:
    """The newest metadata file of a table the catalog does not hold (the caller checked), or None
    when its location holds none: where provisioning must not create it (one line:
    :func:`refusal`)."""
    location = table_location(catalog, namespace, table, location_root)
    return latest_metadata(catalog, location) if location is not None else None


def refusal(namespace: str, table: str, metadata: str) -> str:
    """The one line provisioning gives instead of creating a table over its own history."""
    return (
        f"REFUSED iceberg table {namespace}.{table}: not in the catalog, but its metadata is at {metadata}; "
        f"nothing created: run `{REGISTER_COMMAND}` to register it from its files"
    )


def latest_metadata(catalog: Catalog, location: str) -> str | None:
    """The newest metadata file under ``{location}/metadata/`` (by the number its name starts
    with), or None when there is none: listed through the catalog's own file IO, so the same
    credentials and endpoint reach it."""
    from pyarrow.fs import FileSelector, FileType
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import PyArrowFileIO

    folder = f"{location.rstrip('/')}/{METADATA_FOLDER}"
    io = load_file_io(catalog.properties, folder)
    if not isinstance(io, PyArrowFileIO):
        raise RegisterError(
            f"cannot list {folder}: the catalog's file IO is {type(io).__name__}, not pyarrow's"
        )
    scheme, netloc, path = PyArrowFileIO.parse_location(folder)
    infos = io.fs_by_scheme(scheme, netloc).get_file_info(FileSelector(path, allow_not_found=True))
    numbered = [
        (version, info.base_name)
        for info in infos
        if info.type == FileType.File and (version := metadata_version(info.base_name)) is not None
    ]
    return f"{folder}/{max(numbered)[1]}" if numbered else None


def metadata_version(name: str) -> int | None:
    """The number a metadata file's name gives it (None: not a metadata file).

    Examples
    --------
    >>> metadata_version("v12.metadata.json"), metadata_version("00012-5f1c.metadata.json")
    (12, 12)
    >>> metadata_version("snap-1-0-a.avro") is None
    True
    """
    match = _METADATA_NAME.match(name)
    return int(match.group(1)) if match else None


def register_tables(
    catalog: Catalog,
    namespace: str,
    location_roots: Sequence[str | None] = (None,),
    *,
    tables: Iterable[str] = tuple(STREAM_TABLES),
    dry_run: bool = False,
) -> list[Registered]:
    """Register every lake table the catalog lacks from its newest metadata file; one
    :class:`Registered` per table. Idempotent: a table in the catalog is left as it is.

    ``location_roots``: where to look for a table's files, in order (:func:`table_location`; None:
    where the catalog places tables itself); the first holding a metadata file wins.

    Raises
    ------
    RegisterError
        A table registered but still unlike its file (the catalog refused an update).
    """
    import contextlib

    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

    done: list[Registered] = []
    if not dry_run:
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(namespace)
    for name in tables:
        try:
            catalog.load_table((namespace, name))
            done.append(Registered(name, "in the catalog"))
            continue
        except NoSuchTableError:
            pass
        found = next(
            (file for root in location_roots if (file := lost_table(catalog, namespace, name, root))), None
        )
        if found is None:
            done.append(Registered(name, "no metadata"))
            continue
        wanted = read_metadata(catalog, found)
        if dry_run:
            done.append(Registered(name, "would register", found, len(wanted.snapshots)))
            continue
        restored = register_one(catalog, (namespace, name), found, wanted)
        done.append(Registered(name, "registered", found, len(wanted.snapshots), restored))
    return done


def read_metadata(catalog: Catalog, location: str) -> TableMetadata:
    """A metadata file, parsed."""
    from pyiceberg.io import load_file_io
    from pyiceberg.serializers import FromInputFile

    return FromInputFile.table_metadata(load_file_io(catalog.properties, location).new_input(location))


def register_one(catalog: Catalog, identifier: tuple[str, str], location: str, wanted: TableMetadata) -> int:
    """Register one table from ``location`` and commit what the catalog's registration left out;
    returns how many table updates that took (0 where the catalog took the file whole)."""
    table = catalog.register_table(identifier, location)
    updates = restoring_updates(table.metadata, wanted)
    if updates:
        catalog.commit_table(table, (), updates)
    got = catalog.load_table(identifier).metadata
    differences = differences_from(got, wanted)
    if differences:
        raise RegisterError(
            f"{'.'.join(identifier)} registered from {location} but unlike it ({'; '.join(differences)})"
        )
    return len(updates)


def restoring_updates(current: TableMetadata, wanted: TableMetadata) -> tuple[TableUpdate, ...]:
    """The table updates that make ``current`` hold what ``wanted`` holds (pure): the schemas,
    specs and sort orders it lacks then ``wanted``'s current ones, the properties that differ, the
    snapshots it lacks in sequence order (each names its manifest list: nothing is copied), and
    every ref as ``wanted`` has it."""
    from pyiceberg.table.update import (
        AddPartitionSpecUpdate,
        AddSchemaUpdate,
        AddSnapshotUpdate,
        AddSortOrderUpdate,
        SetCurrentSchemaUpdate,
        SetDefaultSortOrderUpdate,
        SetDefaultSpecUpdate,
        SetPropertiesUpdate,
        SetSnapshotRefUpdate,
    )

    updates: list[TableUpdate] = []
    # Added in id order with the current (default) one last, then made current as "the last
    # added" (-1): a catalog that gave the registered table ids of its own numbers them itself.
    schemas = {schema.schema_id: schema for schema in current.schemas}
    added_schemas = _current_last(
        [schema for schema in wanted.schemas if schemas.get(schema.schema_id) != schema],
        lambda schema: schema.schema_id,
        wanted.current_schema_id,
    )
    updates.extend(AddSchemaUpdate(schema=schema) for schema in added_schemas)
    if added_schemas:
        updates.append(SetCurrentSchemaUpdate.model_validate({"schema-id": -1}))
    specs = {spec.spec_id: spec for spec in current.partition_specs}
    added_specs = _current_last(
        [spec for spec in wanted.partition_specs if specs.get(spec.spec_id) != spec],
        lambda spec: spec.spec_id,
        wanted.default_spec_id,
    )
    updates.extend(AddPartitionSpecUpdate(spec=spec) for spec in added_specs)
    if added_specs:
        updates.append(SetDefaultSpecUpdate.model_validate({"spec-id": -1}))
    orders = {order.order_id: order for order in current.sort_orders}
    added_orders = _current_last(
        [order for order in wanted.sort_orders if orders.get(order.order_id) != order],
        lambda order: order.order_id,
        wanted.default_sort_order_id,
    )
    updates.extend(AddSortOrderUpdate.model_validate({"sort-order": order}) for order in added_orders)
    if added_orders:
        updates.append(SetDefaultSortOrderUpdate.model_validate({"sort-order-id": -1}))
    properties = {k: v for k, v in wanted.properties.items() if current.properties.get(k) != v}
    if properties:
        updates.append(SetPropertiesUpdate(updates=properties))
    have = {snapshot.snapshot_id for snapshot in current.snapshots}
    missing = [snapshot for snapshot in wanted.snapshots if snapshot.snapshot_id not in have]
    updates.extend(
        AddSnapshotUpdate(snapshot=snapshot)
        for snapshot in sorted(missing, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    )
    for ref_name, ref in sorted(wanted.refs.items()):
        if current.refs.get(ref_name) != ref:
            updates.append(
                SetSnapshotRefUpdate.model_validate(
                    {
                        "ref-name": ref_name,
                        "type": ref.snapshot_ref_type,
                        "snapshot-id": ref.snapshot_id,
                        "max-ref-age-ms": ref.max_ref_age_ms,
                        "max-snapshot-age-ms": ref.max_snapshot_age_ms,
                        "min-snapshots-to-keep": ref.min_snapshots_to_keep,
                    }
                )
            )
    return tuple(updates)


def _current_last(items: list[T], key: Callable[[T], int], current: int) -> list[T]:
    """``items`` by id, the one whose id is ``current`` last."""
    return sorted(items, key=lambda item: (key(item) == current, key(item)))


def differences_from(got: TableMetadata, wanted: TableMetadata) -> list[str]:
    """What a registered table still lacks of its file (empty: nothing): compared where readers
    and the committer look, the current schema's field ids, the snapshots, the refs and the
    properties."""
    differences = []
    if got.schema().fields != wanted.schema().fields:
        differences.append("its current schema differs")
    if got.spec().fields != wanted.spec().fields:
        differences.append("its partition spec differs")
    lost = {s.snapshot_id for s in wanted.snapshots} - {s.snapshot_id for s in got.snapshots}
    if lost:
        differences.append(f"{len(lost)} snapshots missing")
    refs = {name: ref.snapshot_id for name, ref in wanted.refs.items()}
    if {name: ref.snapshot_id for name, ref in got.refs.items()} != refs:
        differences.append("its refs differ")
    changed = sorted(k for k, v in wanted.properties.items() if got.properties.get(k) != v)
    if changed:
        differences.append(f"properties differ: {', '.join(changed)}")
    return differences
