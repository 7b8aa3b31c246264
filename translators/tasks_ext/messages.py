"""Tasks-extension messages <-> legacy 2025-11-25 task messages (docs/tasks.md § Mapping).

Pure: no clock and no I/O; times and states come in as parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from translators.protocol.eras import META_RELATED_TASK, RESULT_COMPLETE, TASK_EXTENSION_METHODS
from translators.wire.errors import InvalidParams, MissingClientCapability
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
# the legacy (2025-11-25) task methods the bridge sends upstream
LEGACY_TASKS_GET: Final = "tasks/get"
LEGACY_TASKS_RESULT: Final = "tasks/result"
LEGACY_TASKS_CANCEL: Final = "tasks/cancel"
# a task whose upstream call or session was lost
LOST_ERROR: Final[dict[str, Any]] = {"code": -32603, "message": "The upstream task was lost"}
TASK_METHODS: Final = TASK_EXTENSION_METHODS
RESULT_TASK: Final = "task"

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})
LEGACY_STATUSES: Final[frozenset[str]] = TERMINAL | {"working", "input_required"}


def declares_extension(client_capabilities: JsonObject) -> bool:
    """Whether a request's `clientCapabilities` declare the Tasks extension."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def server_runs_tool_tasks(server_capabilities: JsonObject) -> bool:
    """Whether a legacy server declared `tasks.requests.tools.call` (its tools' `taskSupport`
    counts only then)."""
    requests = as_object(as_object(server_capabilities.get("tasks")).get("requests"))
    return isinstance(as_object(requests.get("tools")).get("call"), dict)


def task_support(tool: Any) -> str:
    """A legacy tool's `execution.taskSupport`: `forbidden` (the default), `optional`,
    `required`."""
    support = as_object(as_object(tool).get("execution")).get("taskSupport")
    return support if support in ("optional", "required") else "forbidden"


def with_extension(discover: JsonObject) -> JsonObject:
    """A `server/discover` result that also advertises the extension, exactly as `{}`."""
    capabilities = dict(as_object(discover.get("capabilities")))
    extensions = dict(as_object(capabilities.get("extensions")))
    extensions[EXTENSION] = {}
    capabilities["extensions"] = extensions
    return {**discover, "capabilities": capabilities}


def missing_extension(what: str) -> MissingClientCapability:
    """-32021 naming the extension (ET § Capability Negotiation, § Error Handling)."""
    return MissingClientCapability(
        f"Missing required client capability: {what} needs the {EXTENSION} extension",
        {"extensions": {EXTENSION: {}}},
    )


def task_not_found() -> InvalidParams:
    """The one answer for a forged, expired, unknown or another principal's task id."""
    return InvalidParams("Task not found")


def task_id_param(params: JsonObject) -> str:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParams("Invalid params: taskId must be a non-empty string")
    return task_id


def input_responses_param(params: JsonObject) -> JsonObject:
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams("Invalid params: inputResponses must be an object")
    return responses


@dataclass(frozen=True)
class LegacyTask:
    """The `task` of a legacy `CreateTaskResult` or a legacy `tasks/get` result."""

    task_id: str
    status: str
    status_message: str | None
    ttl_ms: int | None
    poll_interval_ms: int | None


def legacy_task(result: JsonObject) -> LegacyTask | None:
    """The legacy Task in a `CreateTaskResult` (`{task: {...}}`) or a `tasks/get` result (flat);
    None when `result` is not one (e.g. the server ran the call plainly)."""
    nested = result.get("task")
    task: JsonObject = nested if isinstance(nested, dict) else result
    task_id, status = task.get("taskId"), task.get("status")
    if not isinstance(task_id, str) or status not in LEGACY_STATUSES:
        return None
    message = task.get("statusMessage")
    return LegacyTask(
        task_id,
        status,
        message if isinstance(message, str) else None,
        _ms(task.get("ttl")),
        _ms(task.get("pollInterval")),
    )


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class TaskView:
    """What the bridge knows of a task at one moment, for `CreateTaskResult`, `tasks/get` and
    `notifications/tasks`."""

    task_id: str
    status: Status
    created_at: str  # ISO 8601, as the client sees it
    updated_at: str
    ttl_ms: int
    poll_interval_ms: int
    status_message: str | None = None
    input_requests: JsonObject | None = None
    result: JsonObject | None = None
    error: JsonObject | None = None


def task_fields(view: TaskView) -> JsonObject:
    """The modern `Task` (DetailedTask fields by status)."""
    task: JsonObject = {
        "taskId": view.task_id,
        "status": view.status,
        "createdAt": view.created_at,
        "lastUpdatedAt": view.updated_at,
        "ttlMs": view.ttl_ms,
        "pollIntervalMs": view.poll_interval_ms,
    }
    if view.status_message is not None:
        task["statusMessage"] = view.status_message
    if view.status == "input_required":
        task["inputRequests"] = view.input_requests or {}
    elif view.status == "completed":
        task["result"] = view.result or {}
    elif view.status == "failed":
        task["error"] = view.error or {"code": -32603, "message": "Task failed"}
    return task


def create_task_result(view: TaskView) -> JsonObject:
    """`CreateTaskResult`: the flat Task with `resultType: "task"` (only here)."""
    task = task_fields(view)
    task.pop("inputRequests", None)
    task.pop("result", None)
    task.pop("error", None)
    return {"resultType": RESULT_TASK, **task}


def get_task_result(view: TaskView) -> JsonObject:
    return {"resultType": RESULT_COMPLETE, **task_fields(view)}


def ack() -> JsonObject:
    """The empty acknowledgement of `tasks/update` and `tasks/cancel`."""
    return {"resultType": RESULT_COMPLETE}


def task_result_payload(result: JsonObject) -> JsonObject:
    """A legacy `tasks/result` payload as the task's modern `result`: without the related-task
    `_meta` and any legacy `resultType`."""
    payload = {k: v for k, v in result.items() if k != "resultType"}
    meta = as_object(payload.get("_meta"))
    if META_RELATED_TASK in meta:
        rest = {k: v for k, v in meta.items() if k != META_RELATED_TASK}
        if rest:
            payload["_meta"] = rest
        else:
            payload.pop("_meta")
    return payload


def related_task_id(message: JsonObject) -> str | None:
    """The legacy task a push or notification is tagged with, if any."""
    meta = as_object(as_object(message.get("params")).get("_meta"))
    task_id = as_object(meta.get(META_RELATED_TASK)).get("taskId")
    return task_id if isinstance(task_id, str) else None


__all__ = [
    "EXTENSION",
    "LEGACY_TASKS_CANCEL",
    "LEGACY_TASKS_GET",
    "LEGACY_TASKS_RESULT",
    "LOST_ERROR",
    "RESULT_TASK",
    "TASKS_CANCEL",
    "TASKS_GET",
    "TASKS_UPDATE",
    "TASK_METHODS",
    "TERMINAL",
    "LegacyTask",
    "Status",
    "TaskView",
    "ack",
    "create_task_result",
    "declares_extension",
    "get_task_result",
    "input_responses_param",
    "legacy_task",
    "missing_extension",
    "related_task_id",
    "server_runs_tool_tasks",
    "task_fields",
    "task_id_param",
    "task_not_found",
    "task_result_payload",
    "task_support",
    "with_extension",
]
