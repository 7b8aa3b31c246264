"""What one held call's upstream pushes have cost so far, kept in O(1) per push (docs/security.md §
Limits): how many the call sent (`held.max_pushes_per_call`), which ids are open (a push reusing
the id of a pending push is an upstream error, refused; the first stays), and the suffix hints that
keep input keys unique among the pending pushes without scanning them.

Pure data, no I/O: the driver (proxy/calls/driver.py) owns one per call.
"""

from __future__ import annotations

from collections.abc import Container, Sized
from dataclasses import dataclass
from typing import Any, Protocol

from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    duplicate_id,
    input_key,
    legacy_push_to_input_request,
    pending_push,
)
from translators.protocol.revisions import Revision
from translators.protocol.roots import is_roots_ask
from translators.wire.errors import UpstreamLimitExceeded
from translators.wire.jsonrpc import JsonObject


class Pending(Container[str], Sized, Protocol):
    """The held call's pending pushes by input key (only membership and size are read)."""


@dataclass(frozen=True)
class Answer:
    """Answer the push upstream at once: refused (`reason`, logged as `push_refused`: a reused id,
    a capability the client did not declare), or for roots the call's session already holds."""

    answer: PushAnswer
    reason: str | None


@dataclass(frozen=True)
class Overflow:
    """The push is past `held.max_pushes_per_call`: the first one over cuts the call off with
    `fault`; later ones (arriving before the cancel lands) are dropped, in O(1) and no memory."""

    fault: UpstreamLimitExceeded | None


@dataclass(frozen=True)
class Hold:
    """Hand the push to the held call, asked of the client as `pending.input_request`."""

    pending: PendingPush


Admission = Answer | Overflow | Hold


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

    def admit(
        self,
        push: JsonObject,
        client_capabilities: JsonObject,
        revision: Revision,
        roots_answer: JsonObject | None,
        pending: Pending,
    ) -> Admission:
        """What becomes of one push of this call: counted first, then checked in order (the cap,
        a reused id, the client's capabilities); `roots_answer` is what a roots-affine session's
        client gave for this very call (proxy/calls/roots_affinity.py)."""
        over = self.count()
        if over:
            return Overflow(self.over_limit() if over == 1 else None)
        push_id = push["id"]
        if self.is_duplicate(push_id):  # an id must not be reused while its request is pending
            return Answer(duplicate_id(push_id), "duplicate_id")
        translated = legacy_push_to_input_request(push, client_capabilities, revision)
        if isinstance(translated, PushAnswer):
            return Answer(translated, "capability")
        if is_roots_ask(push) and roots_answer is not None:
            return Answer(PushAnswer(result=roots_answer), None)
        return Hold(pending_push(push, self.key(push, pending), translated, revision))

    def closed(self, push_id: Any) -> None:
        """The push was answered or cancelled: its id may be used again."""
        if isinstance(push_id, int | str):
            self._open.discard(push_id)


__all__ = ["Admission", "Answer", "Hold", "Overflow", "PushLedger"]
