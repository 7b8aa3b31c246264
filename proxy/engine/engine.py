"""The dispatcher: one modern request end to end, through the route its method chooses.

`Engine.handle()` is the one boundary where bridge exceptions become JSON-RPC error responses.
Each route lives in its own module under proxy/engine/routes/; `Engine._choose()` is the only place
that knows which request takes which route (docs/architecture.md, "Routes").

**Shutdown within one grace period** (`Drain`): the engine tracks its requests in flight (the
tasks inside `Engine.handle`). `stop()` refuses new work from then on; `drain(deadline)` waits for
the requests in flight until `deadline` (loop time) and then cuts the rest off: each such task is
cancelled (which cancels its upstream call) and `Engine.handle` turns that cancellation into a
JSON-RPC error saying the bridge is shutting down, so the client gets an answer rather than a
dropped connection. The whole timeline is in docs/operations.md § Shutdown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import structlog

from proxy.auth.oauth_passthrough import public_urls_of
from proxy.calls.registry import HELD_ABANDON_S
from proxy.common.faults import reported_error
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.log_context import log_context
from proxy.common.shown import shown_principal
from proxy.engine.legacy_tasks.routes import LegacyTasks, TaskCalls
from proxy.engine.routes import Route
from proxy.engine.routes.discover import Discover
from proxy.engine.routes.listen import Listen
from proxy.engine.routes.mrtr_call import FirstCall, Retry
from proxy.engine.routes.non_interactive import NonInteractive
from proxy.engine.routes.outside_calls import on_unowned
from proxy.engine.routes.recover import Recover
from proxy.engine.routes.route_context import BRIDGE_INFO, RouteContext
from proxy.observe.access import upstream_name
from proxy.observe.metrics import BridgeMetrics
from proxy.observe.request_families import UpstreamMetrics, Watched
from proxy.upstream.base import Inbound, UpstreamSession
from translators.auth.oauth import UpstreamAuthChallenge, challenge_reply
from translators.held.request_state import KeyRing
from translators.protocol.eras import (
    DISCOVER,
    FORWARDED_METHODS,
    MRTR_METHODS,
    RESOURCES_READ,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
)
from translators.protocol.results import legacy_error_to_modern
from translators.tasks_ext.messages import EXTENSION, TASK_METHODS
from translators.tasks_ext.task_ids import PREFIX as TASK_ID
from translators.wire.errors import (
    INTERNAL_ERROR,
    BridgeBug,
    BridgeError,
    InvalidRequestState,
    MethodNotFound,
    ShuttingDown,
    UpstreamReturnedError,
)
from translators.wire.jsonrpc import JsonObject, error_response, result_response, to_error_response

log = structlog.get_logger()

# The part of the grace kept, after the drain, for cutting off what is left, abandoning held calls
# and closing upstream sessions: a quarter of it, at most this.
CLOSE_RESERVE_MAX_S: Final = 2.0


def close_reserve_s(grace_s: float) -> float:
    """How much of `grace_s` comes after the drain (cut-off, abandoning, closing)."""
    return min(CLOSE_RESERVE_MAX_S, grace_s / 4)


class Drain:
    """The engine's requests in flight, and the shutdown that drains them."""

    def __init__(self) -> None:
        self._inflight: set[asyncio.Task[object]] = set()
        self._cut: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.stopping = False

    def enter(self) -> asyncio.Task[object] | None:
        """The calling task starts a request (None outside a task)."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
            self._idle.clear()
        return task

    def leave(self, task: asyncio.Task[object] | None) -> None:
        if task is None:
            return
        self._inflight.discard(task)
        if not self._inflight:
            self._idle.set()

    def was_cut(self, task: asyncio.Task[object] | None) -> bool:
        """Whether `task` was cancelled by the cut-off (then the cancellation is undone once)."""
        if task is None or task not in self._cut:
            return False
        self._cut.discard(task)
        task.uncancel()
        return True

    def stop(self) -> None:
        """From now on new requests are refused."""
        self.stopping = True

    async def drain(
        self, deadline: float, cut_wait_s: float, before_cut: Callable[[], None]
    ) -> None:
        """Wait for the requests in flight until `deadline` (loop time); then `before_cut()`
        (which answers what it can itself), cut off the rest, and give them `cut_wait_s` to send
        their upstream cancels and answer their clients."""
        try:
            async with asyncio.timeout_at(deadline):
                await self._idle.wait()
            return
        except TimeoutError:
            pass
        before_cut()
        await asyncio.sleep(0)  # the requests answered by `before_cut` leave
        left = [task for task in self._inflight if not task.done()]
        log.warning("shutdown_cut_off", cancelled=len(left))
        for task in left:
            self._cut.add(task)
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=cut_wait_s)


class Engine:
    """Chooses the route of each validated modern request and turns its outcome into a response."""

    def __init__(
        self, ctx: RouteContext, keyring: KeyRing, *, metrics: UpstreamMetrics | None = None
    ) -> None:
        """`ctx` comes from the composition root (`proxy/app/compose.py`); the routes are the
        engine's own parts and are built here. `metrics`: what this upstream feeds (none given:
        a bridge's metrics of its own, the upstream named from its settings)."""
        self._ctx = ctx
        settings, pool = ctx.settings, ctx.pool
        self._public_urls = public_urls_of(settings)
        self.registry = ctx.registry
        self.listens = ctx.listens
        self.roots = ctx.roots
        self._drain = Drain()
        self._close_wait_s = HELD_ABANDON_S
        self.metrics = (
            metrics
            if metrics is not None
            else BridgeMetrics().upstream(upstream_name(settings.upstream))
        )
        # the Tasks extension in front of legacy tasks, only when it is on (docs/tasks.md)
        self.legacy_tasks = tasks = LegacyTasks(ctx, keyring) if settings.tasks.enabled else None
        promotion = tasks.promotion if tasks is not None else None
        self._first_call = FirstCall(ctx, promotion)
        self._task_calls = TaskCalls(ctx, tasks, self._first_call) if tasks is not None else None
        self._discover, self._non_interactive = Discover(ctx, tasks), NonInteractive(ctx, tasks)
        self._listen = Listen(ctx, tasks)
        self._recover = Recover(ctx, self._first_call, self.metrics)
        self._retry = Retry(ctx, on_lost=self._recover.after_refusal, promotion=promotion)
        self.metrics.watch(
            Watched(
                held_now=self.registry.held_now,
                in_progress=self.registry.in_progress,
                rounds_total=lambda: self.registry.rounds_total,
                pool_stats=pool.stats,
                transport="stdio" if settings.upstream.command else "http",
            )
        )

    def _choose(self, request: FrontRequest) -> Route:
        """The route `request` takes; a new route adds one branch here and its own module."""
        if request.method == DISCOVER:
            return self._discover
        tasks = self.legacy_tasks
        if request.method in MRTR_METHODS:
            if "requestState" in request.params:
                state = request.params["requestState"]
                # a task id (its own prefix) answers a task the bridge runs (docs/tasks.md)
                if tasks is not None and isinstance(state, str) and state.startswith(TASK_ID):
                    return tasks.in_bridge_retry
                return self._retry
            if self._task_calls is not None and request.method == TOOLS_CALL:
                # a legacy task, or a plain call that may become the bridge's own task
                if tasks is not None and (
                    tasks.tools.upstream_runs_tasks is not False or EXTENSION in request.extensions
                ):
                    return self._task_calls
            return self._first_call
        if request.method in TASK_METHODS and tasks is not None:
            return tasks.methods
        if request.method in FORWARDED_METHODS:
            return self._non_interactive
        if request.method == SUBSCRIPTIONS_LISTEN:
            return self._listen
        raise MethodNotFound(f"Method not found: {request.method}")

    # ---- the boundary ---------------------------------------------------------------------------

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        """Answer one modern request with one JSON-RPC response; never raises (but propagates
        cancellation)."""
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
        with log_context(
            request_id=rid, method=request.method, principal=shown_principal(request.principal)
        ):
            try:
                return result_response(rid, await self._choose(request).run(request, sink))
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
            except (
                UpstreamAuthChallenge
            ) as exc:  # the HTTP front answers with the upstream's status
                log.info("front_request_challenged", status=exc.status)
                self.metrics.observe_error(exc)
                return challenge_reply(exc, rid, self._public_urls)
            except BridgeError as exc:
                self.metrics.observe_error(exc)
                return error_response(rid, reported_error(exc))
            except Exception:
                log.exception("front_request_crashed")
                return error_response(rid, {"code": INTERNAL_ERROR, "message": "Internal error"})

    def on_unowned(self, session: UpstreamSession, inbound: Inbound) -> None:
        """A message on a session's GET stream while no interactive call holds the session."""
        on_unowned(self._ctx, session, inbound)

    # ---- lifetime --------------------------------------------------------------------------------

    def is_ready(self) -> bool:
        return self._ctx.ready

    def begin_shutdown(self) -> None:
        """Refuse new work, end every listen stream gracefully, and abandon the held calls
        waiting for their clients (their retries would be refused): pushes refused, calls cancelled
        upstream."""
        if self._drain.stopping:
            return
        self._drain.stop()
        self.registry.closing = True
        self.listens.close_all("shutdown")
        self._ctx.tasks.spawn(self.registry.abandon_waiting(), name="abandon-held-calls")

    async def drain(self, deadline: float, cut_wait_s: float) -> None:
        """Let the requests in flight finish until `deadline` (loop time), then cut them off."""
        self.begin_shutdown()
        await self._drain.drain(
            deadline, cut_wait_s, lambda: self.registry.abort_all("bridge shutting down")
        )
        self._close_wait_s = cut_wait_s / 2  # what is left of the closing reserve for held calls

    async def aclose(self) -> None:
        self.begin_shutdown()
        await self.registry.aclose(self._close_wait_s)
        if self.legacy_tasks is not None:
            await self.legacy_tasks.aclose()
        await self._ctx.tasks.aclose()


__all__ = ["BRIDGE_INFO", "CLOSE_RESERVE_MAX_S", "Drain", "Engine", "close_reserve_s"]
