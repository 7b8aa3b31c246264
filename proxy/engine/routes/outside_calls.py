"""Upstream messages no front request asked for: unowned pushes and session-wide notifications.

A push (elicitation, sampling, roots) that arrives while no interactive call can turn it into an
`InputRequiredResult` is refused upstream with the answer translators/protocol/pushes.py chooses
(see docs/architecture.md, "Pushes outside an interactive call"). A session-wide notification (list
changed, resource updated) drops what it makes stale and is fanned out to the principal's listen
streams.
"""

from __future__ import annotations

import structlog

from proxy.engine.routes.route_context import RouteContext
from proxy.upstream.base import Inbound, UpstreamSession
from translators.protocol.eras import TOOLS_LIST_CHANGED
from translators.protocol.pushes import is_push, unowned_push_answer
from translators.protocol.roots import is_roots_ask
from translators.protocol.subscriptions import SESSION_WIDE
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()


def refuse_push(ctx: RouteContext, session: UpstreamSession, push: JsonObject) -> None:
    answer = unowned_push_answer(push, ctx.settings.upstream.unowned_roots, session.revision)
    log.info("push_unowned", push_method=push.get("method"))
    ctx.tasks.spawn(
        session.respond(push["id"], result=answer.result, error=answer.error),
        name="unowned-push-answer",
    )


def publish(ctx: RouteContext, principal: str, message: JsonObject) -> None:
    """A session-wide upstream notification: drop what it makes stale, then fan it out."""
    if message.get("method") == TOOLS_LIST_CHANGED:
        ctx.tool_schemas.forget_principal(principal)
    ctx.listens.publish(principal, message)


def on_unowned(ctx: RouteContext, session: UpstreamSession, inbound: Inbound) -> None:
    """A message on a session's GET stream while no interactive call holds the session."""
    if is_roots_ask(inbound.message):
        answer = ctx.roots.answer_outside_call(session)
        if answer is not None:
            log.info("push_roots_answered", affine=True)
            ctx.tasks.spawn(
                session.respond(inbound.message["id"], result=answer.result, error=answer.error),
                name="roots-answer",
            )
            return
    if is_push(inbound.message):
        refuse_push(ctx, session, inbound.message)
        return
    key = ctx.pool.key_of(session)
    if key is not None and inbound.message.get("method") in SESSION_WIDE:
        publish(ctx, key.principal, inbound.message)


__all__ = ["on_unowned", "publish", "refuse_push"]
