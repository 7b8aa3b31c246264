"""One modern request end to end: translate, run upstream, translate back (DESIGN § 2).

`Engine.handle()` is the one boundary where bridge exceptions become JSON-RPC error responses.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from collections.abc import Awaitable, Callable
from importlib.metadata import version

import structlog

from config.settings import Settings
from proxy.auth_passthrough import public_urls_of
from proxy.context import FrontRequest, NotificationSink, NullSink
from proxy.continuations import Continuations
from proxy.drain import Drain
from proxy.faults import reported_error
from proxy.held_calls import (
    HELD_ABANDON_S,
    Attempt,
    CallDriver,
    HeldCallRegistry,
    Reply,
    UpstreamRequest,
    progress_meta_token,
)
from proxy.metrics import BridgeMetrics
from proxy.recovery import LostCall, Recovery
from proxy.roots import AskClient, RootsAffinity
from proxy.subscriptions import ListenHub
from proxy.tasks import TaskOwner
from proxy.tool_schemas import ToolSchemas
from proxy.upstream.base import Inbound, JsonObject, UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.canonical import as_object
from translators.capabilities import modern_client_capabilities_to_legacy
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
    ShuttingDown,
    UpstreamReturnedError,
    UpstreamTimeout,
    error_response,
    to_error_response,
)
from translators.held_call import Limits, ReplyError, ReplyResult
from translators.inbound import check_param_headers
from translators.notifications import log_level_admits, route_notification
from translators.oauth import UpstreamAuthChallenge, challenge_reply
from translators.pushes import is_push, unowned_push_answer
from translators.recovery_policy import needs_annotations
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
from translators.roots import (
    PROBE,
    is_roots_ask,
    roots_input_requests,
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
        self._public_urls = public_urls_of(settings)
        self._held = settings.held
        self.registry = HeldCallRegistry(max_per_principal=settings.held.max_per_principal,
                                         max_total=settings.held.max_total)
        self._continuations = Continuations(keyring, settings.held, self.registry, settings.recovery)
        self._tasks = TaskOwner()
        self._progress_tokens = itertools.count(1)
        self._tool_schemas = ToolSchemas()
        self._ready = False
        self.listens = ListenHub()
        self._drain = Drain()
        self._close_wait_s = HELD_ABANDON_S
        self._log_levels: weakref.WeakKeyDictionary[UpstreamSession, str] = weakref.WeakKeyDictionary()
        self.roots = RootsAffinity(settings.upstream, pool)
        self._fresh_sessions = itertools.count(1)
        self.metrics = metrics if metrics is not None else BridgeMetrics()
        self.recovery = Recovery(settings.recovery, self._continuations, self.registry, self.metrics)
        self.metrics.watch(held_now=self.registry.held_now, in_progress=self.registry.__len__,
                           rounds_total=lambda: self.registry.rounds_total, pool_stats=pool.stats,
                           transport="stdio" if settings.upstream.command else "http")

    # ---- the boundary ---------------------------------------------------------------------------

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        """Answer one modern request with one JSON-RPC response; never raises (but propagates cancellation)."""
        if self._drain.stopping:
            return to_error_response(ShuttingDown(), request.front_request_id)
        started = time.monotonic()
        task = self._drain.enter()
        try:
            response = await self._answer(request, sink)
        except asyncio.CancelledError:
            if not self._drain.was_cut(task):
                self.metrics.observe_cancelled(request.method, time.monotonic() - started)
                raise
            response = to_error_response(ShuttingDown(), request.front_request_id)
        finally:
            self._drain.leave(task)
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
            except UpstreamAuthChallenge as exc:  # the HTTP front answers with the upstream's status
                log.info("front_request_challenged", status=exc.status)
                self.metrics.observe_error(exc)
                return challenge_reply(exc, rid, self._public_urls)
            except BridgeError as exc:
                self.metrics.observe_error(exc)
                return error_response(rid, reported_error(exc))
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

    def _session_key(self, request: FrontRequest, roots: JsonObject | None = None,
                     fresh: bool = False) -> tuple[SessionKey, JsonObject]:
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        legacy = modern_client_capabilities_to_legacy(caps if isinstance(caps, dict) else {})
        return self.roots.session_key(request.principal, legacy, roots, next(self._fresh_sessions) if fresh else None)

    def _headers(self, request: FrontRequest) -> dict[str, str]:
        headers = dict(request.trace_headers)
        upstream = self._settings.upstream
        if upstream.authorization is not None:
            headers["Authorization"] = upstream.authorization.get_secret_value()
        elif upstream.forward_authorization and request.authorization:
            headers["Authorization"] = request.authorization
        return headers

    async def _lease(self, request: FrontRequest, *, exclusive: bool, roots: JsonObject | None = None,
                     fresh: bool = False) -> Lease:
        key, legacy_caps = self._session_key(request, roots, fresh)
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
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        legacy_caps = modern_client_capabilities_to_legacy(caps if isinstance(caps, dict) else {})
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
                                      f"{self._settings.front.request_timeout_s:g} s", public=True) from None
            raise

    def _refuse(self, session: UpstreamSession, push: JsonObject) -> None:
        answer = unowned_push_answer(push, self._settings.upstream.unowned_roots, session.revision)
        log.info("push_unowned", push_method=push.get("method"))
        self._tasks.spawn(session.respond(push["id"], result=answer.result, error=answer.error),
                          name="unowned-push-answer")

    def on_unowned(self, session: UpstreamSession, inbound: Inbound) -> None:
        """A message on a session's GET stream while no interactive call holds the session."""
        if is_roots_ask(inbound.message):
            answer = self.roots.answer_outside_call(session)
            if answer is not None:
                log.info("push_roots_answered", affine=True)
                self._tasks.spawn(session.respond(inbound.message["id"], result=answer.result, error=answer.error),
                                  name="roots-answer")
                return
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
            schemas = await self._list_tools(request, lease)
        arguments = request.params.get("arguments")
        check_param_headers(schemas.get(str(request.params.get("name")), {}),
                            arguments if isinstance(arguments, dict) else {}, request.param_headers)

    async def _list_tools(self, request: FrontRequest, lease: Lease) -> dict[str, JsonObject]:
        """List the upstream's tools on `lease` (first page) and remember them; name -> inputSchema."""
        listing = FrontRequest(request.front_request_id, TOOLS_LIST, {}, request.principal,
                               authorization=request.authorization, trace_headers=request.trace_headers)
        return self._tool_schemas.remember(lease.key, await self._call_through(lease, listing, NullSink()))

    async def _tool_annotations(self, request: FrontRequest, lease: Lease) -> JsonObject | None:
        """The annotations of the called tool as the upstream lists it (None: not listed)."""
        annotations = self._tool_schemas.annotations(lease.key)
        if annotations is None:
            await self._list_tools(request, lease)
            annotations = self._tool_schemas.annotations(lease.key) or {}
        return annotations.get(str(request.params.get("name")))

    # ---- the MRTR trio ---------------------------------------------------------------------------

    async def _mrtr(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        responses = request.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise InvalidParams("inputResponses must be an object mapping input keys to results")
        self._continuations.check_input_responses(responses)
        if "requestState" in request.params:
            try:
                driver, claims = self._continuations.claim(request)
            except InvalidRequestState as refused:
                return await self.recover(request, sink, self.recovery.lost_call(request, refused, responses))
            level = request.meta.get(META_LOG_LEVEL)
            await self._set_log_level(driver.session, level if isinstance(level, str) else None)
            with structlog.contextvars.bound_contextvars(continuation_id=driver.continuation_id.hex()[:12],
                                                         round=claims.round):
                reply = await driver.retry(self._attempt(request, sink), claims.round, responses)
            return self._reply(request, driver, reply)
        return await self._first_attempt(request, sink, responses)

    async def recover(self, request: FrontRequest, sink: NotificationSink, lost: LostCall) -> JsonObject:
        """Start a lost held call again if the recovery policy allows it (proxy/recovery.py); the replica
        forwarding calls this with `Recovery.lost_call(..., owner_unreachable=True)`. Raises the fixed
        invalid-requestState error when refused."""
        async def authorize(lease: Lease) -> None:
            if needs_annotations(self.recovery.settings.reexecute, request.method):
                self.recovery.authorize(request, lost, await self._tool_annotations(request, lease))
            self.recovery.started(lost)

        return await self._first_attempt(request, sink, lost.answers, authorize=authorize)

    async def _first_attempt(self, request: FrontRequest, sink: NotificationSink, responses: JsonObject, *,
                             authorize: Callable[[Lease], Awaitable[None]] | None = None) -> JsonObject:
        roots = await self._affine_roots(request, responses)
        if isinstance(roots, AskClient):
            own = BRIDGE_INFO if self._settings.server_identity == "bridge" else None  # no session chosen yet
            return input_required_result(roots_input_requests(), None, server_info=own)
        fresh = self._settings.upstream.session_per_call
        lease = await self._call_lease(request, roots, fresh=fresh, authorize=authorize)
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        driver = CallDriver(registry=self.registry, principal=request.principal, lease=lease,
                            upstream=self._upstream_request(request, lease.session),
                            client_capabilities=caps if isinstance(caps, dict) else {},
                            limits=self._limits(), pre_answers=responses, publish=self._publish,
                            discard_session=fresh)
        self.registry.add(driver)
        with structlog.contextvars.bound_contextvars(continuation_id=driver.continuation_id.hex()[:12]):
            reply = await driver.first_attempt(self._attempt(request, sink))
        return self._reply(request, driver, reply)

    async def _call_lease(self, request: FrontRequest, roots: JsonObject | None, *, fresh: bool,
                          authorize: Callable[[Lease], Awaitable[None]] | None = None) -> Lease:
        """The session an interactive call runs on, settled, checked (and, for a recovery, authorized)
        and at the call's log level."""
        lease = await self._lease(request, exclusive=fresh or self._needs_own_session(request), roots=roots,
                                  fresh=fresh)
        try:
            await self.roots.settle(lease)
            require_upstream_capability(request.method, lease.session.init_result.get("capabilities") or {},
                                        lease.session.revision)
            await self._check_param_headers(request, lease)
            if authorize is not None:
                await authorize(lease)
            level = request.meta.get(META_LOG_LEVEL)
            await self._set_log_level(lease.session, level if isinstance(level, str) else None)
        except BaseException:
            await lease.release()
            raise
        return lease

    async def _affine_roots(self, request: FrontRequest, responses: JsonObject) -> JsonObject | AskClient | None:
        caps = request.meta.get(META_CLIENT_CAPABILITIES)
        return await self.roots.roots_for_call(caps if isinstance(caps, dict) else {}, responses,
                                               lambda legacy, key: self._pool.lease(
                                                   SessionKey(request.principal, key, PROBE), legacy, exclusive=True,
                                                   headers=self._headers(request)))

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
        """Refuse new work, end every listen stream gracefully, and abandon the held calls waiting for
        their clients (their retries would be refused): pushes refused, calls cancelled upstream."""
        if self._drain.stopping:
            return
        self._drain.stop()
        self.registry.closing = True
        self.listens.close_all("shutdown")
        self._tasks.spawn(self.registry.abandon_waiting(), name="abandon-held-calls")

    async def drain(self, deadline: float, cut_wait_s: float) -> None:
        """Let the requests in flight finish until `deadline` (loop time), then cut them off."""
        self.begin_shutdown()
        await self._drain.drain(deadline, cut_wait_s, lambda: self.registry.abort_all("bridge shutting down"))
        self._close_wait_s = cut_wait_s / 2  # what is left of the closing reserve for held calls

    async def aclose(self) -> None:
        self.begin_shutdown()
        await self.registry.aclose(self._close_wait_s)
        await self._tasks.aclose()


__all__ = ["BRIDGE_INFO", "Engine"]
