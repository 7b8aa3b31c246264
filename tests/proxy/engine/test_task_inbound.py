"""What a legacy task does with each message its session brings while it runs: the one inbound
router of every call (proxy/calls/inbound.py). A push becomes an input request; the server's
`notifications/cancelled` of that push withdraws it (the task works again); a session-wide
notification reaches the principal's listen streams; progress and logs are not on tasks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.settings import Settings
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import RunningTask
from proxy.upstream.base import Inbound
from translators.protocol.revisions import NEWEST, Revision
from translators.tasks_ext.messages import LegacyTask
from translators.wire.jsonrpc import JsonObject

ELICIT: JsonObject = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


@dataclass
class Session:
    revision: Revision = NEWEST


@dataclass
class Lease:
    session: Session = field(default_factory=Session)


def running(published: list[tuple[str, JsonObject]], changes: list[str]) -> RunningTask:
    settings = Settings.model_validate({"upstream": {"url": "http://127.0.0.1:9/mcp"}})
    lease: Any = Lease()
    return RunningTask(
        task_id="t",
        record=b"\0" * 16,
        principal="alice",
        lease=lease,
        legacy=LegacyTask("legacy-1", "working", None, None, None),
        client_capabilities={"elicitation": {"form": {}}},
        headers={},
        settings=settings.tasks,
        owner=TaskOwner(),
        on_change=lambda task: changes.append(task.status),
        publish=lambda principal, message: published.append((principal, message)),
    )


def test_a_push_asks_and_its_cancellation_withdraws_it() -> None:
    published: list[tuple[str, JsonObject]] = []
    changes: list[str] = []
    task = running(published, changes)
    task._on_inbound(Inbound(ELICIT, related_request_id=1))
    assert task.status == "input_required"
    assert [push.push_id for push in task.pending.values()] == [7]
    cancelled = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "no longer needed"},
    }
    task._on_inbound(Inbound(cancelled, related_request_id=1))
    assert (task.status, task.pending, changes) == ("working", {}, ["input_required", "working"])
    assert published == []


def test_a_cancellation_of_another_push_changes_nothing() -> None:
    task = running([], [])
    task._on_inbound(Inbound(ELICIT, related_request_id=1))
    other = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}
    task._on_inbound(Inbound(other, related_request_id=1))
    assert task.status == "input_required"
    assert [push.push_id for push in task.pending.values()] == [7]


def test_session_wide_notifications_reach_the_principal_and_progress_goes_nowhere() -> None:
    published: list[tuple[str, JsonObject]] = []
    task = running(published, [])
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1},
    }
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    for message in (changed, progress, log):
        task._on_inbound(Inbound(message, related_request_id=None))
    assert published == [("alice", changed)]
    assert (task.status, task.pending) == ("working", {})
