"""A test session's DynamoDB Local, started afresh between modules once it has slowed down.

DynamoDB Local keeps every stream's records for 24 hours in one SQLite table for all tables, deleted
tables' included, keyed by sequence number alone; a write to a table whose stream began after others'
pays for the records before it, so the server slows down with every table a session made and wrote,
however many of them were since deleted. Measured on this 2-core machine (in memory, as the session's
stacks run it): 2,000 entries written through the write path into a fresh table each round took
7.9, 9.9, 10.2 and 12.6 CPU-seconds of the server in four rounds, and 8.8 again right after a restart;
on disk 9.6, 19.8 and 27.5. Writing the same rounds into one table got faster instead (warm JIT).

So a module that uses the stack starts on a fresh DynamoDB Local when the running one has spent
:data:`RECYCLE_AFTER_CPU_SECONDS` since its start: the same port, no tables (its tables are in memory,
and a module's resources are made by the module), after every pending removal of an earlier test;
the stack's own tables (``stack.settings``) are provisioned again.
"""

from __future__ import annotations

from typing import Final

import psutil

from walletlake.local import EmbeddedStack, patched_environ, provision

#: DynamoDB Local's CPU-seconds since its start past which the next module gets a fresh server. A
#: restart took 2.4 s here (1.6-1.8 CPU-s for the JVM's start); in the rounds above, after 18 CPU-s the
#: next round cost 29 % more than the first, after 28 CPU-s 60 % more.
RECYCLE_AFTER_CPU_SECONDS: Final = 20.0

SERVER: Final = "DynamoDB Local"


def slowed_down(stack: EmbeddedStack) -> bool:
    """Whether the stack's DynamoDB Local has spent :data:`RECYCLE_AFTER_CPU_SECONDS` since it started."""
    times = psutil.Process(stack.server(SERVER).process.pid).cpu_times()
    return times.user + times.system >= RECYCLE_AFTER_CPU_SECONDS


def restart_in_memory(stack: EmbeddedStack) -> list[str]:
    """A fresh DynamoDB Local on the same port, holding again the tables the stack provisioned at its
    start (``stack.settings``', which tests of the stack itself read); returns provisioning's lines.

    Only for a stack that keeps DynamoDB Local in memory: one on disk keeps every table anyway.
    """
    if not stack.dynamodb_in_memory:
        raise ValueError("a DynamoDB Local on disk keeps its tables across a restart: nothing to gain")
    stack.restart_server(SERVER)
    with patched_environ(stack.environment()):
        return provision(stack.settings)
