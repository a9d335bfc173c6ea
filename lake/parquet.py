"""How lake tables become Parquet bytes and back: one set of encoding choices for every writer.

zstd compresses the ledger well at low CPU cost. Level 1, not the default 3: on ledger batches
(mostly random UUID text) it encodes about 1.8x faster for about 2% more bytes (measured by
``bench/stream_to_parquet.py``), and the stream processor encodes every batch it lands. Dictionary
encoding is kept to columns with few distinct values (types, directions), where it pays, and left
off ids, whose dictionaries would be as large as the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from contracts.lake_tables import DICTIONARY_COLUMNS

COMPRESSION: Final = "zstd"
COMPRESSION_LEVEL: Final = 1


def encode(
    table: pa.Table,
    *,
    row_group_size: int | None = None,
    text_statistics: bool | Sequence[str] = True,
    statistics_columns: Sequence[str] | None = None,
) -> bytes:
    """Serialize ``table`` to Parquet with the lake's encoding choices.

    ``text_statistics=False`` is for rows in arrival order (landing files): there the min/max of
    id columns span nearly all ids and prune nothing, while writing them costs about 7% of the
    encode; numbers and times keep theirs (``created_at`` ranges do prune landing files). A list
    keeps the min/max of just those text columns: compacted files sorted by ``wallet_id`` prune
    on it alone, and the min/max of every other id in every small row group would only grow the
    footer, which every reader fetches. ``statistics_columns`` names exactly the columns that keep
    min/max (text or not), overriding ``text_statistics``.
    """
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        row_group_size=row_group_size,
        **_options(table.schema, text_statistics, statistics_columns),
    )
    return bytes(sink.getvalue().to_pybytes())


def open_writer(
    sink: pa.NativeFile, schema: pa.Schema, *, statistics_columns: Sequence[str] | None = None
) -> pq.ParquetWriter:
    """A writer with :func:`encode`'s choices, for files written a row group at a time.

    What a writer too big to hold in memory needs (compaction's outputs): the same bytes per
    row group as :func:`encode` would give, without the whole file as one table first.
    """
    return pq.ParquetWriter(sink, schema, **_options(schema, True, statistics_columns))


def _options(
    schema: pa.Schema, text_statistics: bool | Sequence[str], statistics_columns: Sequence[str] | None
) -> dict[str, Any]:
    dictionary = [name for name in schema.names if name in DICTIONARY_COLUMNS]
    statistics: bool | list[str]
    if statistics_columns is not None:
        statistics = [name for name in schema.names if name in set(statistics_columns)]
    elif text_statistics is True:
        statistics = True
    else:
        kept = set() if text_statistics is False else set(text_statistics)
        statistics = [
            field.name for field in schema if not pa.types.is_string(field.type) or field.name in kept
        ]
    return {
        "compression": COMPRESSION,
        "compression_level": COMPRESSION_LEVEL,
        "use_dictionary": dictionary or False,
        "write_statistics": statistics,
    }


def decode(data: bytes, schema: pa.Schema | None = None) -> pa.Table:
    """Read Parquet bytes; with ``schema``, cast to it (and fail loudly if the file disagrees)."""
    table = pq.read_table(pa.BufferReader(data))
    return table.cast(schema) if schema is not None else table
