"""Shards of a DynamoDB stream and the order they must be read in (pure).

A shard's records all precede its children's: when DynamoDB splits or rolls a shard, the parent is
closed and new writes go to the children. Reading a child before its parent is finished would land
a wallet's later versions before its earlier ones, so a shard becomes ready only once its parent is
read to its end (or is gone from the stream, trimmed after 24 hours).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class Shard:
    """One shard as ``DescribeStream`` lists it."""

    shard_id: str
    parent_id: str | None = None
    ending_sequence_number: str | None = None

    @property
    def closed(self) -> bool:
        """A closed shard gets no new records; it can be read to its end."""
        return self.ending_sequence_number is not None


def shards_from_description(shards: Iterable[Mapping[str, Any]]) -> list[Shard]:
    """``StreamDescription.Shards`` entries as :class:`Shard` values."""
    return [
        Shard(
            shard_id=entry["ShardId"],
            parent_id=entry.get("ParentShardId"),
            ending_sequence_number=entry.get("SequenceNumberRange", {}).get("EndingSequenceNumber"),
        )
        for entry in shards
    ]


def ready_shards(shards: Sequence[Shard], finished: Collection[str]) -> list[Shard]:
    """Shards whose turn it is: not finished, and whose parent is finished or no longer listed.

    Examples
    --------
    >>> parent, child = Shard("a", ending_sequence_number="9"), Shard("b", parent_id="a")
    >>> [s.shard_id for s in ready_shards([child, parent], finished=set())]
    ['a']
    >>> [s.shard_id for s in ready_shards([child, parent], finished={"a"})]
    ['b']
    """
    listed = {shard.shard_id for shard in shards}
    return [
        shard
        for shard in shards
        if shard.shard_id not in finished
        and (shard.parent_id is None or shard.parent_id not in listed or shard.parent_id in finished)
    ]


def lineage_order(shards: Sequence[Shard]) -> list[Shard]:
    """Every shard, parents before children (the order a single reader would take them in)."""
    ordered: list[Shard] = []
    done: set[str] = set()
    while len(ordered) < len(shards):
        ready = ready_shards(shards, done)
        if not ready:  # a cycle cannot come from DynamoDB; refuse rather than loop forever
            raise ValueError("shard parents form a cycle")
        ordered.extend(ready)
        done.update(shard.shard_id for shard in ready)
    return ordered


def sequence_key(sequence_number: str) -> int:
    """Sequence numbers are decimal strings; compare them as numbers, never as text."""
    return int(sequence_number)
