"""What lets a legacy task outlive its bridge process (Streamable HTTP upstreams; docs/tasks.md §
What survives what): the `UpstreamHandle` sealed into its id, and detaching at shutdown instead of
cancelling. A mixin of `RunningTask` (proxy/engine/legacy_tasks/running.py), which adoption
(adopt.py) rebuilds on a new process."""

from __future__ import annotations

from typing import Final, Protocol

from proxy.upstream.base import InboundHandler, UpstreamCall, UpstreamSession
from proxy.upstream.http.call import HttpUpstreamCall
from proxy.upstream.http.session import HttpUpstreamSession
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


class SurvivesRestart:
    """Needs the task's lease, its `tasks/result` call, the caller's capabilities and ids."""

    _lease: TaskLease
    _result_call: UpstreamCall | None
    _caps: JsonObject
    _detached: bool
    legacy_id: str
    created_at: float

    async def upstream_handle(self) -> UpstreamHandle | None:
        """What a new bridge process needs to adopt this task; None when it cannot (stdio, or a
        session without an id)."""
        session, call = self._lease.session, self._result_call
        if not isinstance(session, HttpUpstreamSession) or session.session_id is None:
            return None
        first_event: str | None = None
        if isinstance(call, HttpUpstreamCall):
            first_event = await call.first_event(RESUME_POINT_WAIT_S)
        return UpstreamHandle(
            session_id=session.session_id,
            legacy_task_id=self.legacy_id,
            version=session.revision.version,
            result_request_id=0 if call is None else call.upstream_request_id,
            resume_event_id=first_event,
            capabilities={k: v for k, v in self._caps.items() if k in _CAPABILITY_KEYS},
            created_at_ms=int(self.created_at * 1000),
            cookies=tuple(session.cookies.sealable()),
        )

    @property
    def survives_restart(self) -> bool:
        """Whether a new bridge process can adopt this task (its session has an id)."""
        session = self._lease.session
        return isinstance(session, HttpUpstreamSession) and session.session_id is not None

    async def detach(self) -> None:
        """The bridge stops and the task can be adopted: close the session here without a
        DELETE and without cancelling anything upstream (no `notifications/cancelled`, which
        would end the legacy `tasks/result` whose stream the next process replays)."""
        self._detached = True
        session = self._lease.session
        if isinstance(session, HttpUpstreamSession):
            session.forget_on_close()
        await self._lease.release(discard=True)


__all__ = ["RESUME_POINT_WAIT_S", "SurvivesRestart", "TaskLease"]
