"""The app one long-running server process runs (``walletlake serve``): the API, fit for a fleet.

:func:`create_server` puts two things around :func:`wallet.service.create_service` that only a
long-running process behind a load balancer needs (the Lambda function serves one request per
invocation and has neither):

- :class:`~wallet.admission.AdmissionControl` in front: past ``WALLETLAKE_MAX_REQUESTS_IN_FLIGHT``
  requests in flight, 429 with ``Retry-After`` without touching DynamoDB;
- :class:`ServerLifespan` around it, on the ASGI lifespan protocol: at startup the process
  freezes its startup heap (:func:`freeze_startup_heap`) and the embedded-metric-format publisher
  (:mod:`wallet.emf`) starts; at shutdown, once the server has
  answered every request in flight, the commit queue is drained (a group whose callers went away is
  still finished) and the last metrics line is printed.

Shutdown on SIGTERM, within ``WALLETLAKE_DRAIN_SECONDS`` (D) of the signal: uvicorn stops accepting
connections at once, closes idle keep-alive connections, lets every request in flight finish and be
answered (its connection then closes), and waits up to :func:`request_drain_seconds` (D minus
:data:`SHUTDOWN_RESERVE_SECONDS`) for them; what is still running then is cancelled. The reserve is
for the lifespan shutdown above, itself bounded. A load balancer's deregistration delay longer than
D means the balancer has stopped routing to the task before it goes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from contracts.settings import Settings
from lake.ledger_history import LakeLedger
from wallet.admission import AdmissionControl
from wallet.emf import EmfPublisher
from wallet.service import create_service
from wallet.store import WalletStore

_logger = logging.getLogger(__name__)

#: Seconds of the drain bound kept for the lifespan shutdown, after the requests' share: the commit
#: queue's last transactions (at most :data:`QUEUE_DRAIN_SECONDS`), the last metrics line, and
#: uvicorn's own steps (it checks for the signal every 0.1 s; a worker supervisor every 0.5 s).
SHUTDOWN_RESERVE_SECONDS: Final = 2
QUEUE_DRAIN_SECONDS: Final = 0.5


def request_drain_seconds(settings: Settings) -> int:
    """Seconds uvicorn waits for requests in flight after SIGTERM (its graceful-shutdown timeout)."""
    return max(1, settings.drain_seconds - SHUTDOWN_RESERVE_SECONDS)


def freeze_startup_heap() -> int:
    """Keep what the process built before serving out of every later garbage collection.

    CPython's full collection walks every container object alive. A server's heap right after
    startup (its imports, botocore's endpoint, retry and credential data, the app) lives as long
    as the process and holds no garbage, yet each full collection walked it again: measured in
    ``walletlake serve`` under ``bench/open_loop.py``'s phases (a probe), full collections of
    97-245 ms, each a stall for every request the process held. :func:`gc.freeze` moves those objects to a
    permanent generation no collection visits (https://docs.python.org/3/library/gc.html#gc.freeze),
    so later ones walk only what serving created. Collecting first keeps startup's garbage out of
    the frozen set. Returns the number of objects frozen (the log line says it).
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def history_lake(settings: Settings) -> LakeLedger | None:
    """The lake a wallet's history reads beyond DynamoDB: the Iceberg ledger (none for a plain lake)."""
    return LakeLedger(settings) if settings.lake_format == "iceberg" else None


def create_server(settings: Settings | None = None, *, store: WalletStore | None = None) -> ASGIApp:
    """What every ``walletlake serve`` worker runs: the service behind admission control, with a lifespan.

    ``settings`` default to :meth:`Settings.from_env` (the serve command writes its flags there, so
    every worker reads the same).
    """
    settings = settings or Settings.from_env()
    store = store or WalletStore(settings)
    admitted = AdmissionControl(
        create_service(settings, store=store, lake=history_lake(settings)),
        limit=settings.max_requests_in_flight,
        telemetry=store.telemetry,
    )
    publisher = EmfPublisher(store.telemetry, settings.metrics_interval_seconds)
    return ServerLifespan(admitted, store, publisher)


class ServerLifespan:
    """ASGI middleware answering the lifespan protocol: heap frozen and metrics at startup, drain at shutdown.

    Every other scope goes to ``app`` unchanged.
    """

    def __init__(
        self,
        app: ASGIApp,
        store: WalletStore,
        publisher: EmfPublisher,
        *,
        queue_drain_seconds: float = QUEUE_DRAIN_SECONDS,
    ) -> None:
        self.app = app
        self.store = store
        self.publisher = publisher
        self.queue_drain_seconds = queue_drain_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``app``; run startup and shutdown when the server sends the lifespan events."""
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                _logger.info("event=heap_frozen objects=%d", freeze_startup_heap())
                self.publisher.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def shutdown(self) -> None:
        """Finish the commit queue (bounded), print the last metrics line, close idle connections."""
        try:
            await asyncio.wait_for(self.store.drain(), self.queue_drain_seconds)
        except TimeoutError:
            _logger.warning(
                "event=queue_drain_timeout seconds=%s (unanswered writes are all-or-nothing; "
                "a client repeating one with the same nonce learns its outcome)",
                self.queue_drain_seconds,
            )
        await self.publisher.stop()
        self.store.client.close()
