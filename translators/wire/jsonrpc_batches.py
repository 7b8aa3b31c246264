"""JSON-RPC batches: only revision 2025-03-26 lets a message be a JSON array of messages.

Where the session's revision has batches, a non-empty array read from one stdio line or one SSE
`data:` payload is split here into its elements, which are then handled one by one, in order, each
as if it had arrived alone (so an element that is not a message fails just as a lone one would).
Anywhere else an array is what it always was: one invalid message. The bridge never sends batches.
"""

from __future__ import annotations

from typing import Any


def batch_elements(value: Any, *, batches: bool) -> list[Any]:
    """The messages one decoded JSON value carries: each element of a non-empty array where the
    revision has batches, else the value itself."""
    if batches and isinstance(value, list) and value:
        return value
    return [value]


__all__ = ["batch_elements"]
