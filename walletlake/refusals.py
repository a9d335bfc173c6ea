"""A command's refusal: a one-line reason and the exit code that tells a script which refusal it was.

Exit 1 stays "the command ran and found a problem" (a reconciliation with findings) or "it failed";
a refusal means nothing ran (nothing was written), for a reason the caller can fix:

========  ==========================================================================================
code      meaning
========  ==========================================================================================
2         bad input: SQL that does not parse or bind, a parameter out of range (argparse's code too)
3         a day that cannot be reconciled yet (still open, or before any data)
4         the embedded stack the shell's exports point at is not answering
5         a file the lake committed is gone from storage (restore its noncurrent version)
========  ==========================================================================================
"""

from __future__ import annotations

from typing import Final

BAD_INPUT: Final = 2
DAY_NOT_RECONCILABLE: Final = 3
STACK_NOT_ANSWERING: Final = 4
LAKE_FILE_GONE: Final = 5


class RefusalError(Exception):
    """Raised by a command to stop with ``exit_code`` and this one-line message, nothing written."""

    def __init__(self, message: str, exit_code: int = BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code
