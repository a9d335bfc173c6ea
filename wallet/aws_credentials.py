"""AWS credentials for the event loop: resolved and refreshed in a worker thread, read without I/O.

botocore's provider chain (environment, profile, SSO, container, instance metadata) and its
:class:`~botocore.credentials.RefreshableCredentials` decide where credentials come from and when
they are refreshed: from ``advisory`` seconds before expiry (15 minutes) a refresh is tried and
its failure tolerated, from ``mandatory`` seconds (10 minutes) it must succeed. But a refresh is
blocking HTTP (the ECS container provider: a 2 s timeout, 3 attempts), and botocore runs it in the
caller's thread: called on the event loop, a task-role rotation would freeze every request of the
process for seconds, and in the mandatory window its failure would escape from a request.

So the loop never calls botocore's credentials. It signs with the last snapshot taken
(:class:`~botocore.credentials.ReadOnlyCredentials`), and reads only the expiry time (no I/O) to
decide:

- in botocore's advisory window, a refresh is started in a worker thread (at most one at a time,
  at most one every :data:`RETRY_SECONDS` after a failure); requests go on with the snapshot,
  which is still valid;
- with no snapshot yet, or one within ``margin_seconds`` of expiry, a request waits for the
  refresh (without blocking the loop, and at most its own attempt's time); if none succeeds, it
  is signed with the old snapshot while that has not expired, and once it has, the request fails
  with :class:`CredentialsUnavailableError`: nothing was sent, so the answer is an honest
  "unavailable, nothing written", never a 500.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from typing import Final

import botocore.credentials
import botocore.session

_logger = logging.getLogger(__name__)

#: Seconds between two refresh attempts after one failed (botocore's own fetches retry inside one).
RETRY_SECONDS: Final = 5.0


class CredentialsUnavailableError(Exception):
    """No valid credentials: none found, or expired and not refreshed. Nothing was sent."""


class BackgroundCredentials:
    """The credentials of ``session``, refreshed off the event loop ahead of their expiry.

    Parameters
    ----------
    session:
        The botocore session whose provider chain finds the credentials.
    margin_seconds:
        A snapshot this close to its expiry is not used: a request signed with it could reach
        DynamoDB after it expired (``ExpiredTokenException``).
    """

    def __init__(self, session: botocore.session.Session, *, margin_seconds: float = 30.0) -> None:
        self._session = session
        self._margin = margin_seconds
        self._source: botocore.credentials.Credentials | None = None
        self._frozen: botocore.credentials.ReadOnlyCredentials | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._refresh: asyncio.Future[None] | None = None
        self._next_attempt = 0.0

    async def current(self, wait: float) -> botocore.credentials.ReadOnlyCredentials:
        """Credentials valid for at least the margin, waiting at most ``wait`` s for a refresh.

        Raises
        ------
        CredentialsUnavailableError
            None found, or the snapshot expires within the margin and no refresh succeeded.
        """
        frozen = self._frozen
        if frozen is not None and not self._expiring(self._margin):
            if self._advisory_due():
                self._start_refresh(force=False)
            return frozen
        refresh = self._start_refresh(force=True)
        try:
            await asyncio.wait_for(asyncio.shield(refresh), wait)
        except TimeoutError as error:
            raise CredentialsUnavailableError(
                f"AWS credentials are being refreshed and were not ready within {wait:.1f} s"
            ) from error
        except Exception:  # noqa: S110  # the refresh's failure is kept in self._error, read below
            pass
        frozen = self._frozen
        if frozen is None or self._expiring(0.0):
            raise CredentialsUnavailableError(f"no valid AWS credentials: {self._error!r}")
        return frozen

    def _expiring(self, within: float) -> bool:
        source = self._source
        if isinstance(source, botocore.credentials.RefreshableCredentials):
            return bool(source.refresh_needed(math.ceil(within)))
        return source is None

    def _advisory_due(self) -> bool:
        """In botocore's advisory window (its own ``refresh_needed()`` default): time to refresh."""
        source = self._source
        return isinstance(source, botocore.credentials.RefreshableCredentials) and bool(
            source.refresh_needed()
        )

    def _start_refresh(self, *, force: bool) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        refresh = self._refresh
        if refresh is not None and not refresh.done() and refresh.get_loop() is loop:
            return refresh
        now = time.monotonic()
        if not force and now < self._next_attempt and refresh is not None and refresh.get_loop() is loop:
            return refresh
        self._next_attempt = now + RETRY_SECONDS
        refresh = asyncio.ensure_future(loop.run_in_executor(None, self._refresh_blocking))
        refresh.add_done_callback(_consume)
        self._refresh = refresh
        return refresh

    def _refresh_blocking(self) -> None:
        """In a worker thread: find the credentials, let botocore refresh them, take a snapshot."""
        with self._lock:
            try:
                source = self._source or self._session.get_credentials()
                if source is None:
                    raise CredentialsUnavailableError(
                        "no AWS credentials found (environment, profile, container or instance role)"
                    )
                self._source = source
                # botocore refreshes here as its advisory and mandatory windows say (raising in
                # the mandatory window if it cannot), in this thread, not on the loop.
                self._frozen = source.get_frozen_credentials()
                self._error = None
            except Exception as error:
                self._error = error
                _logger.warning("AWS credentials refresh failed (requests go on while valid): %r", error)
                raise


def _consume(refresh: asyncio.Future[None]) -> None:
    """Mark a background refresh's failure retrieved (it is logged and kept, not lost)."""
    if not refresh.cancelled():
        refresh.exception()
