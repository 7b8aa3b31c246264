"""Routes of the Tasks extension: `tasks/get`, `tasks/update`, `tasks/cancel`, and the
`tools/call` that creates a legacy task (docs/tasks.md).

`TaskCalls` sits in front of the first-call route: a call to a tool that does not run as a
legacy task goes on to `FirstCall` unchanged, and when the upstream declared no tool tasks that
is decided without any upstream traffic.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import structlog

from proxy.auth.oauth_passthrough import passes_challenges
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.shown import shown_id
from proxy.engine.legacy_tasks.adopt import TaskAdopter
from proxy.engine.legacy_tasks.promoted import Promotion
from proxy.engine.legacy_tasks.running import RunningTask
from proxy.engine.legacy_tasks.store import TaskStore
from proxy.engine.legacy_tasks.tools import TaskTools
from proxy.engine.routes.mrtr_call import FirstCall, input_responses
from proxy.engine.routes.outside_calls import publish, refuse_push
from proxy.engine.routes.route_context import RouteContext
from proxy.upstream.base import Inbound
from proxy.upstream.pool import Lease
from translators.auth.oauth import UpstreamAuthChallenge
from translators.held.request_state import KeyRing, RequestBinding
from translators.protocol.eras import LEGACY_PING, TOOLS_CALL
from translators.protocol.pushes import is_push
from translators.protocol.requests import require_upstream_capability
from translators.protocol.results import input_required_result, legacy_result_to_modern
from translators.tasks_ext.messages import (
    EXTENSION,
    LOST_ERROR,
    TASKS_CANCEL,
    TASKS_GET,
    TERMINAL,
    LegacyTask,
    ack,
    create_task_result,
    declares_extension,
    get_task_result,
    input_responses_param,
    legacy_task,
    missing_extension,
    task_id_param,
    task_not_found,
)
from translators.tasks_ext.task_ids import TaskClaims
from translators.wire.errors import (
    BridgeError,
    UpstreamReturnedError,
    UpstreamTimeout,
)
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()


class LegacyTasks:
    """The task store, what the bridge knows of the upstream's task tools, and both routes."""

    def __init__(self, ctx: RouteContext, keyring: KeyRing) -> None:
        """Built by the engine only when tasks are on (`tasks.enabled`); the `tools/call` route in
        front of the first-call route (`TaskCalls`) is the engine's too."""
        self.store = TaskStore(ctx.settings, keyring, ctx.tasks, ctx.listens.publish)
        self.tools = TaskTools()
        adopter = TaskAdopter(ctx, self.store.announce)
        self.methods = TaskMethods(ctx, self.store, adopter)
        self.in_bridge_retry = InBridgeRetry(ctx, self.store, adopter)
        promote = ctx.settings.tasks.promote_after_ms > 0
        self.promotion = (
            Promotion(ctx.settings, self.store, ctx.tasks, ctx.registry.next_attempt_id)
            if promote
            else None
        )

    def offers_task_tools(self, request: FrontRequest) -> bool:
        """Whether `tools/list` shows this request the tools that run only as tasks."""
        return self.tools.upstream_runs_tasks is not False and EXTENSION in request.extensions

    def listenable(self, request: FrontRequest, task_ids: frozenset[str]) -> frozenset[str]:
        """The requested task ids a listen stream gets `notifications/tasks` for: those of this
        caller's tasks this replica serves; -32021 for a client without the extension."""
        if not declares_extension(request.client_capabilities):
            raise missing_extension("subscriptions/listen for taskIds")
        return frozenset(t for t in task_ids if self.store.owns(t, request.principal))

    async def aclose(self) -> None:
        await self.store.aclose()


def adopting(
    adopter: TaskAdopter, request: FrontRequest
) -> Callable[[TaskClaims, str], Awaitable[RunningTask | None]]:
    """The store's way to adopt, for this request (its principal and upstream headers)."""
    return functools.partial(adopter.adopt, request)


async def upstream_still_allows(ctx: RouteContext, request: FrontRequest) -> None:
    """With OAuth pass-through the upstream, not the bridge, judges a token: the bridge keeps a
    task's state, so before it shows or changes anything it sends one `ping` with this request's
    credentials. A refusal (a token revoked or expired since the task was created) reaches the
    client as the upstream's challenge (401/403); an upstream that cannot be reached is not a
    refusal (docs/tasks.md § Failure paths)."""
    if not passes_challenges(ctx.settings.upstream):
        return
    headers = ctx.headers(request)
    try:
        async with asyncio.timeout(ctx.settings.tasks.status_timeout_s):
            async with ctx.shared_lease(request) as lease:
                call = lease.session.start(LEGACY_PING, {}, headers=headers, on_inbound=None)
                await call.result()
    except UpstreamAuthChallenge:
        raise
    except (BridgeError, TimeoutError) as exc:
        log.info("task_authorization_unchecked", error=type(exc).__name__)


class TaskMethods:
    def __init__(self, ctx: RouteContext, store: TaskStore, adopter: TaskAdopter) -> None:
        self._ctx = ctx
        self._store = store
        self._adopter = adopter

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        if not declares_extension(request.client_capabilities):
            raise missing_extension(request.method)
        task = await self._store.find(
            task_id_param(request.params), request.principal, adopting(self._adopter, request)
        )
        await upstream_still_allows(self._ctx, request)
        if request.method == TASKS_GET:
            if not task.pending:
                await task.refresh()
            return get_task_result(task.view())
        if request.method == TASKS_CANCEL:
            await task.cancel()
            return ack()
        await task.answer(input_responses_param(request.params))
        return ack()


class TaskCalls:
    """`tools/call` (first attempt): a legacy task for a tool that runs only as one, or that may
    run as one when the client declared the extension."""

    def __init__(self, ctx: RouteContext, tasks: LegacyTasks, first_call: FirstCall) -> None:
        self._ctx = ctx
        self._store = tasks.store
        self._tools = tasks.tools
        self._first_call = first_call

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        name = request.params.get("name")
        runs_tasks = self._tools.upstream_runs_tasks
        declared = declares_extension(request.client_capabilities)
        if runs_tasks is False or not isinstance(name, str):
            return await self._first_call.run(request, sink)
        if runs_tasks is None and not declared:
            try:  # learn on the call's own session: no extra upstream session
                return await self._first_call.start(
                    request,
                    sink,
                    input_responses(self._ctx, request),
                    authorize=functools.partial(self._plain_only, request, name),
                )
            except _RunsAsTask:
                pass
        else:
            support = await self._support(request, name)
            # `optional`: a task for a client that declared the extension, else a plain call
            if support == "forbidden" or (support == "optional" and not declared):
                return await self._first_call.run(request, sink)
        if not declared and not self._ctx.settings.tasks.run_in_bridge:
            raise missing_extension(f"tool {name!r}, which runs only as a task,")
        task = await self._create(request, declared)
        if not isinstance(task, RunningTask):
            return task  # the server answered the call itself
        if not declared:  # tasks.run_in_bridge: ordinary MRTR rounds
            return await mrtr_reply(self._ctx, task)
        return create_task_result(task.view())

    async def _plain_only(self, request: FrontRequest, name: str, lease: Lease) -> None:
        """Before a plain call goes upstream: learn whether the upstream runs tool tasks, and
        stop the call if the tool runs only as a task."""
        tools = self._tools
        if tools.note_session(lease.session):
            if tools.should_list(name):
                await tools.refresh(lease.session, self._ctx.headers(request))
            if tools.known(name) == "required":
                raise _RunsAsTask

    async def _support(self, request: FrontRequest, name: str) -> str:
        lease = functools.partial(self._ctx.shared_lease, request)
        return await self._tools.support(name, lease, self._ctx.headers(request))

    async def _create(self, request: FrontRequest, declared: bool) -> RunningTask | JsonObject:
        """The legacy task for this call, registered and running; or the result, when the server
        ran the call plainly. Its place under the caps is taken before anything else and given back
        on every other way out (an error, the client gone)."""
        record = self._store.reserve(request.principal)
        try:
            return await self._start(request, record, declared)
        finally:
            self._store.release(record)  # no-op once the task is added

    async def _start(
        self, request: FrontRequest, record: bytes, declared: bool
    ) -> RunningTask | JsonObject:
        ctx = self._ctx
        lease = await ctx.lease(request, exclusive=True)
        try:
            result = await self._call(request, lease)
        except BaseException:
            await lease.release(discard=True)
            raise
        legacy = legacy_task(result)
        if legacy is None:  # the server answered the call itself
            await lease.release()
            return legacy_result_to_modern(
                TOOLS_CALL, result, server_info=ctx.server_info(lease.session), cache=ctx.cache
            )
        task = self._running(request, record, lease, legacy)
        task.start()
        try:
            handle = await task.upstream_handle()
        except BaseException:  # the client went away: nobody can ever ask for this task
            ctx.tasks.spawn(task.abandon(), name="legacy-task-unclaimed")
            raise
        # a task the bridge runs for a client without the extension: its id is the requestState
        # of the call's rounds, bound to this call as any requestState is
        binding = None if declared else RequestBinding.of(request.method, request.params)
        task.task_id = self._store.seal(task, handle, binding)
        self._store.add(task)  # registered before the answer: tasks/get resolves at once
        log.info("legacy_task_created", task=shown_id(record), survives=task.survives_restart)
        return task

    def _running(
        self, request: FrontRequest, record: bytes, lease: Lease, legacy: LegacyTask
    ) -> RunningTask:
        return RunningTask(
            task_id="",  # sealed once the upstream handle is known
            record=record,
            principal=request.principal,
            lease=lease,
            legacy=legacy,
            client_capabilities=request.client_capabilities,
            headers=self._ctx.headers(request),
            settings=self._ctx.settings.tasks,
            owner=self._ctx.tasks,
            on_change=self._store.announce,
            publish=functools.partial(publish, self._ctx),
        )

    async def _call(self, request: FrontRequest, lease: Lease) -> JsonObject:
        ctx = self._ctx
        session = lease.session
        require_upstream_capability(
            TOOLS_CALL, session.init_result.get("capabilities") or {}, session.revision
        )
        upstream = ctx.upstream_request(request, session)
        params = {**upstream.params, "task": {"ttl": ctx.settings.tasks.ttl_ms}}

        def on_inbound(inbound: Inbound) -> None:
            if is_push(inbound.message):  # creation is not interactive: the task asks later
                refuse_push(ctx, session, inbound.message)

        lease.set_unrelated_handler(on_inbound)
        call = session.start(TOOLS_CALL, params, headers=upstream.headers, on_inbound=on_inbound)
        timeout_s = ctx.settings.front.request_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                return await call.result()
        except TimeoutError:
            await asyncio.shield(call.cancel("request timed out"))
            raise UpstreamTimeout(
                f"The upstream did not answer within {timeout_s:g} s", public=True
            ) from None
        except asyncio.CancelledError:
            await asyncio.shield(call.cancel("request cancelled by the client"))
            raise


class _RunsAsTask(Exception):
    """A plain call stopped before it went upstream: the tool runs only as a task."""


class InBridgeRetry:
    """A retry whose `requestState` is the id of a task the bridge runs for a client that did not
    declare the extension (`tasks.run_in_bridge`): its answers go onto the task's pushes."""

    def __init__(self, ctx: RouteContext, store: TaskStore, adopter: TaskAdopter) -> None:
        self._ctx = ctx
        self._store = store
        self._adopter = adopter

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        task = await self._store.find(
            str(request.params.get("requestState")),
            request.principal,
            adopting(self._adopter, request),
            bound_to=RequestBinding.of(request.method, request.params),
        )
        if not isinstance(task, RunningTask):  # sealed with a binding: never a promoted task
            raise task_not_found()
        await upstream_still_allows(self._ctx, request)
        await task.answer(input_responses(self._ctx, request))
        return await mrtr_reply(self._ctx, task)


async def mrtr_reply(ctx: RouteContext, task: RunningTask) -> JsonObject:
    """The task's outcome as an ordinary reply: the result, the error, or `InputRequiredResult`
    whose `requestState` is the task id (sealed and principal-bound like a task handle)."""
    server_info = ctx.server_info(task.session)
    if not await task.settle(ctx.settings.front.request_timeout_s):
        raise UpstreamTimeout("The task asked nothing and did not end in time", public=True)
    if task.status == "completed" and task.result is not None:
        return legacy_result_to_modern(
            TOOLS_CALL, task.result, server_info=server_info, cache=ctx.cache
        )
    if task.status in TERMINAL:
        raise UpstreamReturnedError(task.legacy_error or LOST_ERROR)
    requests = {key: push.input_request for key, push in task.pending.items()}
    return input_required_result(requests, task.task_id, server_info=server_info)


__all__ = ["InBridgeRetry", "LegacyTasks", "TaskCalls", "TaskMethods", "mrtr_reply"]
