"""What both MRTR routes (first attempt and retry) share: the input responses and the reply.

A `tools/call`, `prompts/get` or `resources/read` may be answered with `InputRequiredResult`;
proxy/engine/routes/first_call.py starts such a call, proxy/engine/routes/retry.py continues it.
"""

from __future__ import annotations

from proxy.calls.attempt import Reply
from proxy.calls.call import Call
from proxy.common.front_request import FrontRequest
from proxy.engine.routes.route_context import RouteContext
from proxy.observe import access, tracing
from proxy.upstream.base import UpstreamSession
from translators.held.events import ReplyError, ReplyInputRequired, ReplyResult
from translators.protocol.results import input_required_result, legacy_result_to_modern
from translators.wire.errors import BridgeBug, InvalidParams, UpstreamReturnedError
from translators.wire.jsonrpc import JsonObject


def input_responses(ctx: RouteContext, request: FrontRequest) -> JsonObject:
    """The request's `inputResponses`, checked for shape and size."""
    responses = request.params.get("inputResponses", {})
    if not isinstance(responses, dict):
        raise InvalidParams("inputResponses must be an object mapping input keys to results")
    ctx.continuations.check_input_responses(responses)
    return responses


def plain_result(
    ctx: RouteContext, request: FrontRequest, session: UpstreamSession, result: JsonObject
) -> JsonObject:
    """The modern `result` of a call that ended plain, with no input round
    (proxy/calls/call.py)."""
    access.note_rounds(rounds=0, asked=None, revision=session.revision.version)
    return legacy_result_to_modern(
        request.method, result, server_info=ctx.server_info(session), cache=ctx.cache
    )


def reply_result(ctx: RouteContext, request: FrontRequest, call: Call, reply: Reply) -> JsonObject:
    """The modern `result` for a held call's reply: final result, input required, or a raised
    error."""
    server_info = ctx.server_info(call.session)
    asked = reply.round if isinstance(reply, ReplyInputRequired) else None
    access.note_rounds(
        rounds=call.machine.round, asked=asked, revision=call.session.revision.version
    )
    trace = access.current_trace()
    if trace is not None and not call.trace_context:
        call.trace_context = tracing.call_context(trace)  # sealed into every round's state
    if isinstance(reply, ReplyResult):
        return legacy_result_to_modern(
            request.method, reply.result, server_info=server_info, cache=ctx.cache
        )
    if isinstance(reply, ReplyError):
        if reply.error is not None:
            raise UpstreamReturnedError(reply.error)
        raise reply.fault if reply.fault is not None else BridgeBug("error reply without an error")
    state = ctx.continuations.seal(request, call, reply)
    call.held_wait.start(access.current_trace(), reply.round)
    return input_required_result(reply.input_requests, state, server_info=server_info)


__all__ = ["input_responses", "plain_result", "reply_result"]
