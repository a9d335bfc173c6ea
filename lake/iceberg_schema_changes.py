"""Type changes between the contract (:mod:`contracts.lake_tables`) and an Iceberg table: which
ones Iceberg lets a table take in place, and which ones no table may take.

Iceberg's spec allows exactly three type promotions, each readable from every file written
before it without a rewrite: ``int`` to ``long``, ``float`` to ``double``, and a decimal's
precision widened at the same scale. Provisioning applies them (:func:`lake.iceberg_tables.evolve_table`).
Anything else (``long`` to ``decimal``, ``string`` to ``long``...) would leave old files unreadable
or read as something else, so it is refused: provisioning says so in one line, and the committer
stops committing that table (its position stays before the first file it cannot take, and it
reports the table blocked, which alarms) instead of moving past data it cannot append. The
decisions here are pure: a table's schema and the contract in, the changes out.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType


@dataclasses.dataclass(frozen=True, slots=True)
class TypeChange:
    """One column whose type in the contract differs from the table's."""

    column: str
    table_type: str
    contract_type: str
    promotable: bool

    def line(self) -> str:
        """The column and both types, and whether Iceberg allows it."""
        verdict = "promotable" if self.promotable else "Iceberg cannot promote it"
        return f"{self.column}: {self.table_type} -> {self.contract_type} ({verdict})"


def promotable(old: IcebergType, new: IcebergType) -> bool:
    """True when Iceberg's spec lets a column of type ``old`` become ``new`` in place.

    Examples
    --------
    >>> from pyiceberg.types import DecimalType, IntegerType, LongType, StringType
    >>> promotable(IntegerType(), LongType()), promotable(LongType(), DecimalType(20, 6))
    (True, False)
    >>> promotable(DecimalType(10, 2), DecimalType(12, 2)), promotable(DecimalType(10, 2), DecimalType(12, 3))
    (True, False)
    >>> promotable(StringType(), LongType())
    False
    """
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    if isinstance(old, IntegerType):
        return isinstance(new, LongType)
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return False


def type_changes(table_schema: Schema, contract_schema: Schema) -> list[TypeChange]:
    """The columns both schemas have (by name) with different primitive types.

    A contract type the table's type already reads (the contract narrower: ``int`` in a ``long``
    column) is no change: files written with it read as the table's type.
    """
    changes: list[TypeChange] = []
    current = {field.name: field for field in table_schema.fields}
    for wanted in contract_schema.fields:
        existing = current.get(wanted.name)
        if existing is None or existing.field_type == wanted.field_type:
            continue
        if not (existing.field_type.is_primitive and wanted.field_type.is_primitive):
            continue
        if promotable(wanted.field_type, existing.field_type):
            continue
        changes.append(
            TypeChange(
                column=wanted.name,
                table_type=str(existing.field_type),
                contract_type=str(wanted.field_type),
                promotable=promotable(existing.field_type, wanted.field_type),
            )
        )
    return changes


def refused_message(table: str, lines: list[str]) -> str:
    """The one line provisioning and the committer print for a table they refuse to change.

    Examples
    --------
    >>> refused_message("ledger", ["amount: long -> decimal(20, 6) (Iceberg cannot promote it)"])[:70]
    'ledger: type change refused, amount: long -> decimal(20, 6) (Iceberg c'
    """
    return (
        f"{table}: type change refused, {'; '.join(lines)}; the committer holds the table until the "
        "contract or the table is changed back"
    )
