"""One modern request end to end: translate, run upstream, translate back (DESIGN § 2).

`Engine.handle()` is the one boundary where bridge exceptions become JSON-RPC error responses.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from importlib.metadata import version

import structlog

from config.settings import Settings
from proxy.context import FrontRequest, NotificationSink, NullSink
from proxy.continuations import Continuations
from proxy.held_calls import (
    Attempt,
    CallDriver,
    HeldCallRegistry,
    Reply,
    UpstreamRequest,
    progress_meta_token,
)
from proxy.metrics import BridgeMetrics
from proxy.subscriptions import ListenHub
from proxy.tasks import TaskOwner
from proxy.tool_schemas import ToolSchemas
from proxy.upstream.base import Inbound, JsonObject, UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.canonical import as_object
from translators.capabilities import capability_fingerprint, modern_client_capabilities_to_legacy
from translators.eras import (
    DISCOVER,
    FORWARDED_METHODS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    MRTR_METHODS,
    RESOURCES_READ,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.errors import (
    INTERNAL_ERROR,
    BridgeBug,
    BridgeError,
    InvalidParams,
    InvalidRequestState,
    MethodNotFound,
    UpstreamReturnedError,
    UpstreamTimeout,
    error_response,
    to_error_response,
)
from translators.held_call import Limits, ReplyError, ReplyResult
from translators.inbound import check_param_headers
from translators.notifications import log_level_admits, route_notification
from translators.pushes import is_push, unowned_push_answer
from translators.request_state import (
    KeyRing,
)
from translators.requests import modern_params_to_legacy, require_upstream_capability
from translators.results import (
    CacheHints,
    discover_result,
    input_required_result,
    legacy_error_to_modern,
    legacy_result_to_modern,
)
from translators.subscriptions import SESSION_WIDE, TOOLS_LIST_CHANGED

log = structlog.get_logger()
PUSH_CAPABILITIES = ("elicitation", "sampling", "roots")
BRIDGE_INFO: JsonObject = {"name": "mrtr-bridge", "version": version("mrtr-bridge")}


class Engine:
    """Routes validated modern requests to the legacy upstream and back."""

    def __init__(self, settings: Settings, pool: UpstreamPool, keyring: KeyRing, *,
                 metrics: BridgeMetrics | None = None) -> None:
        self._settings = settings
        self._pool = pool
        self._keyring = keyring
        self._cache = CacheHints(settings.cache.ttl_ms, settings.cache.scope)
        self._held = settings.held
        self.registry = HeldCallRegistry(max_per_principal=settings.held.max_per_principal,
                                         max_total=settings.held.max_total)
        self._continuations = Continuations(keyring, settings.held, self.registry)
        self._tasks = TaskOwner()
        self._progress_tokens = itertools.count(1)
        self._tool_schemas = ToolSchemas()
        self._ready = False
        self.listens = ListenHub()
        self._log_levels: weakref.WeakKeyDictionary[UpstreamSession, str] = weakref.WeakKeyDictionary()
        self.metrics = metrics if metrics is not None else BridgeMetrics()
        self.metrics.watch(held_now=self.registry.held_now, in_progress=self.registry.__len__,
                           rounds_total=lambda: self.registry.rounds_total, pool_stats=pool.stats,
                           transport="stdio" if settings.upstream.command else "http")

    # ---- the boundary ---------------------------------------------------------------------------

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        """Answer one modern request with one JSON-RPC response; never raises (but propagates cancellation)."""
        started = time.monotonic()
        try:
            response = await self._answer(request, sink)
        except asyncio.CancelledError:
            self.metrics.observe_cancelled(request.method, time.monotonic() - started)
            raise
        self.metrics.observe_response(request.method, response, time.monotonic() - started)
        return response

    async def _answer(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        rid = request.front_request_id
        with structlog.contextvars.bound_contextvars(request_id=rid, method=request.method,
                                                     principal=request.principal[:12]):
            try:
                return {"jsonrpc": "2.0", "id": rid, "result": await self._route(request, sink)}
            except UpstreamReturnedError as exc:
                self.metrics.observe_error(exc)
                uri = request.params.get("uri") if request.method == RESOURCES_READ else None
                return error_response(rid, legacy_error_to_modern(exc.error, request_uri=uri))
            except InvalidRequestState as exc:
                log.warning("request_state_rejected", reason=exc.reason)
                self.metrics.observe_error(exc)
                return to_error_response(exc, rid)
            except BridgeBug as exc:
                log.error("bridge_bug", detail=exc.detail)
                return to_error_response(exc, rid)
            except BridgeError as exc:
                log.info("front_request_failed", code=exc.code, error=exc.message)
                self.metrics.observe_error(exc)
                return to_error_response(exc, rid)
            except Exception:
                log.exception("front_request_crashed")
                return error_response(rid, {"code": INTERNAL_ERROR, "message": "Internal error"})

    async def _route(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        if request.method == DISCOVER:
            return await self._discover(request)
        if request.method in MRTR_METHODS:
            return await self._mrtr(request, sink)
        if request.method in FORWARDED_METHODS:
            return await self._forward(request, sink)
        if request.method == SUBSCRIPTIONS_LISTEN:
            return await self.listens.listen(request, sink, lambda: self._lease(request, exclusive=False),
                                             self._server_info)
        raise MethodNotFound(f"Method not found: {request.method}")

    # ---- plumbing shared by every path ----------------------------------------------------------

    def _session_key(self, request: FrontRequest) -> tuple[SessionKey, JsonObject]:
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        legacy = modern_client_capabilities_to_legacy(caps if isinstance(caps, dict) else {})
        return SessionKey(request.principal, capability_fingerprint(legacy)), legacy

    def _headers(self, request: FrontRequest) -> dict[str, str]:
        headers = dict(request.trace_headers)
        upstream = self._settings.upstream
        if upstream.authorization is not None:
            headers["Authorization"] = upstream.authorization.get_secret_value()
        elif upstream.forward_authorization and request.authorization:
            headers["Authorization"] = request.authorization
        return headers

    async def _lease(self, request: FrontRequest, *, exclusive: bool) -> Lease:
        key, legacy_caps = self._session_key(request)
        lease = await self._pool.lease(key, legacy_caps, exclusive=exclusive, headers=self._headers(request))
        self._ready = True
        return lease

    def _server_info(self, session: UpstreamSession) -> JsonObject | None:
        if self._settings.server_identity == "bridge":
            return BRIDGE_INFO
        info = session.init_result.get("serverInfo")
        return info if isinstance(info, dict) else BRIDGE_INFO

    def _needs_own_session(self, request: FrontRequest) -> bool:
        """Whether an MRTR-capable call must lease its session exclusively (DESIGN § 3): always over
        stdio and HTTP+SSE (or before auto-detection has chosen), where nothing links a message to its
        call (progress and logs included); over Streamable HTTP only if the session declares
        something a push needs. Otherwise the call shares a session: what
        it says arrives on its own POST stream, and any push is refused (never forwarded)."""
        if self._settings.upstream.command or not self._pool.transport.streams_per_call:
            return True
        _, legacy_caps = self._session_key(request)
        return any(name in legacy_caps for name in PUSH_CAPABILITIES)

    def _upstream_request(self, request: FrontRequest, session: UpstreamSession) -> UpstreamRequest:
        token = f"mrtr-{next(self._progress_tokens)}"
        # An interactive call always gets an upstream token: a later round may ask for progress.
        wants = request.method in MRTR_METHODS or progress_meta_token(request.params) is not None
        params = modern_params_to_legacy(request.params, upstream_progress_token=token if wants else None,
                                         method=request.method, revision=session.revision)
        return UpstreamRequest(request.method, params, self._headers(request), token)

    def _attempt(self, request: FrontRequest, sink: NotificationSink) -> Attempt:
        level = request.meta.get(META_LOG_LEVEL)
        return Attempt(self.registry.next_attempt_id(), sink, progress_meta_token(request.params),
                       level if isinstance(level, str) else None)

    # ---- server/discover and plain forwarding ---------------------------------------------------

    async def _discover(self, request: FrontRequest) -> JsonObject:
        lease = await self._lease(request, exclusive=False)
        try:
            session = lease.session
            return discover_result(session.init_result, server_info=self._server_info(session),
                                   cache=self._cache, listen_supported=session.has_get_stream)
        finally:
            await lease.release()

    async def _forward(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        """A request that may not be answered with InputRequiredResult (lists, completion)."""
        lease = await self._lease(request, exclusive=False)
        try:
            require_upstream_capability(request.method, lease.session.init_result.get("capabilities") or {},
                                        lease.session.revision)
            result = await self._call_through(lease, request, sink)
            if request.method == TOOLS_LIST and "cursor" not in request.params:
                self._tool_schemas.remember(lease.key, result)
            return legacy_result_to_modern(request.method, result, server_info=self._server_info(lease.session),
                                           cache=self._cache)
        finally:
            await lease.release()

    async def _call_through(self, lease: Lease, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        upstream = self._upstream_request(request, lease.session)
        attempt = self._attempt(request, sink)

        def on_inbound(inbound: Inbound) -> None:
            if is_push(inbound.message):  # NC-6: no InputRequiredResult here, refuse upstream
                self._refuse(lease.session, inbound.message)
                return
            if inbound.message.get("method") in SESSION_WIDE:
                self._publish(request.principal, inbound.message)
                return
            routed = route_notification(inbound.message, upstream.progress_token, attempt.progress_token,
                                        attempt.log_level)
            if routed is not None:
                sink.send(routed)

        await self._set_log_level(lease.session, attempt.log_level)
        call = lease.session.start(upstream.method, upstream.params, headers=upstream.headers, on_inbound=on_inbound)
        try:
            async with asyncio.timeout(self._settings.front.request_timeout_s):
                return await call.result()
        except (asyncio.CancelledError, TimeoutError) as exc:
            await asyncio.shield(call.cancel("request cancelled by the client" if isinstance(
                exc, asyncio.CancelledError) else "request timed out"))
            if isinstance(exc, TimeoutError):
                raise UpstreamTimeout(f"The upstream did not answer within "
                                      f"{self._settings.front.request_timeout_s:g} s") from None
            raise

    def _refuse(self, session: UpstreamSession, push: JsonObject) -> None:
        answer = unowned_push_answer(push, self._settings.upstream.unowned_roots, session.revision)
        log.info("push_unowned", push_method=push.get("method"))
        self._tasks.spawn(session.respond(push["id"], result=answer.result, error=answer.error),
                          name="unowned-push-answer")

    def on_unowned(self, session: UpstreamSession, inbound: Inbound) -> None:
        """A message on a session's GET stream while no interactive call holds the session."""
        if is_push(inbound.message):
            self._refuse(session, inbound.message)
            return
        key = self._pool.key_of(session)
        if key is not None and inbound.message.get("method") in SESSION_WIDE:
            self._publish(key.principal, inbound.message)

    def _publish(self, principal: str, message: JsonObject) -> None:
        """A session-wide upstream notification: drop what it makes stale, then fan it out."""
        if message.get("method") == TOOLS_LIST_CHANGED:
            self._tool_schemas.forget_principal(principal)
        self.listens.publish(principal, message)

    async def _set_log_level(self, session: UpstreamSession, wanted: str | None) -> None:
        """Make the legacy session at least as verbose as this request asked (NC-8); never quieter, as
        other requests on the session may want more; each request is filtered to its own level."""
        current = self._log_levels.get(session)
        if wanted is None or (current is not None and log_level_admits(current, wanted)):
            return
        if not isinstance(as_object(session.init_result.get("capabilities")).get("logging"), dict):
            return
        self._log_levels[session] = wanted
        try:
            async with asyncio.timeout(self._settings.upstream.init_timeout_s):
                await session.start("logging/setLevel", {"level": wanted}, headers={}, on_inbound=None).result()
        except (BridgeError, TimeoutError):
            log.warning("upstream_set_level_failed", level=wanted)

    # ---- x-mcp-header ----------------------------------------------------------------------------

    async def _check_param_headers(self, request: FrontRequest, lease: Lease) -> None:
        if request.transport != "http" or request.method != TOOLS_CALL:
            return
        schemas = self._tool_schemas.get(lease.key)
        if schemas is None:
            listing = FrontRequest(request.front_request_id, TOOLS_LIST, {}, request.principal,
                                   authorization=request.authorization, trace_headers=request.trace_headers)
            schemas = self._tool_schemas.remember(lease.key, await self._call_through(lease, listing, NullSink()))
        arguments = request.params.get("arguments")
        check_param_headers(schemas.get(str(request.params.get("name")), {}),
                            arguments if isinstance(arguments, dict) else {}, request.param_headers)

    # ---- the MRTR trio ---------------------------------------------------------------------------

    async def _mrtr(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        responses = request.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise InvalidParams("inputResponses must be an object mapping input keys to results")
        self._continuations.check_input_responses(responses)
        if "requestState" in request.params:
            driver, claims = self._continuations.claim(request)
            level = request.meta.get(META_LOG_LEVEL)
            await self._set_log_level(driver.session, level if isinstance(level, str) else None)
            with structlog.contextvars.bound_contextvars(continuation_id=driver.continuation_id.hex()[:12],
                                                         round=claims.round):
                reply = await driver.retry(self._attempt(request, sink), claims.round, responses)
            return self._reply(request, driver, reply)
        self.registry.check_capacity(request.principal)
        lease = await self._lease(request, exclusive=self._needs_own_session(request))
        try:
            require_upstream_capability(request.method, lease.session.init_result.get("capabilities") or {},
                                        lease.session.revision)
            await self._check_param_headers(request, lease)
            level = request.meta.get(META_LOG_LEVEL)
            await self._set_log_level(lease.session, level if isinstance(level, str) else None)
        except BaseException:
            await lease.release()
            raise
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        driver = CallDriver(registry=self.registry, principal=request.principal, lease=lease,
                            upstream=self._upstream_request(request, lease.session),
                            client_capabilities=caps if isinstance(caps, dict) else {},
                            limits=self._limits(), pre_answers=responses, publish=self._publish)
        self.registry.add(driver)
        with structlog.contextvars.bound_contextvars(continuation_id=driver.continuation_id.hex()[:12]):
            reply = await driver.first_attempt(self._attempt(request, sink))
        return self._reply(request, driver, reply)

    def _limits(self) -> Limits:
        held = self._held
        return Limits(batch_quiet_s=held.batch_quiet_ms / 1000, batch_max_s=held.batch_max_ms / 1000,
                      attempt_timeout_s=self._settings.front.request_timeout_s, held_ttl_s=held.ttl_s,
                      max_rounds=held.max_rounds)

    def _reply(self, request: FrontRequest, driver: CallDriver, reply: Reply) -> JsonObject:
        server_info = self._server_info(driver.session)
        if isinstance(reply, ReplyResult):
            return legacy_result_to_modern(request.method, reply.result, server_info=server_info, cache=self._cache)
        if isinstance(reply, ReplyError):
            if reply.error is not None:
                raise UpstreamReturnedError(reply.error)
            raise reply.fault if reply.fault is not None else BridgeBug("error reply without an error")
        return input_required_result(reply.input_requests, self._continuations.seal(request, driver, reply),
                                     server_info=server_info)

    # ---- lifetime --------------------------------------------------------------------------------

    def is_ready(self) -> bool:
        return self._ready

    def begin_shutdown(self) -> None:
        """Stop accepting long-lived work: end every listen stream gracefully."""
        self.listens.close_all("shutdown")

    async def aclose(self) -> None:
        self.begin_shutdown()
        await self.registry.aclose()
        await self._tasks.aclose()


__all__ = ["BRIDGE_INFO", "Engine"]
