"""Which interactive calls may share an upstream session (docs/decisions.md § 28).

A push carries nothing that names its call (§ 7), except where it comes: a push on a call's own
POST stream (`related_request_id`) is that call's, a push on the session's GET stream is anyone's.
A server that sends every push of a tool on the POST stream of the call (`mcp` 1.x `ctx.elicit`,
anything sent with a related request id) lets several calls of that tool share one session: each
push still reaches exactly its call, and a held call costs its POST stream instead of a session.

Whether a server does so is only known by watching it, per *call label* (method and tool or prompt
name): a label qualifies once a call of it ran on a session of its own (an exclusive lease), sent
a push on its own POST stream, and ended without a push on the session's GET stream (a call that
pushed nothing proves nothing); it is disqualified for good the first time a
push reaches the GET stream of a session its calls share (that push is refused: no call can claim
it). Learned labels are bounded, so names a client makes up cannot grow the bridge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import structlog

from proxy.upstream.base import Inbound, UpstreamSession
from proxy.upstream.http.call import invoke_handler
from proxy.upstream.pool_choice import about_a_call
from proxy.upstream.pool_entries import PoolEntry

_log = structlog.get_logger(__name__)

MAX_LABELS: Final = 1024  # labels remembered each way; beyond it, new labels stay exclusive


def call_label(method: str, params: object) -> str:
    """The label a call's pushes are learned under: the method and the tool or prompt name (a
    `resources/read` is labelled by its method alone: URIs are unbounded)."""
    name = params.get("name") if isinstance(params, dict) else None
    return f"{method} {name}" if isinstance(name, str) else method


class PushAttribution:
    """The labels whose calls may share a session, learned from what the upstream did."""

    def __init__(self, *, enabled: bool = True, max_labels: int = MAX_LABELS) -> None:
        self.enabled = enabled
        self._max = max_labels
        self._qualified: set[str] = set()
        self._disqualified: set[str] = set()

    def qualifies(self, label: str) -> bool:
        """Whether calls of `label` may share a session with other calls of the same key."""
        return self.enabled and label in self._qualified

    def observed_own_session(self, label: str) -> None:
        """A call of `label` ended on a session of its own, having pushed on its POST stream and
        never on the GET stream."""
        if label in self._disqualified or len(self._qualified) >= self._max:
            return
        self._qualified.add(label)

    def disqualify(self, labels: set[str]) -> None:
        """A push reached the GET stream of a session that calls of `labels` shared."""
        for label in labels:
            self._qualified.discard(label)
            if len(self._disqualified) < self._max:
                self._disqualified.add(label)

    @property
    def qualified(self) -> int:
        return len(self._qualified)


def route_get_stream(
    entry: PoolEntry,
    inbound: Inbound,
    attribution: PushAttribution,
    on_unowned: Callable[[UpstreamSession, Inbound], None],
) -> None:
    """A message of `entry`'s GET stream goes to the exclusive lease holder, if it listens; a push
    tied to a request that has no handler of its own (a shared call) and anything else go to
    policy (`on_unowned`). A push, or a call's progress or log, there: the exclusive call being
    learned does not qualify, and calls sharing the session never will again (a push is refused,
    progress and logs dropped: none of them can claim it)."""
    handler = entry.exclusive.unrelated_handler if entry.exclusive is not None else None
    if inbound.related_request_id is not None:
        handler = None
    elif about_a_call(inbound.message):
        if entry.exclusive is not None:
            entry.exclusive.pushed_unrelated = True
        if entry.attributed:
            attribution.disqualify(set(entry.attributed))
            _log.warning("push_unattributable", calls=sum(entry.attributed.values()))
    if handler is not None:
        invoke_handler(handler, inbound)
        return
    try:
        on_unowned(entry.session, inbound)
    except Exception:
        _log.exception("upstream_unowned_handler_failed", method=inbound.message.get("method"))


__all__ = ["MAX_LABELS", "PushAttribution", "call_label", "route_get_stream"]
