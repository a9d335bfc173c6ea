"""A DynamoDB export's items as the stream records they would have been (pure, apart from
reading the export's ``exportTime``): what ``walletlake replay --export`` decodes, so an export
goes through the stream processor's own decoding like any other record."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from contracts.timestamps import parse_utc_text
from contracts.wallets_table import ENTITY_TRANSACTION, ENTITY_WALLET, PARTITION_KEY, Attr
from stream_processor.lambda_records import (
    CREATION_TIME,
    EVENT_INSERT,
    EVENT_MODIFY,
    EVENT_SOURCE_ARN,
    NEW_IMAGE,
    OLD_IMAGE,
    SEQUENCE_NUMBER,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: Entities whose export items become lake rows (user claims and anything else produce none).
EXPORTED_ENTITIES: Final = frozenset({ENTITY_WALLET, ENTITY_TRANSACTION})


def export_items(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The items of an export's JSON lines, blank lines skipped: a full export's ``{"Item": …}``,
    an incremental export's ``{"Keys": …, "NewImage": …, "OldImage": …}`` (the item at the window's
    end, or, for an item deleted in the window, as it was before: a TTL deletion of a transaction).

    Examples
    --------
    >>> export_items(['{"Item": {"pk": {"S": "a"}}}', '', '{"Keys": {}, "OldImage": {"pk": {"S": "b"}}}'])
    [{'pk': {'S': 'a'}}, {'pk': {'S': 'b'}}]
    """
    items = []
    for line in lines:
        if line.strip():
            values = json.loads(line)
            items.append(values.get("Item") or values.get("NewImage") or values.get("OldImage") or {})
    return items


@dataclasses.dataclass(frozen=True, slots=True)
class ExportWindow:
    """What an export's ``manifest-summary.json`` says of its time: a full export's point in time,
    or an incremental export's window (``exportFromTime`` to ``exportToTime``), epoch seconds."""

    incremental: bool
    export_time_s: int
    from_time_s: int | None = None


def export_records(items: Iterable[dict[str, Any]], export_id: str) -> Iterator[dict[str, Any]]:
    """The INSERT stream record of every wallet and transaction item among ``items``.

    Examples
    --------
    >>> item = {"pk": {"S": "w#wallet"}, "entity": {"S": "wallet"}, "created_at": {"N": "5000"}}
    >>> record = next(export_records([item], "01-abc"))
    >>> change = record["dynamodb"]
    >>> record["eventName"], change["SequenceNumber"], change["ApproximateCreationDateTime"]
    ('INSERT', 'export:01-abc', 5)
    """
    for item in items:
        if _entity(item) not in EXPORTED_ENTITIES:
            continue
        created = (item.get(Attr.CREATED_AT) or {}).get("N")
        yield _export_record(EVENT_INSERT, export_id, new=item, created=created)


def _modify_record(old: dict[str, Any], new: dict[str, Any], export_id: str) -> dict[str, Any]:
    return _export_record(EVENT_MODIFY, export_id, new=new, old=old, created=new[Attr.UPDATED_AT]["N"])


def _export_record(
    event: str, export_id: str, *, new: dict[str, Any], old: dict[str, Any] | None = None, created: Any
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "Keys": {PARTITION_KEY: new.get(PARTITION_KEY)},
        NEW_IMAGE: new,
        SEQUENCE_NUMBER: f"export:{export_id}",
        CREATION_TIME: int(created) // 1000 if isinstance(created, str) and created.isdigit() else 0,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if old is not None:
        change[OLD_IMAGE] = old
    return {
        "eventID": f"export-{export_id}",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        EVENT_SOURCE_ARN: f"export/{export_id}",
        "dynamodb": change,
    }


def _entity(item: dict[str, Any]) -> Any:
    return (item.get(Attr.ENTITY) or {}).get("S")


def export_window(s3: S3Client, bucket: str, folder: str) -> ExportWindow:
    """The export's time from its ``manifest-summary.json``: ``exportTime`` of a full export; of an
    ``INCREMENTAL_EXPORT``, its window (``exportFromTime``, ``exportToTime``)."""
    key = f"{folder}/manifest-summary.json"
    try:
        summary = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        if summary.get("exportType") == "INCREMENTAL_EXPORT":
            start = parse_utc_text(str(summary["exportFromTime"]))
            end = parse_utc_text(str(summary["exportToTime"]))
            return ExportWindow(True, int(end.timestamp()), int(start.timestamp()))
        moment = parse_utc_text(str(summary["exportTime"]))
    except (ClientError, KeyError, ValueError, TypeError) as error:
        raise FileNotFoundError(
            f"s3://{bucket}/{key} does not state the export's exportTime (or an incremental export's "
            f"exportFromTime and exportToTime), which numbering its entries needs ({error!r})"
        ) from error
    return ExportWindow(False, int(moment.timestamp()))
