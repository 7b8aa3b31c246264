"""Shared helpers for the MRTR integration tests (`test_mrtr_*.py`): the interactive legacy server
(`tests/peers/interactive_server.py`) and its journal, raw MRTR posts, canned client answers.

The journal is the server's own record of what reached it (push answers and errors, cancellations,
tool starts), one JSON object a line in `<state dir>/journal.jsonl`; tests read it directly, so
reading it sends nothing through the bridge. Every tool takes a `tag` that labels its events.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from translators.protocol.eras import (
    ELICIT,
    MODERN_VERSION,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    ROOTS,
    SAMPLE,
    TOOLS_CALL,
)
from translators.wire.errors import INVALID_PARAMS, INVALID_REQUEST_STATE_MESSAGE
from translators.wire.jsonrpc import JsonObject

from .harness import (
    BRIDGE_EXE,
    REPO_ROOT,
    Bridged,
    ModernPoster,
    PeerProcess,
    Peers,
    RawReply,
    bridge_env,
    legacy_stdio_command,
)

INTERACTIVE = "interactive_server.py"
FULL_CAPABILITIES: JsonObject = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {"listChanged": True},
}
ELICIT_COMPLETE = "notifications/elicitation/complete"
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
SAMPLING_MESSAGES: list[dict[str, Any]] = [  # interactive_server.py's `sample` sends these
    {"role": "user", "content": {"type": "text", "text": "What is the weather in Paris?"}},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call-1", "name": "get_weather", "input": {"city": "Paris"}}
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "toolUseId": "call-1",
                "content": [{"type": "text", "text": "18C, sunny"}],
            }
        ],
    },
    {"role": "user", "content": {"type": "image", "data": PIXEL_PNG, "mimeType": "image/png"}},
]
TOOL_USE_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "call-2", "name": "get_weather", "input": {"city": "Lyon"}}
    ],
    "model": "tool-model",
    "stopReason": "toolUse",
}
WAIT_S = 10.0


# ---- the journal -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Journal:
    """The interactive server's event journal (shared by every process using `state_dir`)."""

    state_dir: Path

    def entries(self, tag: str) -> list[JsonObject]:
        path = self.state_dir / "journal.jsonl"
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [entry for entry in map(json.loads, filter(str.strip, lines)) if entry["tag"] == tag]

    def events(self, tag: str) -> list[str]:
        return [entry["event"] for entry in self.entries(tag)]

    def answers(self, tag: str) -> list[JsonObject]:
        """The results of the tag's answered pushes, in arrival order."""
        return [entry["result"] for entry in self.entries(tag) if entry["event"] == "answer"]

    def pids(self, tag: str) -> set[int]:
        return {entry["pid"] for entry in self.entries(tag)}

    async def wait_for(self, tag: str, *events: str, timeout: float = WAIT_S) -> list[JsonObject]:
        """Poll until every one of `events` was recorded for `tag` (bounded); the tag's entries."""
        async with asyncio.timeout(timeout):
            while not set(events) <= set(self.events(tag)):
                await asyncio.sleep(0.02)
        return self.entries(tag)

    def visit(self, elicitation_id: str) -> None:
        """The user completes a URL elicitation out of band (what `authorize` waits for)."""
        (self.state_dir / f"visited-{elicitation_id}").touch()


@dataclass
class Interactive(Bridged):
    """The interactive legacy server behind the bridge, and its journal (a `Bridged`, so a failed
    test's report carries both peers' logs)."""

    journal: Journal


# The interactive server's `everything` sends its three pushes at once: declared
# (`held.batch_sizes`), its round is complete on the third push, whatever the timing.
EVERYTHING_AT_ONCE: dict[str, int] = {"everything": 3}


def start_interactive(
    peers: Peers, state_dir: Path, env: Mapping[str, str] | None = None
) -> Interactive:
    """The interactive server over HTTP (journal in `state_dir`) with `mrtr-bridge serve` in
    front."""
    legacy = peers.legacy(INTERACTIVE, "--state-dir", str(state_dir))
    return Interactive(legacy, peers.bridge(legacy.url, env=env), Journal(state_dir))


def interactive_stdio_command(state_dir: Path) -> str:
    """The command line that runs the interactive server over stdio from `.venv-legacy`."""
    return legacy_stdio_command(INTERACTIVE, "--state-dir", str(state_dir))


@contextlib.asynccontextmanager
async def stdio_bridge_client(
    state_dir: Path, env: Mapping[str, str] | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    """The modern client launching `mrtr-bridge stdio --upstream-command "<interactive server>"`
    (with a configured requestState key; `env` adds bridge settings, see `bridge_env`)."""
    client_kwargs.setdefault("mode", MODERN_VERSION)
    client_kwargs.setdefault("cache", None)
    key = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    server = StdioServerParameters(
        command=str(BRIDGE_EXE),
        args=[
            "stdio",
            "--upstream-command",
            interactive_stdio_command(state_dir),
            "--log-level",
            "warning",
        ],
        env={
            "PATH": os.environ.get("PATH", ""),
            **bridge_env({"held": {"keys": {"test": key}}}),
            **(env or {}),
        },
        cwd=str(REPO_ROOT),
    )
    async with Client(server, **client_kwargs) as client:
        yield client


# ---- canned modern-client answers --------------------------------------------------------------


def echo_answer(message: str) -> str:
    return f"re: {message}"


@dataclass
class Answerer:
    """Client callbacks that answer from the question itself, so crossed answers show.

    Form elicitations get `{"answer"|"name": echo_answer(message)}`; URL elicitations "visit" the
    URL (journal marker) and accept; sampling returns `sample_text`; roots return `roots`."""

    journal: Journal | None = None
    action: str = "accept"
    sample_text: str = "Paris"
    roots: list[str] = field(default_factory=lambda: ["file:///ws"])
    jitter: Callable[[], float] | None = None
    asked: list[tuple[str, Any]] = field(default_factory=list)

    async def elicitation(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((ELICIT, params))
        if self.jitter is not None:
            await asyncio.sleep(self.jitter())
        if isinstance(params, types.ElicitRequestURLParams):
            if self.journal is not None and "/authorize/" in params.url:
                self.journal.visit("auth-" + params.url.rsplit("/", 1)[-1])
            return types.ElicitResult(action="accept")
        if self.action != "accept":
            return types.ElicitResult.model_validate({"action": self.action})
        fields = (
            list((params.requested_schema.get("properties") or {}).keys())
            if params.requested_schema
            else []
        )
        return types.ElicitResult(
            action="accept", content={name: echo_answer(params.message) for name in fields}
        )

    async def sampling(
        self, ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append((SAMPLE, params))
        text = types.TextContent(type="text", text=self.sample_text)
        return types.CreateMessageResult(role="assistant", content=text, model="canned-model")

    async def list_roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append((ROOTS, None))
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in self.roots])

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicitation,
            "sampling_callback": self.sampling,
            "list_roots_callback": self.list_roots,
        }

    def methods(self) -> list[str]:
        return [method for method, _ in self.asked]


def text_of(result: types.CallToolResult) -> str:
    """The single text block of a tool result."""
    assert not result.is_error, result
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


def json_of(result: types.CallToolResult) -> Any:
    return json.loads(text_of(result))


# ---- manual rounds through the modern client ----------------------------------------------------


def elicited(**content: Any) -> types.ElicitResult:
    """An accepted form elicitation answer."""
    return types.ElicitResult(action="accept", content=content)


@dataclass
class ManualRounds:
    """`tools/call` rounds driven by hand through a modern client's session
    (`allow_input_required=True`)."""

    client: Client

    async def call(
        self,
        name: str,
        arguments: JsonObject,
        *,
        state: str | None = None,
        responses: JsonObject | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await self.client.session.call_tool(
            name,
            arguments,
            allow_input_required=True,
            request_state=state,
            input_responses=responses,
        )

    async def held(
        self,
        name: str,
        arguments: JsonObject,
        *,
        state: str | None = None,
        responses: JsonObject | None = None,
    ) -> tuple[dict[str, Any], str]:
        """The call must come back as an InputRequiredResult: its (inputRequests, requestState)."""
        result = await self.call(name, arguments, state=state, responses=responses)
        assert isinstance(result, types.InputRequiredResult), result
        assert result.input_requests and result.request_state, result
        return result.input_requests, result.request_state

    async def done(
        self,
        name: str,
        arguments: JsonObject,
        *,
        state: str | None = None,
        responses: JsonObject | None = None,
    ) -> types.CallToolResult:
        """The call must complete."""
        result = await self.call(name, arguments, state=state, responses=responses)
        assert isinstance(result, types.CallToolResult), result
        return result


def assert_client_rejected(
    outcome: BaseException | object, message: str = INVALID_REQUEST_STATE_MESSAGE
) -> None:
    """`outcome` is the client's MCPError carrying the requestState rejection: the fixed one, or
    the expired or already used one (`message`)."""
    assert isinstance(outcome, MCPError), outcome
    assert (outcome.code, outcome.error.message) == (INVALID_PARAMS, message)


async def client_rejection(
    call: Awaitable[Any], message: str = INVALID_REQUEST_STATE_MESSAGE
) -> None:
    """Await `call`, which must fail with the requestState rejection `message`."""
    try:
        outcome: object = await call
    except MCPError as exc:
        outcome = exc
    assert_client_rejected(outcome, message)


# ---- raw MRTR posts ----------------------------------------------------------------------------


def poster(
    http: Any,
    url: str,
    authorization: str | None = "Bearer alice",
    capabilities: JsonObject | None = None,
) -> ModernPoster:
    """A raw modern poster declaring every input capability (and `Authorization` unless None)."""
    headers = {"Authorization": authorization} if authorization is not None else {}
    caps = FULL_CAPABILITIES if capabilities is None else capabilities
    return ModernPoster(http, url, capabilities=dict(caps), headers=headers)


async def call_tool(
    post: ModernPoster,
    name: str,
    arguments: JsonObject,
    *,
    responses: JsonObject | None = None,
    state: str | None = None,
    headers: Mapping[str, str | None] | None = None,
    timeout: float = 30.0,
) -> RawReply:
    """A raw `tools/call`, optionally a retry (`inputResponses`, `requestState`)."""
    params: JsonObject = {"name": name, "arguments": arguments}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return await post.post(TOOLS_CALL, params, headers=headers, timeout=timeout)


def input_required(reply: RawReply) -> tuple[JsonObject, str]:
    """(inputRequests, requestState) of an InputRequiredResult reply."""
    assert reply.status == 200, reply.text
    result = reply.response.get("result")
    assert isinstance(result, dict) and result.get("resultType") == RESULT_INPUT_REQUIRED, (
        reply.response
    )
    return result["inputRequests"], result["requestState"]


def complete_text(reply: RawReply) -> str:
    """The single text block of a complete `tools/call` reply."""
    assert reply.status == 200, reply.text
    result = reply.response.get("result")
    assert isinstance(result, dict) and result.get("resultType") == RESULT_COMPLETE, reply.response
    assert result.get("isError") is not True, result
    (block,) = result["content"]
    text: str = block["text"]
    return text


def accept(**content: Any) -> JsonObject:
    return {"action": "accept", "content": content}


def assert_state_rejected(reply: RawReply, message: str = INVALID_REQUEST_STATE_MESSAGE) -> None:
    """The public rejection of a bad `requestState`: -32602 with the fixed message (or the expired
    or already used one, `message`)."""
    error = reply.response.get("error")
    assert error == {"code": INVALID_PARAMS, "message": message}, reply.response


def rejection_reasons(bridge: PeerProcess) -> list[str]:
    """The log-only reasons of every requestState rejection the bridge logged so far, in order."""
    lines = bridge.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    entries = [
        json.loads(line)
        for line in lines
        if '"request_state_rejected"' in line and line.startswith("{")
    ]
    return [entry["reason"] for entry in entries if entry.get("event") == "request_state_rejected"]


def tampered(state: str) -> str:
    """`state` with one character in the middle of its ciphertext changed."""
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]


__all__ = [
    "ANSWER_SCHEMA",
    "ELICIT_COMPLETE",
    "FULL_CAPABILITIES",
    "INTERACTIVE",
    "SAMPLING_MESSAGES",
    "TOOL_USE_ANSWER",
    "Answerer",
    "Interactive",
    "Journal",
    "ManualRounds",
    "accept",
    "assert_client_rejected",
    "assert_state_rejected",
    "call_tool",
    "client_rejection",
    "complete_text",
    "echo_answer",
    "elicited",
    "input_required",
    "interactive_stdio_command",
    "json_of",
    "poster",
    "rejection_reasons",
    "start_interactive",
    "stdio_bridge_client",
    "tampered",
    "text_of",
]
