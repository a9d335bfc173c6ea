"""The second pass's details join the same whichever engine returned them (pure, no server).

DuckDB hands the reconciliation Arrow; Athena's answer comes through awswrangler as pandas, whose
strings (pandas 3) become Arrow ``large_string`` and whose timestamps are nanoseconds. The deploy
check found the classify function failing on exactly that (``Incompatible data types for
corresponding join field keys``) the first time a night had findings.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa

from queries.reconciliation_rules import PROBLEM_DETAILS, join_problem_details


def problems_rows() -> dict[str, list[object]]:
    return {
        "wallet_id": ["w1"],
        "copy_versions": [None],
        "conflict_versions": [None],
        "bad_amount_versions": [None],
        "break_versions": [None],
        "first_break_expected": [None],
        "first_break_actual": [None],
        "gap_starts": ["1"],
        "gap_ends": ["2"],
        "oldest_gap_bound": [dt.datetime(2026, 11, 24, 10, 0, 0)],
    }


def test_details_from_pandas_join_as_details_from_arrow() -> None:
    # GIVEN the first pass's wallets (Arrow, string ids) and the same details two ways
    wallets = pa.table({"wallet_id": pa.array(["w1", "w2"], pa.string()), "gaps": [1, 0]})
    from_duckdb = pa.table(
        {
            name: pa.array(values, PROBLEM_DETAILS.get(name, pa.string()))
            for name, values in problems_rows().items()
        }
    )
    frame = pd.DataFrame(problems_rows()).astype(
        {"wallet_id": "string", "gap_starts": "string", "gap_ends": "string"}
    )
    frame["first_break_expected"] = frame["first_break_expected"].astype("Int64")
    frame["first_break_actual"] = frame["first_break_actual"].astype("Int64")
    from_athena = pa.Table.from_pandas(frame, preserve_index=False)
    assert from_athena.schema.field("wallet_id").type != pa.string()  # what awswrangler hands over
    # WHEN each is joined to the wallets
    joined_duckdb = join_problem_details(wallets, from_duckdb).sort_by("wallet_id")
    joined_athena = join_problem_details(wallets, from_athena).sort_by("wallet_id")
    # THEN both give the same rows and types
    assert joined_athena.equals(joined_duckdb)
    assert joined_athena.column("gap_starts").to_pylist() == ["1", None]
