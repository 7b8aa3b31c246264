"""What lets a legacy task outlive its bridge process (Streamable HTTP upstreams; docs/tasks.md §
What survives what): the `UpstreamHandle` sealed into its id. `RunningTask`
(proxy/engine/legacy_tasks/running.py) asks for it at creation and detaches at shutdown instead of
cancelling; adoption (adopt.py) rebuilds the task on a new process from it. What the session can
do about it (an id to reopen it with, cookies to seal, a stream to resume) is the seam's
(proxy/upstream/base.py): on stdio and HTTP+SSE there is no handle."""

from __future__ import annotations

from typing import Final, Protocol

from proxy.upstream.base import InboundHandler, UpstreamCall, UpstreamSession
from translators.tasks_ext.task_ids import UpstreamHandle
from translators.wire.jsonrpc import JsonObject

# how long creation waits for the first event of the `tasks/result` stream (a server with an event
# store primes it at once); without one, questions asked before a restart are not replayed
RESUME_POINT_WAIT_S: Final = 0.5
_CAPABILITY_KEYS: Final = ("elicitation", "sampling", "roots")


class TaskLease(Protocol):
    """What a task needs of its session: the pool's exclusive `Lease`, or an adopted session's."""

    @property
    def session(self) -> UpstreamSession: ...

    def set_unrelated_handler(self, handler: InboundHandler | None) -> None: ...

    async def release(self, *, discard: bool = False) -> None: ...


async def upstream_handle(
    session: UpstreamSession,
    result_call: UpstreamCall | None,
    *,
    legacy_id: str,
    capabilities: JsonObject,
    created_at: float,
) -> UpstreamHandle | None:
    """What a new bridge process needs to adopt the legacy task `legacy_id` running on `session`
    (its `tasks/result` is `result_call`); None when it cannot (the session has no id to reopen it
    with: stdio, HTTP+SSE)."""
    session_id = session.session_id
    if session_id is None:
        return None
    first_event: str | None = None
    if result_call is not None:
        first_event = await result_call.first_event_id(RESUME_POINT_WAIT_S)
    return UpstreamHandle(
        session_id=session_id,
        legacy_task_id=legacy_id,
        version=session.revision.version,
        result_request_id=0 if result_call is None else result_call.upstream_request_id,
        resume_event_id=first_event,
        capabilities={k: v for k, v in capabilities.items() if k in _CAPABILITY_KEYS},
        created_at_ms=int(created_at * 1000),
        cookies=tuple(session.sealable_cookies()),
    )


__all__ = ["RESUME_POINT_WAIT_S", "TaskLease", "upstream_handle"]
