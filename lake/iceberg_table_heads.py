"""A lake table's metadata file and snapshots, asked of the Iceberg REST catalog in one signed GET.

A query reads an Iceberg table through DuckDB's ``iceberg_scan`` of its metadata file, so what it
needs of the catalog is three facts: that file, the current snapshot, and which snapshots the
table still has (a pinned one may have expired). pyiceberg's ``RestCatalog`` answers them too, but a
process that only queries (every ``walletlake sql`` and ``walletlake query``, a notebook's first
cell) then imports pyiceberg and builds its models, and validates every snapshot of the metadata
into objects it never uses: `walletlake query current_balances` took 2.27 s through pyiceberg and
1.56 s through this module, medians of five alternated runs on the embedded stack.

Here the requests are the two pyiceberg makes, from the same properties
(:func:`lake.iceberg_catalog.catalog_properties`), so there is one configuration of the catalog:
the Iceberg REST spec's ``GET /v1/config`` (once per process and catalog: the ``uri`` and
``prefix`` the server overrides) and its ``loadTable``,
``GET /v1/{prefix}/namespaces/{namespace}/tables/{table}``, signed with SigV4 as pyiceberg's
adapter signs them (the empty body's hash in ``x-amz-content-sha256``; the catalog's signing name
and region; the session's credentials as they are at each request, so expiring ones are renewed).
Everything that commits, or reads more of a table than these facts, goes through pyiceberg.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import boto3

from contracts.settings import Settings
from lake.iceberg_catalog import catalog_properties

#: SHA-256 of an empty body: what SigV4 signs for a GET (pyiceberg's adapter sets it the same way).
_EMPTY_BODY_SHA256: Final = hashlib.sha256(b"").hexdigest()
#: Tries of a request the catalog did not answer (a read: safe to repeat), 0.2 s apart, doubling.
_ATTEMPTS: Final = 3
#: Seconds to connect, and between bytes of an answer (a big table's metadata is megabytes).
_TIMEOUT: Final = 60

if TYPE_CHECKING:
    from botocore.httpsession import URLLib3Session


class TableNotFoundError(LookupError):
    """The catalog has no such table (the spec's 404 on ``loadTable``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TableHead:
    """What the catalog says of a table now.

    Attributes
    ----------
    metadata_location:
        The table's current metadata file (``s3://.../metadata/….metadata.json``).
    current_snapshot_id:
        The snapshot ``main`` points at; ``None`` before the first commit.
    snapshot_ids:
        Every snapshot the metadata still holds (expired ones are gone).
    """

    metadata_location: str
    current_snapshot_id: int | None
    snapshot_ids: frozenset[int]


def table_head(settings: Settings, table: str, session: boto3.Session | None = None) -> TableHead:
    """The table's head as the catalog answers it now (one signed GET; the config once per process)."""
    from lake.iceberg_tables import identifier

    session = session or boto3.Session(region_name=settings.region)
    properties = catalog_properties(settings, session)
    namespace, name = identifier(settings.glue_database, table)
    signer = _signer_of(properties)
    base = _prefixed_base(session, properties["uri"], properties["warehouse"], signer)
    url = f"{base}namespaces/{quote(namespace, safe='')}/tables/{quote(name, safe='')}"
    status, body = _signed_get(session, url, {}, signer)
    if status == 404:
        raise TableNotFoundError(
            f"Iceberg table {namespace}.{name} is not in the catalog at {properties['uri']}"
        )
    if status != 200:
        raise RuntimeError(
            f"the Iceberg catalog answered {status} to loadTable {namespace}.{name}: {body[:300]!r}"
        )
    return head_of(json.loads(body))


def head_of(response: Mapping[str, Any]) -> TableHead:
    """A ``loadTable`` answer's head: the metadata file, the current snapshot (``-1`` or absent, as
    format version 1 writes "none", is ``None``), and the snapshots held.

    Examples
    --------
    >>> head = head_of({"metadata-location": "s3://b/t/metadata/2.json",
    ...                 "metadata": {"current-snapshot-id": -1, "snapshots": []}})
    >>> head.current_snapshot_id, head.snapshot_ids
    (None, frozenset())
    """
    metadata = response["metadata"]
    current = metadata.get("current-snapshot-id")
    return TableHead(
        metadata_location=str(response["metadata-location"]),
        current_snapshot_id=None if current is None or int(current) == -1 else int(current),
        snapshot_ids=frozenset(int(snapshot["snapshot-id"]) for snapshot in metadata.get("snapshots") or ()),
    )


#: (signing name, signing region) of the catalog's SigV4.
_Signer = tuple[str, str]


def _signer_of(properties: Mapping[str, str]) -> _Signer:
    return properties["rest.signing-name"], properties["rest.signing-region"]


_configs: dict[tuple[str, str, _Signer], dict[str, str]] = {}
_configs_lock = threading.Lock()


def _config(session: boto3.Session, uri: str, warehouse: str, signer: _Signer) -> dict[str, str]:
    """The config's ``defaults`` and ``overrides``, once per process and catalog (as a pyiceberg
    catalog fetches it once, when made)."""
    key = (uri, warehouse, signer)
    with _configs_lock:
        if key in _configs:
            return _configs[key]
    status, body = _signed_get(session, f"{uri.rstrip('/')}/v1/config", {"warehouse": warehouse}, signer)
    if status != 200:
        raise RuntimeError(f"the Iceberg catalog at {uri} answered {status} to its config: {body[:300]!r}")
    answer = json.loads(body)
    config = {**(answer.get("defaults") or {}), **(answer.get("overrides") or {})}
    with _configs_lock:
        _configs[key] = config
    return config


def _prefixed_base(session: boto3.Session, uri: str, warehouse: str, signer: _Signer) -> str:
    """``{uri}/v1/{prefix}/`` as the config answers them (the spec lets the server override both)."""
    config = _config(session, uri, warehouse, signer)
    base = config.get("uri", uri).rstrip("/") + "/v1/"
    prefix = config.get("prefix", "")
    return base + (prefix.strip("/") + "/" if prefix else "")


@functools.cache
def _http() -> URLLib3Session:
    from botocore.httpsession import URLLib3Session

    return URLLib3Session(timeout=_TIMEOUT)


def _signed_get(
    session: boto3.Session, url: str, params: Mapping[str, str], signer: _Signer
) -> tuple[int, bytes]:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.exceptions import HTTPClientError

    credentials = session.get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials to sign the Iceberg catalog's requests with")
    request = AWSRequest(
        method="GET",
        url=url,
        params=dict(params),
        headers={"Accept": "application/json", "x-amz-content-sha256": _EMPTY_BODY_SHA256},
    )
    name, region = signer
    SigV4Auth(credentials.get_frozen_credentials(), name, region).add_auth(request)
    prepared = request.prepare()
    attempt = 1
    while True:
        try:
            response = _http().send(prepared)
        except HTTPClientError:
            if attempt == _ATTEMPTS:
                raise
            time.sleep(0.2 * 2 ** (attempt - 1))
            attempt += 1
            continue
        return response.status_code, response.content
