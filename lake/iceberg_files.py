"""Describing a Parquet file to an Iceberg table: the one way walletlake registers files it wrote itself.

pyiceberg's ``add_files`` derives a file's partition from its column statistics. The lake's own
compacted files (the plain lake's, registered by ``walletlake lake migrate``, and the Iceberg
compaction's, written by the same DuckDB kernel) carry their day in their location, not in a
``dt`` column: registered through ``add_files`` they would land under a null partition. Here the
partition is given, and readers fill ``dt`` from it (the Iceberg spec's column projection for
identity partitions).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table


def partitioned_data_file(
    table: Table, path: str, day: dt.date | str, size: int, metadata: pq.FileMetaData
) -> DataFile:
    """A DataFile of the table's ``dt`` partition ``day`` for the Parquet file at ``path``."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    schema = table.schema()
    # Compacted files keep min/max only for the columns that prune (lake.compaction): pyiceberg
    # would warn once per other column and file, thousands of lines that say nothing wrong.
    with quiet(logging.getLogger("pyiceberg.io.pyarrow")):
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata,
            stats_columns=compute_statistics_plan(schema, table.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(schema),
        )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(day.isoformat() if isinstance(day, dt.date) else day),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=table.metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


@contextlib.contextmanager
def quiet(logger: logging.Logger) -> Iterator[None]:
    """``logger`` silenced below errors for the block."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
