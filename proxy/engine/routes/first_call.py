"""Route for the first attempt of an MRTR-capable call (`tools/call`, `prompts/get`,
`resources/read`).

The call's roots are settled first (proxy/calls/roots_affinity.py; the client may be asked for
them), then the
call leases its session — exclusively where nothing links a message to its call — checks the
upstream's capability and the parameter headers, and runs the call (proxy/calls/call.py, `Call`):
plain until a push arrives, then held, its reply becoming the result — final,
`InputRequiredResult` with a sealed `requestState`, or an error. Most calls end plain, with no
held-call state at all.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from proxy.calls.attempt import ROUND_ATTRIBUTE
from proxy.calls.call import Call
from proxy.calls.roots_affinity import AskClient
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.legacy_tasks.promoted import Promotion, TaskCreated
from proxy.engine.routes.mrtr import input_responses, plain_result, reply_result
from proxy.engine.routes.outside_calls import publish
from proxy.engine.routes.param_headers import check_param_headers
from proxy.engine.routes.route_context import (
    BRIDGE_INFO,
    RouteContext,
    log_level,
)
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.upstream.attribution import call_label
from proxy.upstream.pool import Lease, SessionKey
from translators.held.machine import Limits
from translators.protocol.requests import require_upstream_capability
from translators.protocol.results import input_required_result
from translators.protocol.roots import PROBE, declares_roots, roots_input_requests
from translators.wire.jsonrpc import JsonObject


class FirstCall:
    def __init__(self, ctx: RouteContext) -> None:
        self._ctx = ctx
        self._publish = functools.partial(publish, ctx)
        # set by the engine: a long call from a client that declared the Tasks extension may be
        # answered with a task (proxy/engine/legacy_tasks/promoted.py)
        self.promotion: Promotion | None = None

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
            limits=self._limits(),
            pre_answers=responses,
            publish=self._publish,
            spawn=self._spawn,
            discard_session=fresh,
        )
        # a long call from a client that declared the Tasks extension may become a task
        promotion = self.promotion if self.promotion and self.promotion.applies(request) else None
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
            await ctx.roots.settle(lease)
            require_upstream_capability(
                request.method,
                lease.session.init_result.get("capabilities") or {},
                lease.session.revision,
            )
            await check_param_headers(ctx, request, lease)
            if not fresh:
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

    def _limits(self) -> Limits:
        held, front = self._ctx.settings.held, self._ctx.settings.front
        return Limits(
            batch_quiet_s=held.batch_quiet_ms / 1000,
            batch_max_s=held.batch_max_ms / 1000,
            attempt_timeout_s=front.request_timeout_s,
            held_ttl_s=held.ttl_s,
            max_rounds=held.max_rounds,
            max_pushes_per_round=held.max_pushes_per_round,
            max_pushes_per_call=held.max_pushes_per_call,
        )


__all__ = ["FirstCall"]
