"""Glue's archived table versions are kept under its quota: all but the newest few are deleted.

moto does not implement ``BatchDeleteTableVersion``; the client here answers both calls as Glue's
API reference describes them (pages of ``TableVersions``, at most 100 ids per delete).
"""

from __future__ import annotations

from typing import Any

from lake.glue_versions import prune_table_versions, versions_to_delete


class FakeGlue:
    """Glue's two version calls over one table's archived versions."""

    def __init__(self, versions: int) -> None:
        self.versions = [str(n) for n in range(1, versions + 1)]
        self.batches: list[int] = []

    def get_paginator(self, name: str) -> Any:
        assert name == "get_table_versions"
        glue = self

        class Pages:
            def paginate(self, **kwargs: Any) -> Any:
                assert kwargs == {"DatabaseName": "lake", "TableName": "ledger"}
                listed = list(reversed(glue.versions))  # newest first, as Glue lists them
                for start in range(0, len(listed), 100):
                    yield {"TableVersions": [{"VersionId": v} for v in listed[start : start + 100]]}

        return Pages()

    def batch_delete_table_version(self, **kwargs: Any) -> dict[str, Any]:
        ids = kwargs["VersionIds"]
        assert len(ids) <= 100
        self.batches.append(len(ids))
        self.versions = [v for v in self.versions if v not in ids]
        return {"Errors": []}


def test_the_newest_versions_are_kept_and_the_rest_deleted() -> None:
    # GIVEN a table with 2,880 archived versions (a day of 30-second commits)
    glue = FakeGlue(2_880)

    # WHEN pruned to the newest 100
    deleted = prune_table_versions(glue, "lake", "ledger", keep=100)  # type: ignore[arg-type]

    # THEN the newest 100 remain, deleted in calls of at most 100 ids
    assert deleted == 2_780
    assert glue.versions == [str(n) for n in range(2_781, 2_881)]
    assert max(glue.batches) == 100
    # AND a second run deletes nothing
    assert prune_table_versions(glue, "lake", "ledger", keep=100) == 0  # type: ignore[arg-type]


def test_a_run_deletes_at_most_its_limit_oldest_first() -> None:
    glue = FakeGlue(1_000)
    assert prune_table_versions(glue, "lake", "ledger", keep=100, limit=250) == 250  # type: ignore[arg-type]
    assert glue.versions[0] == "251"


def test_versions_are_ordered_as_numbers() -> None:
    assert versions_to_delete([str(n) for n in range(1, 12)], keep=3) == [str(n) for n in range(1, 9)]
