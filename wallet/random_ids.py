"""Random (version 4) UUIDs as text, made for every movement: its ``txn_id`` and its request token.

``str(uuid.uuid4())`` builds a :class:`uuid.UUID` in Python (its ``__init__`` checks and its
``__str__`` formats) to end with 36 characters; a transfer makes two, about a tenth of the
server's own Python per request. :func:`random_uuid` makes the same text from 16 random bytes
directly: the same source (``os.urandom``), the version and variant bits set as RFC 9562 says.
"""

from __future__ import annotations

import os


def random_uuid() -> str:
    """A random UUID (version 4, RFC 9562 variant) in its canonical lower-case 8-4-4-4-12 form.

    Examples
    --------
    >>> import uuid
    >>> text = random_uuid()
    >>> parsed = uuid.UUID(text)
    >>> (str(parsed) == text, parsed.version, parsed.variant == uuid.RFC_4122)
    (True, 4, True)
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant 10xx
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
