"""Legacy (2025-11-25) task tools for the conformance fixture (legacy_fixture_server.py),
for the conformance CLI's `tasks-*` scenarios through the bridge (docs/tasks.md).

The `mcp` 1.x SDK's low-level server runs tasks (`server.experimental.enable_tasks()`), FastMCP
does not route them: `install(mcp)` wraps FastMCP's `tools/list` and `tools/call` handlers, so the
tools below are listed with their `execution.taskSupport` and a task-augmented call runs them as a
legacy task (`run_task`), whose questions go through the task's `elicit`.

- `greet` (no task support): `Hello, {name}!`.
- `slow_compute` (optional): sleeps `seconds`, then a result naming `label`.
- `failing_job` (required): a tool execution error (`isError`) after ~1 s.
- `protocol_error_job` (optional): the task fails (legacy status `failed`, no result).
- `confirm_delete` (optional): one elicitation, then completes.
- `multi_input` (optional): two elicitations at once, then completes.
- `test_tool_with_task` (no task support): asks a name (an MRTR round through the bridge), then
  works 2 s, longer than the bridge's promotion time in `make conformance`, so the bridge answers
  the retry with a task of its own (`tasks-mrtr-composition`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata

Task = ServerTaskContext | None
Work = Callable[[Task, dict[str, Any]], Awaitable[types.CallToolResult]]

logger = logging.getLogger("legacy_task_tools")
PLAIN_WORK_S = 2.0  # test_tool_with_task's work after its question (run.sh promotes at 0.5 s)
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
    "required": ["confirm"],
}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name"}},
    "required": ["name"],
}


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], isError=is_error
    )


async def slow_compute(task: Task, args: dict[str, Any]) -> types.CallToolResult:
    seconds = float(args.get("seconds", 1))
    await anyio.sleep(seconds)
    return _text(f"Computed {args.get('label', 'result')} after {seconds:g}s")


async def failing_job(task: Task, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(1)
    return _text("failing_job failed: the job reported an error", is_error=True)


async def protocol_error_job(
    task: ServerTaskContext | None, args: dict[str, Any]
) -> types.CallToolResult:
    await anyio.sleep(0.2)
    raise RuntimeError("protocol_error_job crashed")


def _elicited(result: types.ElicitResult, field: str) -> Any:
    return (result.content or {}).get(field) if result.action == "accept" else None


async def confirm_delete(task: Task, args: dict[str, Any]) -> types.CallToolResult:
    filename = str(args.get("filename", "file.txt"))
    assert task is not None
    answer = await task.elicit(f"Delete {filename}?", CONFIRM_SCHEMA)
    confirmed = _elicited(answer, "confirm") is True
    return _text(f"Deleted {filename}" if confirmed else f"Kept {filename}")


async def multi_input(task: Task, args: dict[str, Any]) -> types.CallToolResult:
    assert task is not None
    answers: dict[str, types.ElicitResult] = {}

    async def ask(key: str, message: str, schema: dict[str, Any]) -> None:
        answers[key] = await task.elicit(message, schema)

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "name", "Your name?", NAME_SCHEMA)
        group.start_soon(ask, "confirm", "Proceed?", CONFIRM_SCHEMA)
    name, confirm = _elicited(answers["name"], "name"), _elicited(answers["confirm"], "confirm")
    return _text(f"name={name} confirm={confirm}")


TASK_TOOLS: dict[str, tuple[str, Work, dict[str, Any]]] = {
    "slow_compute": (
        "optional",
        slow_compute,
        {"seconds": {"type": "number"}, "label": {"type": "string"}},
    ),
    "failing_job": ("required", failing_job, {}),
    "protocol_error_job": ("optional", protocol_error_job, {}),
    "confirm_delete": ("optional", confirm_delete, {"filename": {"type": "string"}}),
    "multi_input": ("optional", multi_input, {}),
}


class _Guarded:
    """A task group whose tasks never fail it: a task that outlives its session (its status
    notification then fails) must not take the process-wide group down."""

    def __init__(self, group: Any) -> None:
        self._group = group

    def start_soon(self, func: Callable[..., Awaitable[Any]], *args: Any, name: Any = None) -> None:
        async def guarded() -> None:
            try:
                await func(*args)
            except Exception:
                logger.info("task work ended with its session gone", exc_info=True)

        self._group.start_soon(guarded, name=name)


def _task_question_ids(mode: str) -> None:
    """An `mcp` 1.x defect: a task's question gets the id `task-<taskId>-<id(params)>`, the
    address of an object freed right after, so two questions asked at once (`multi_input`) may
    get one id; the second answer then finds no request (docs/tasks.md, "Conformance").
    `unique`: each question gets a counter suffix (the work-around); `one`: every question of a
    task gets the same id (the defect, forced, for the bridge's test)."""
    counter = itertools.count(1)
    build = ServerSession._build_elicit_form_request

    def patched(self: ServerSession, *args: Any, **kwargs: Any) -> types.JSONRPCRequest:
        request = build(self, *args, **kwargs)
        if isinstance(request.id, str) and request.id.startswith("task-"):
            base = request.id.rsplit("-", 1)[0]
            suffix = "same" if mode == "one" else str(next(counter))
            return request.model_copy(update={"id": f"{base}-{suffix}"})
        return request

    ServerSession._build_elicit_form_request = patched  # type: ignore[method-assign]


def install(mcp: FastMCP, question_ids: str = "unique") -> None:
    """Add `greet` and the task tools to the fixture, and enable legacy tasks; `question_ids`:
    see `_task_question_ids`."""
    _task_question_ids(question_ids)

    @mcp.tool()
    def greet(name: str = "World") -> str:
        """Greet someone by name (no task support)."""
        return f"Hello, {name}!"

    @mcp.tool()
    async def test_tool_with_task(ctx: Context) -> str:  # type: ignore[type-arg]
        """A plain tool (no task support) that asks the user's name, then works longer than the
        bridge's `tasks.promote_after_ms` in the conformance run: an MRTR round, then a task."""
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="Your name?", requestedSchema=NAME_SCHEMA)
        )
        answer = await ctx.request_context.session.send_request(
            types.ServerRequest(request),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        await anyio.sleep(PLAIN_WORK_S)
        return f"Hello, {_elicited(answer, 'name')}!"

    server = mcp._mcp_server
    support = server.experimental.enable_tasks()
    per_session_run = support.run

    @asynccontextmanager
    async def run() -> AsyncIterator[None]:
        # The SDK keeps one task group, set by each session's run and cleared when any session
        # ends: over HTTP the tasks run in the session manager's process-wide group instead.
        manager = mcp._session_manager
        group = manager._task_group if manager is not None else None
        if group is None:
            async with per_session_run():
                yield
        else:
            support._task_group = _Guarded(group)  # type: ignore[assignment]
            yield

    support.run = run  # type: ignore[method-assign]
    list_handler = server.request_handlers[types.ListToolsRequest]
    call_handler = server.request_handlers[types.CallToolRequest]

    async def list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        result = await list_handler(request)
        listed = result.root
        assert isinstance(listed, types.ListToolsResult)
        for name, (support, _, properties) in TASK_TOOLS.items():
            listed.tools.append(
                types.Tool(
                    name=name,
                    description=f"legacy task tool ({support})",
                    inputSchema={"type": "object", "properties": properties},
                    execution=types.ToolExecution(taskSupport=support),  # type: ignore[arg-type]
                )
            )
        return result

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        entry = TASK_TOOLS.get(request.params.name)
        if entry is None:
            return await call_handler(request)
        support, work, _ = entry
        arguments = dict(request.params.arguments or {})
        context = server.request_context
        if context.experimental.is_task:

            async def run(task: ServerTaskContext) -> types.CallToolResult:
                return await work(task, arguments)

            return types.ServerResult(await context.experimental.run_task(run))
        if support == "required":
            raise McpError(
                types.ErrorData(
                    code=types.METHOD_NOT_FOUND,
                    message=f"{request.params.name} requires task augmentation",
                )
            )
        if work in (confirm_delete, multi_input):
            raise McpError(
                types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=f"{request.params.name} asks its questions only as a task",
                )
            )
        return types.ServerResult(await work(None, arguments))

    server.request_handlers[types.ListToolsRequest] = list_tools
    server.request_handlers[types.CallToolRequest] = call_tool
