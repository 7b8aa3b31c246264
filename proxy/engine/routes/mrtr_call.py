"""The MRTR route: an MRTR-capable call (`tools/call`, `prompts/get`, `resources/read`), its first
attempt (`FirstCall`) and every retry (`Retry`), and the reply both give.

**First attempt.** The call's roots are settled first (proxy/calls/roots_affinity.py; the client
may be asked for them), then the call leases its session — exclusively where nothing links a
message to its call — checks the upstream's capability and the parameter headers, and runs the call
(proxy/calls/call.py, `Call`): plain until a push arrives, then held. Most calls end plain, with no
held-call state at all.

**Retry** (a request that carries `requestState`). The state is opened and checked, and the held
call it names claimed (proxy/calls/continuations.py); the session is raised to the retry's log
level; the answers are fed to the held call (`Call.retry`). A state that opens but names no held
call here goes to the recovery route (proxy/engine/routes/recover.py).

**Parameter headers.** A `tools/call` over HTTP must mirror the parameters its tool's schema
marks (`x-mcp-header`); the schema comes from the session's `tools/list` (remembered per session
key, `ToolSchemas`; listed once on demand when not yet known).

**Reply.** A held call's reply becomes the result: final, `InputRequiredResult` with a sealed
`requestState`, or an error.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from proxy.calls.attempt import ROUND_ATTRIBUTE, Reply
from proxy.calls.call import Call
from proxy.calls.roots_affinity import AskClient
from proxy.common.front_request import FrontRequest, NotificationSink, NullSink
from proxy.common.log_context import log_context
from proxy.engine.legacy_tasks.promoted import Promotion, TaskCreated
from proxy.engine.routes.outside_calls import publish
from proxy.engine.routes.plain_call import call_through
from proxy.engine.routes.route_context import (
    BRIDGE_INFO,
    RouteContext,
    log_level,
)
from proxy.observe import access, tracing
from proxy.observe.access import current_trace
from proxy.upstream.attribution import call_label
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease, SessionKey
from translators.held.events import ReplyError, ReplyInputRequired, ReplyResult
from translators.held.machine import Limits
from translators.protocol.eras import TOOLS_CALL, TOOLS_LIST
from translators.protocol.request_validation import check_param_headers as check_against_schema
from translators.protocol.requests import require_upstream_capability
from translators.protocol.results import input_required_result, legacy_result_to_modern
from translators.protocol.roots import PROBE, declares_roots, roots_input_requests
from translators.tasks_ext.messages import EXTENSION
from translators.wire.errors import (
    BridgeBug,
    InvalidParams,
    InvalidRequestState,
    UpstreamReturnedError,
)
from translators.wire.jsonrpc import JsonObject


class FirstCall:
    def __init__(self, ctx: RouteContext, promotion: Promotion | None = None) -> None:
        """`promotion`: a long call from a client that declared the Tasks extension may be answered
        with a task (proxy/engine/legacy_tasks/promoted.py); None when tasks are off."""
        self._ctx = ctx
        self._publish = functools.partial(publish, ctx)
        self._promotion = promotion
        self._limits = _held_limits(ctx)  # the settings are frozen: one for every call

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        return await self.start(request, sink, input_responses(self._ctx, request))

    async def start(
        self,
        request: FrontRequest,
        sink: NotificationSink,
        responses: JsonObject,
        *,
        authorize: Callable[[Lease], Awaitable[None]] | None = None,
    ) -> JsonObject:
        """Start the call pre-answered with `responses`; `authorize` (a recovery's policy)
        may refuse it once its session is leased, before anything is sent upstream."""
        ctx = self._ctx
        roots: JsonObject | AskClient | None = None
        if declares_roots(request.client_capabilities):
            # the first call of a process learns whether the upstream keeps roots (a short probe)
            with tracing.child(current_trace(), "roots affinity", internal=True):
                roots = await self._affine_roots(request, responses)
        if isinstance(roots, AskClient):
            # no session chosen yet
            own = BRIDGE_INFO if ctx.settings.server_identity == "bridge" else None
            return input_required_result(roots_input_requests(), None, server_info=own)
        fresh = ctx.settings.upstream.session_per_call
        lease = await self._call_lease(request, roots, fresh=fresh, authorize=authorize)
        upstream = ctx.upstream_request(request, lease.session)
        call = Call(
            registry=ctx.registry,
            principal=request.principal,
            lease=lease,
            upstream=upstream,
            attempt=ctx.attempt(request, sink),
            client_capabilities=request.client_capabilities,
            limits=self._limits,
            pre_answers=responses,
            publish=self._publish,
            spawn=self._spawn,
            discard_session=fresh,
        )
        # a long call from a client that declared the Tasks extension may become a task
        promotion = promotion_for(self._promotion, request)
        with tracing.child(current_trace(), f"upstream {upstream.method}", {ROUND_ATTRIBUTE: 0}):
            outcome = await (call.first() if promotion is None else promotion.first(call, request))
        if isinstance(outcome, TaskCreated):
            return outcome.result
        if isinstance(outcome, dict):
            return plain_result(ctx, request, lease.session, outcome)
        return reply_result(ctx, request, call, outcome)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> object:
        return self._ctx.tasks.spawn(coro, name="plain-call-end")

    def _needs_own_session(self, request: FrontRequest) -> bool:
        """Whether the call must lease its session exclusively (docs/architecture.md, "Session
        sharing"): always over stdio and HTTP+SSE (or before auto-detection has chosen), where
        nothing links a message to its call (progress and logs included); over Streamable HTTP only
        if the session declares something a push needs. Otherwise the call shares a session: what
        it says arrives on its own POST stream, and any push is refused (never forwarded)."""
        ctx = self._ctx
        if ctx.settings.upstream.command or not ctx.pool.transport.streams_per_call:
            return True
        legacy = request.legacy_capabilities
        return "elicitation" in legacy or "sampling" in legacy or "roots" in legacy

    async def _call_lease(
        self,
        request: FrontRequest,
        roots: JsonObject | None,
        *,
        fresh: bool,
        authorize: Callable[[Lease], Awaitable[None]] | None = None,
    ) -> Lease:
        """The session the call runs on, settled, checked (and authorized) and at the call's log
        level."""
        ctx = self._ctx
        own = fresh or self._needs_own_session(request)
        # a call that may receive pushes is labelled: it shares its session once the upstream is
        # seen to send that call's pushes on its own POST stream (proxy/upstream/attribution.py)
        label = call_label(request.method, request.params) if own and not fresh else None
        lease = await ctx.lease(request, exclusive=own, roots=roots, fresh=fresh, label=label)
        try:
            if lease.key.roots_answer is not None:
                await ctx.roots.settle(lease)
            require_upstream_capability(
                request.method,
                lease.session.init_result.get("capabilities") or {},
                lease.session.revision,
            )
            await check_param_headers(ctx, request, lease)
            if not fresh and request.principal in ctx.listens.listening:
                await ctx.listens.follow(lease, ctx.pool.share)
            if authorize is not None:
                await authorize(lease)
            await ctx.log_levels.raise_to(lease.session, log_level(request))
        except BaseException:
            await lease.release()
            raise
        return lease

    async def _affine_roots(
        self, request: FrontRequest, responses: JsonObject
    ) -> JsonObject | AskClient | None:
        ctx = self._ctx
        return await ctx.roots.roots_for_call(
            request.client_capabilities,
            responses,
            lambda legacy, key: ctx.pool.lease(
                SessionKey(request.principal, key, PROBE),
                legacy,
                exclusive=True,
                headers=ctx.headers(request),
            ),
        )


def _held_limits(ctx: RouteContext) -> Limits:
    """A held call's limits, from the `held` and `front` settings."""
    held, front = ctx.settings.held, ctx.settings.front
    return Limits(
        batch_quiet_s=held.batch_quiet_ms / 1000,
        batch_max_s=held.batch_max_ms / 1000,
        attempt_timeout_s=front.request_timeout_s,
        held_ttl_s=held.ttl_s,
        max_rounds=held.max_rounds,
        max_pushes_per_round=held.max_pushes_per_round,
        max_pushes_per_call=held.max_pushes_per_call,
    )


# A state that opened but named no held call here: the recovery route's entry
# (proxy/engine/routes/recover.py)
OnLost = Callable[
    [FrontRequest, NotificationSink, InvalidRequestState, JsonObject], Awaitable[JsonObject]
]


class Retry:
    def __init__(
        self,
        ctx: RouteContext,
        *,
        on_lost: OnLost | None = None,
        promotion: Promotion | None = None,
    ) -> None:
        self._ctx = ctx
        self._on_lost = on_lost
        self._promotion = promotion  # a long retry may become a task, as a long first call

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        responses = input_responses(ctx, request)
        try:
            call, claims = ctx.continuations.claim(request)
        except InvalidRequestState as refused:
            if self._on_lost is None:
                raise
            return await self._on_lost(request, sink, refused, responses)
        tracing.adopt(current_trace(), claims.trace)
        await ctx.log_levels.raise_to(call.session, log_level(request))
        with log_context(round=claims.round):
            retried = call.retry(ctx.attempt(request, sink), claims.round, responses)
            promotion = promotion_for(self._promotion, request)
            reply = await (
                retried if promotion is None else promotion.reply(request, call, retried)
            )
        if isinstance(reply, TaskCreated):  # the call runs on as a task
            return reply.result
        return reply_result(ctx, request, call, reply)


def promotion_for(promotion: Promotion | None, request: FrontRequest) -> Promotion | None:
    """`promotion` for a `tools/call` whose own request declared the Tasks extension: only such a
    call may become a task."""
    if promotion is None or request.method != TOOLS_CALL or EXTENSION not in request.extensions:
        return None
    return promotion


def input_responses(ctx: RouteContext, request: FrontRequest) -> JsonObject:
    """The request's `inputResponses`, checked for shape and size (`{}` when it has none)."""
    if "inputResponses" not in request.params:
        return {}
    responses = request.params["inputResponses"]
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


async def check_param_headers(ctx: RouteContext, request: FrontRequest, lease: Lease) -> None:
    if request.transport != "http" or request.method != TOOLS_CALL:
        return
    schemas = ctx.tool_schemas.get(lease.key)
    if schemas is None:
        schemas = await list_tools(ctx, request, lease)
    name = str(request.params.get("name"))
    if not ctx.tool_schemas.mentions_headers(lease.key, name):
        return  # nothing in its schema names a header: nothing to check
    arguments = request.params.get("arguments")
    check_against_schema(
        schemas.get(name, {}),
        arguments if isinstance(arguments, dict) else {},
        request.param_headers,
    )


async def list_tools(
    ctx: RouteContext, request: FrontRequest, lease: Lease
) -> dict[str, JsonObject]:
    """List the upstream's tools on `lease` (first page) and remember them; name -> inputSchema."""
    listing = FrontRequest(
        request.front_request_id,
        TOOLS_LIST,
        {},
        request.principal,
        authorization=request.authorization,
        trace_headers=request.trace_headers,
    )
    return ctx.tool_schemas.remember(lease.key, await call_through(ctx, lease, listing, NullSink()))


__all__ = [
    "FirstCall",
    "OnLost",
    "Retry",
    "check_param_headers",
    "input_responses",
    "list_tools",
    "plain_result",
    "reply_result",
]
