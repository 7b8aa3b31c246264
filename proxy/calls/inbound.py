"""The one inbound router: where a message the upstream sends during a call goes.

Every call that runs upstream — an MRTR-capable call (proxy/calls/call.py), a non-interactive
request (proxy/engine/routes/plain_call.py), a legacy task's `tasks/result`
(proxy/engine/legacy_tasks/running.py) — hands each message its session brings it (on the call's
own stream, or on the session's GET stream while it holds the session exclusively) to
`route_inbound`, with itself as the `InboundTarget`:

- a push (elicitation, sampling, roots) goes to the target's `on_push`: a held call asks its
  client, a non-interactive call refuses it upstream, a task shows it as an input request;
- a session-wide notification (list changed, resource updated) is published to the principal's
  listen streams (`publish`);
- `notifications/cancelled` withdraws a push the target holds (`on_push_cancelled`);
- progress and log messages go to the attempt attached now, remapped to its progress token and
  filtered by its log level (translators/protocol/notifications.py), or are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from proxy.calls.attempt import Attempt
from proxy.upstream.base import Inbound
from translators.protocol.eras import CANCELLED
from translators.protocol.notifications import route_notification
from translators.protocol.pushes import is_push
from translators.protocol.subscriptions import SESSION_WIDE
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

Publish = Callable[[str, JsonObject], None]


class InboundTarget(Protocol):
    """What a call tells the router: whose it is and what to do with a push."""

    principal: str

    @property
    def upstream_progress_token(self) -> str | None: ...

    def on_push(self, inbound: Inbound) -> None: ...

    def on_push_cancelled(self, params: JsonObject) -> None: ...

    def current_attempt(self) -> Attempt | None:
        """The front request that receives the call's progress and logs now, if any."""
        ...


def route_inbound(inbound: Inbound, target: InboundTarget, publish: Publish) -> None:
    message = inbound.message
    if is_push(message):
        target.on_push(inbound)
        return
    method = message.get("method")
    if method in SESSION_WIDE:
        publish(target.principal, message)
    elif method == CANCELLED:
        target.on_push_cancelled(as_object(message.get("params")))
    else:
        attempt = target.current_attempt()
        if attempt is None:
            return
        routed = route_notification(
            message, target.upstream_progress_token, attempt.progress_token, attempt.log_level
        )
        if routed is not None:
            attempt.sink.send(routed)


__all__ = ["InboundTarget", "Publish", "route_inbound"]
