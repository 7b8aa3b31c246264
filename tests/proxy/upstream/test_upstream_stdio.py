"""The legacy stdio upstream against real subprocesses: the mcp 1.x fixture and misbehaving
peers."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from config.settings import UpstreamSettings
from proxy.upstream.base import Inbound, UpstreamSession
from proxy.upstream.stdio.process import check_command
from proxy.upstream.stdio.session import StdioUpstreamSession
from proxy.upstream.stdio.stderr import StderrRelay
from translators.protocol.eras import ELICIT, LEGACY_VERSION, ROOTS
from translators.wire.errors import (
    INVALID_REQUEST,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)

ROOT = Path(__file__).resolve().parents[3]
LEGACY_PYTHON = ROOT / ".venv-legacy" / "bin" / "python"
FIXTURE = ROOT / "tests" / "peers" / "legacy_fixture_server.py"
MISBEHAVING = ROOT / "tests" / "peers" / "stdio_misbehaving.py"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "roots": {}}
WAIT_S = 10.0
PROMPT_S = 5.0  # "promptly": far below any request timeout, generous for a loaded machine


def fixture_command() -> str:
    return shlex.join([str(LEGACY_PYTHON), str(FIXTURE), "--transport", "stdio"])


def misbehaving(mode: str, *extra: str) -> str:
    return shlex.join([sys.executable, str(MISBEHAVING), "--mode", mode, *extra])


def settings(command: str, **overrides: Any) -> UpstreamSettings:
    return UpstreamSettings(
        command=command, **{"init_timeout_s": 15.0, "kill_grace_s": 1.0, **overrides}
    )


class Inbox:
    """Collects unrelated inbound messages and lets a test wait for the next one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Inbound] = asyncio.Queue()

    def __call__(self, inbound: Inbound) -> None:
        self.queue.put_nowait(inbound)

    async def next(self) -> Inbound:
        async with asyncio.timeout(WAIT_S):
            return await self.queue.get()


@asynccontextmanager
async def opened(
    command: str, inbox: Callable[[Inbound], None] | None = None, **overrides: Any
) -> AsyncIterator[StdioUpstreamSession]:
    async with asyncio.timeout(30):
        session = await StdioUpstreamSession.open(
            settings(command, **overrides), CAPABILITIES, on_unrelated=inbox or Inbox()
        )
    try:
        yield session
    finally:
        async with asyncio.timeout(30):
            await session.aclose()


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def call_tool(session: StdioUpstreamSession, name: str, **arguments: Any) -> dict[str, Any]:
    async with asyncio.timeout(WAIT_S):
        return await session.start("tools/call", {"name": name, "arguments": arguments}).result()


def as_protocol(session: StdioUpstreamSession) -> UpstreamSession:
    return session  # mypy checks that the class satisfies the protocol


# ---- against the real legacy fixture (mcp 1.x) ------------------------------------------------


async def test_fixture_initializes_and_answers_a_tool_call() -> None:
    """initialize reaches the mcp 1.x fixture over stdio and a plain tool call returns its
    result."""
    async with opened(fixture_command()) as session:
        assert as_protocol(session).is_alive
        assert session.init_result["protocolVersion"] == LEGACY_VERSION
        assert "tools" in session.init_result["capabilities"]
        result = await call_tool(session, "test_simple_text")
        assert text_of(result) == "This is a simple text response for testing."


async def test_fixture_push_is_unrelated_and_answered_with_respond() -> None:
    """The fixture's elicitation push arrives unrelated; answering it with respond() completes the
    call."""
    inbox = Inbox()
    async with opened(fixture_command(), inbox) as session:
        call = session.start(
            "tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}
        )
        push = await inbox.next()
        assert push.related_request_id is None
        assert push.message["method"] == ELICIT
        await session.respond(
            push.message["id"], result={"action": "accept", "content": {"name": "Ada"}}
        )
        async with asyncio.timeout(WAIT_S):
            assert text_of(await call.result()) == "Hello, Ada!"


async def test_fixture_killed_mid_call_fails_the_call_within_a_second() -> None:
    """SIGKILL while a call waits on a push fails that call promptly, naming the exit, and kills the
    session."""
    inbox = Inbox()
    async with opened(fixture_command(), inbox) as session:
        call = session.start(
            "tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}
        )
        await inbox.next()
        os.kill(session.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(UpstreamSessionLost) as caught:
            async with asyncio.timeout(PROMPT_S):
                await call.result()
        assert time.monotonic() - started < PROMPT_S
        assert caught.value.message.startswith(
            "legacy server process exited with code -9 (killed by SIGKILL)"
        )
        assert not session.is_alive
        with pytest.raises(UpstreamSessionLost):
            await session.start("tools/call", {"name": "test_simple_text"}).result()


# ---- against misbehaving peers ------------------------------------------------------------------


async def test_concurrent_calls_are_matched_by_id() -> None:
    """Several calls in flight on one process each get their own answer."""
    async with opened(misbehaving("normal")) as session:
        calls = [
            session.start("tools/call", {"name": "echo", "arguments": {"text": str(n)}})
            for n in range(5)
        ]
        async with asyncio.timeout(WAIT_S):
            results = await asyncio.gather(*(call.result() for call in calls))
        assert [text_of(result) for result in results] == [f"echo:{n}" for n in range(5)]


async def test_pushes_reach_on_unrelated_and_ping_is_answered_by_the_transport() -> None:
    """A roots/list push goes to on_unrelated; the server's ping is answered without surfacing."""
    inbox = Inbox()
    async with opened(misbehaving("normal"), inbox) as session:
        call = session.start("tools/call", {"name": "ask", "arguments": {}})
        push = await inbox.next()
        assert (push.message["method"], push.related_request_id) == (ROOTS, None)
        await session.respond(
            push.message["id"], result={"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}
        )
        async with asyncio.timeout(WAIT_S):
            assert text_of(await call.result()) == "roots:2"
        assert inbox.queue.empty()


async def test_cancel_sends_notifications_cancelled_and_fails_the_call() -> None:
    """cancel() fails the call at once and the server receives notifications/cancelled for
    its id."""
    inbox = Inbox()
    async with opened(misbehaving("normal"), inbox) as session:
        call = session.start("tools/call", {"name": "slow", "arguments": {}})
        await call.cancel("client went away")
        await call.cancel("twice is harmless")
        with pytest.raises(UpstreamFault, match="was cancelled: client went away"):
            await call.result()
        acknowledgement = await inbox.next()
        assert acknowledgement.message["params"]["data"] == f"cancelled {call.upstream_request_id}"
        assert text_of(await call_tool(session, "echo", text="after")) == "echo:after"


async def test_crash_mid_call_fails_promptly_with_the_exit_code() -> None:
    """A server that exits during a call fails it promptly with its exit code."""
    async with opened(misbehaving("crash")) as session:
        started = time.monotonic()
        with pytest.raises(UpstreamSessionLost) as caught:
            async with asyncio.timeout(PROMPT_S):
                await session.start("tools/call", {"name": "echo", "arguments": {}}).result()
        assert time.monotonic() - started < PROMPT_S
        assert caught.value.message.startswith(
            "legacy server process exited with code 3 (command: "
        )
        assert not session.is_alive


async def test_garbage_on_stdout_is_logged_by_size_and_skipped() -> None:
    """Garbage lines are logged without their content and skipped; calls still complete."""
    with capture_logs() as logs:
        async with opened(misbehaving("garbage")) as session:
            assert text_of(await call_tool(session, "echo", text="fine")) == "echo:fine"
    rejected = [entry for entry in logs if entry["event"] == "upstream_stdio_line_rejected"]
    invalid = [entry for entry in logs if entry["event"] == "upstream_stdio_message_invalid"]
    assert {entry["reason"] for entry in rejected} == {
        "line is not valid JSON",
        "line is JSON but not an object",
    }
    # three bad lines + one wrong-version message per reply
    assert len(rejected) == 6 and len(invalid) == 2
    assert "this is not json" not in repr(logs)


async def test_silent_server_times_out_initialize_and_is_killed() -> None:
    """A server that never answers initialize raises UpstreamTimeout and is killed even though it
    ignores SIGTERM."""
    with capture_logs() as logs:
        with pytest.raises(UpstreamTimeout) as caught:
            async with asyncio.timeout(10):
                await StdioUpstreamSession.open(
                    settings(misbehaving("silent"), init_timeout_s=0.5, kill_grace_s=0.2),
                    CAPABILITIES,
                    on_unrelated=Inbox(),
                )
    assert "did not answer initialize within 0.5 s" in caught.value.message
    [stopped] = [entry for entry in logs if entry["event"] == "upstream_process_stopped"]
    assert (stopped["how"], stopped["code"]) == ("killed", -signal.SIGKILL)


async def test_server_exiting_before_initialize_is_unavailable_and_its_stderr_logged() -> None:
    """A server that exits at once gives UpstreamUnavailable with its exit code; its stderr reaches
    the log."""
    with capture_logs() as logs:
        with pytest.raises(UpstreamUnavailable) as caught:
            async with asyncio.timeout(10):
                await StdioUpstreamSession.open(
                    settings(misbehaving("exit")), CAPABILITIES, on_unrelated=Inbox()
                )
    assert (
        "stopped before answering initialize: legacy server process exited with code 2"
        in caught.value.message
    )
    assert {"event": "upstream_stderr", "line": "fatal: bad configuration"}.items() <= next(
        entry for entry in logs if entry["event"] == "upstream_stderr"
    ).items()


async def test_oversized_response_fails_only_its_call() -> None:
    """An answer longer than max_line_bytes fails that call at once; the session keeps working."""
    async with opened(
        misbehaving("normal", "--big-bytes", "200000"), max_line_bytes=65536
    ) as session:
        with pytest.raises(UpstreamProtocolError, match="larger than 65536 bytes"):
            await call_tool(session, "big")
        assert session.is_alive
        assert text_of(await call_tool(session, "echo", text="small")) == "echo:small"


async def test_oversized_push_is_refused_upstream() -> None:
    """A push longer than max_line_bytes is answered with an error so the server does not wait
    forever."""
    async with opened(
        misbehaving("normal", "--big-bytes", "200000"), max_line_bytes=65536
    ) as session:
        assert text_of(await call_tool(session, "bigpush")) == f"refused:{INVALID_REQUEST}"


async def test_stderr_flood_is_rate_limited_and_counted() -> None:
    """A stderr flood is logged at most at the rate limit; every other line is counted as
    suppressed."""
    with capture_logs() as logs:
        async with opened(misbehaving("flood", "--flood-lines", "5000")) as session:
            assert text_of(await call_tool(session, "echo", text="x")) == "echo:x"
    logged = [entry for entry in logs if entry["event"] == "upstream_stderr"]
    suppressed = sum(
        entry["lines"] for entry in logs if entry["event"] == "upstream_stderr_suppressed"
    )
    assert 0 < len(logged) <= 200
    assert len(logged) + suppressed == 5000


def test_stderr_relay_limits_each_window_and_truncates_long_lines() -> None:
    """Per one-second window at most N lines are logged; long lines are cut; the rest is reported
    once."""
    now = [0.0]
    with capture_logs() as logs:
        relay = StderrRelay(structlog.get_logger(), lines_per_s=3, clock=lambda: now[0])
        relay.feed(b"".join(b"line %d\n" % n for n in range(10)))
        now[0] = 1.5
        relay.feed(b"z" * 1500 + b"\n")
        relay.feed(b"tail without newline")
        relay.finish()
    assert [entry.get("line", "")[:6] for entry in logs] == [
        "line 0",
        "line 1",
        "line 2",
        "",
        "zzzzzz",
        "tail w",
    ]
    assert logs[3] == {
        "event": "upstream_stderr_suppressed",
        "lines": 7,
        "limit_per_s": 3,
        "log_level": "warning",
    }
    assert logs[4]["truncated_chars"] == 500
    assert (relay.logged, relay.suppressed) == (5, 7)


async def test_aclose_stops_a_well_behaved_server_by_closing_stdin() -> None:
    """aclose() fails pending calls, lets the server exit on stdin EOF, and is idempotent."""
    with capture_logs() as logs:
        async with opened(misbehaving("normal")) as session:
            call = session.start("tools/call", {"name": "slow", "arguments": {}})
            await session.aclose()
            await session.aclose()
            with pytest.raises(UpstreamSessionLost, match="closed by the bridge"):
                await call.result()
            assert not session.is_alive
    [stopped] = [entry for entry in logs if entry["event"] == "upstream_process_stopped"]
    assert (stopped["how"], stopped["code"]) == ("exited", 0)


async def test_command_that_cannot_start_names_the_program_only() -> None:
    """A missing program gives UpstreamUnavailable naming the program and the OS error, never the
    arguments."""
    command = "no-such-legacy-server-xyz --token=s3cret"
    with pytest.raises(UpstreamUnavailable) as caught:
        await StdioUpstreamSession.open(settings(command), CAPABILITIES, on_unrelated=Inbox())
    assert caught.value.message == (
        "Cannot start legacy stdio server 'no-such-legacy-server-xyz': No such file or directory"
    )
    with pytest.raises(UpstreamUnavailable) as checked:
        check_command(settings(command))
    assert "s3cret" not in checked.value.message and "s3cret" not in str(checked.value.data)


async def test_missing_working_directory_is_reported() -> None:
    """A cwd that does not exist is named in the error instead of a confusing 'file not found'."""
    with pytest.raises(
        UpstreamUnavailable, match="working directory '/nonexistent/dir' does not exist"
    ):
        await StdioUpstreamSession.open(
            settings(misbehaving("normal"), cwd="/nonexistent/dir"),
            CAPABILITIES,
            on_unrelated=Inbox(),
        )


def test_check_command_resolves_the_program() -> None:
    """check_command finds the program on PATH (or by path) without starting it."""
    assert check_command(settings(misbehaving("normal"))) == sys.executable
    assert check_command(UpstreamSettings(command="sh -c true")).endswith("/sh")
    with pytest.raises(UpstreamUnavailable, match="not a valid command line"):
        check_command(UpstreamSettings(command='python "unterminated'))
