"""What one held call's upstream pushes have cost so far, and how many pushes each tool sends
together.

**The ledger** (`PushLedger`), kept in O(1) per push (docs/security.md § Limits): how many the call
sent (`held.max_pushes_per_call`), which ids are open (a push reusing the id of a pending push is
an upstream error, refused; the first stays), and the suffix hints that keep input keys unique
among the pending pushes without scanning them. The held call (proxy/calls/call.py) owns one.

**Batch sizes** (`BatchSizes`, docs/decisions.md, "Push batching by learned size"). A legacy server
that needs several inputs at once sends several pushes; the bridge wants them in one
`InputRequiredResult`, but nothing on the wire says which push is the last. The held call
(translators/held/machine.py) closes a batch as soon as it holds as many pushes as the same tool
sent for the same round last time, and otherwise at the `held.batch_quiet_ms` ceiling. Every closed
batch is noted here (`NoteBatchSize`), and so is a push that arrives after its round was answered
(the batch was larger than learned): the next call of the tool uses the corrected size. The
registry (proxy/calls/registry.py) owns one `BatchSizes` per bridge.

Pure data, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Mapping, Sized
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from translators.protocol.eras import TOOLS_CALL
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


BatchKey = tuple[str, str]  # (method, tool or prompt name / resource URI)
MAX_KEYS: Final = 4096  # tools remembered; the least recently used is forgotten first
_NOTHING: Final[Mapping[int, int]] = MappingProxyType({})


def batch_key(method: str, params: Any) -> BatchKey:
    """What a call's batch sizes are learned under: its method and the tool, prompt or URI."""
    params = params if isinstance(params, dict) else {}
    name = params.get("name", params.get("uri", ""))
    return method, name if isinstance(name, str) else ""


class BatchSizes:
    """Learned batch size per (method, name) and input round; bounded to `max_keys` names.

    `declared` (`held.batch_sizes`): tool name -> pushes it sends together in every round, known
    before any call; a learned size replaces it for its round."""

    def __init__(self, declared: Mapping[str, int] | None = None, max_keys: int = MAX_KEYS) -> None:
        self._sizes: OrderedDict[BatchKey, dict[int, int]] = OrderedDict()
        self._declared = dict(declared or {})
        self._max_keys = max_keys

    def sizes(self, key: BatchKey) -> Mapping[int, int]:
        """What was learned for `key` (input round -> pushes sent together): the live table, to
        read only, so a held call costs no copy."""
        sizes = self._sizes.get(key)
        if sizes is None:
            return _NOTHING
        self._sizes.move_to_end(key)
        return sizes

    def declared(self, key: BatchKey) -> int:
        """The size `held.batch_sizes` declares for `key`'s tool in every round, or 0."""
        return self._declared.get(key[1], 0) if key[0] == TOOLS_CALL else 0

    def note(self, key: BatchKey, round_: int, size: int) -> None:
        """The pushes of `round_` came `size` together (the latest observation wins)."""
        if size < 1:
            return
        sizes = self._sizes.setdefault(key, {})
        sizes[round_] = size
        self._sizes.move_to_end(key)
        while len(self._sizes) > self._max_keys:
            self._sizes.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sizes)

    def table(self, limit: int) -> list[tuple[BatchKey, dict[int, int]]]:
        """At most `limit` learned entries, the most recently used first (a copy)."""
        newest = list(reversed(self._sizes.items()))[:limit]
        return [(key, dict(sizes)) for key, sizes in newest]

    @property
    def declared_sizes(self) -> Mapping[str, int]:
        return MappingProxyType(self._declared)


__all__ = [
    "MAX_KEYS",
    "Admission",
    "Answer",
    "BatchKey",
    "BatchSizes",
    "Hold",
    "Overflow",
    "PushLedger",
    "batch_key",
]
