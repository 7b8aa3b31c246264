"""Settings for tasks (`[tasks]`): legacy 2025-11-25 tasks served to modern clients through the
Tasks extension `io.modelcontextprotocol/tasks` (docs/tasks.md)."""

from __future__ import annotations

from pydantic import Field

from config.base import Frozen


class TasksSettings(Frozen):
    """How the bridge maps legacy tasks onto the Tasks extension (docs/tasks.md)."""

    enabled: bool = Field(
        True,
        description="advertise the Tasks extension when the upstream runs tool calls as tasks, and "
        "serve tasks/get, tasks/update and tasks/cancel from the legacy tasks",
    )
    ttl_ms: int = Field(
        600_000,
        ge=1000,
        description="ttl the bridge asks of the legacy server for a task, and how long it keeps a "
        "finished task's result for tasks/get",
    )
    poll_interval_ms: int = Field(
        1000, ge=100, description="pollIntervalMs reported when the legacy server suggests none"
    )
    max_per_principal: int = Field(
        16,
        ge=1,
        description="tasks one principal may have running at once (each pins a session), and "
        "finished tasks it keeps (past that, its oldest finished one is dropped)",
    )
    max_total: int = Field(
        256,
        ge=1,
        description="tasks running at once, all principals; and tasks kept, running or finished "
        "(a finished task never refuses a new one: the oldest finished task of the principal "
        "with the most gives way)",
    )
    status_timeout_s: float = Field(
        5.0, gt=0, description="longest tasks/get waits for the legacy server's tasks/get"
    )
    run_in_bridge: bool = Field(
        False,
        description="a client that did not declare the extension calling a tool that runs only "
        "as a task: run the legacy task inside the bridge and answer with ordinary "
        "InputRequiredResult rounds and the final result (default: -32021)",
    )
    promote_after_ms: int = Field(
        5000,
        ge=0,
        description="a plain tools/call (a tool without task support) from a client that declared "
        "the extension and still running after this many milliseconds is answered with a task "
        "the bridge owns; the call goes on (0: never). Only below front.request_timeout_s",
    )
