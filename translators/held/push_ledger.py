"""What one held call's upstream pushes have cost so far, kept in O(1) per push (docs/security.md §
Limits): how many the call sent (`held.max_pushes_per_call`), which ids are open (a push reusing
the id of a pending push is an upstream error, refused; the first stays), and the suffix hints that
keep input keys unique among the pending pushes without scanning them.

Pure data, no I/O: the driver (proxy/calls/driver.py) owns one per call.
"""

from __future__ import annotations

from collections.abc import Container, Sized
from typing import Any, Protocol

from translators.protocol.pushes import input_key
from translators.wire.errors import UpstreamLimitExceeded
from translators.wire.jsonrpc import JsonObject


class Pending(Container[str], Sized, Protocol):
    """The held call's pending pushes by input key (only membership and size are read)."""


class PushLedger:
    def __init__(self, max_per_call: int) -> None:
        self.max_per_call = max_per_call
        self.sent = 0  # pushes the upstream sent this call, refused ones included
        self._open: set[int | str] = set()  # ids of pushes held and not answered yet
        self._hints: dict[str, int] = {}  # input_key's suffix hints, valid while keys only join
        self._pending_seen = 0  # how many were pending after the last push was held

    def count(self) -> int:
        """Count one more push; how far past `max_per_call` it is (0: within, 1: the first over)."""
        self.sent += 1
        return max(self.sent - self.max_per_call, 0)

    def over_limit(self) -> UpstreamLimitExceeded:
        return UpstreamLimitExceeded(
            f"The upstream server sent more than {self.max_per_call} requests for input in one "
            "call",
            "held.max_pushes_per_call",
        )

    def is_duplicate(self, push_id: Any) -> bool:
        return isinstance(push_id, int | str) and push_id in self._open

    def key(self, push: JsonObject, pending: Pending) -> str:
        """The push's input key, unique within `pending`, in O(1) amortized: the hints hold while
        keys only join `pending`, and are dropped once any key has left it."""
        if len(pending) != self._pending_seen:
            self._hints.clear()
        self._pending_seen = len(pending)
        return input_key(push, pending, self._hints)

    def held(self, push_id: Any) -> None:
        """The push is about to go to the held call (after `key`)."""
        if isinstance(push_id, int | str):
            self._open.add(push_id)

    def after_held(self, pending: Pending) -> None:
        """The held call took the push: if nothing was added (answered at once, or the call cut
        off), keys may have left."""
        if len(pending) <= self._pending_seen:
            self._hints.clear()
        self._pending_seen = len(pending)

    def closed(self, push_id: Any) -> None:
        """The push was answered or cancelled: its id may be used again."""
        if isinstance(push_id, int | str):
            self._open.discard(push_id)


__all__ = ["PushLedger"]
