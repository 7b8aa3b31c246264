"""The real engine, pool and held-call registry around a `FakeUpstream`, driven request by request.

`scripted_bridge(upstream, **overrides)` builds the bridge the way the composition root does
(`proxy.app.compose.bridge_runtime`, with the fake as its session opener) and yields a
`ScriptedBridge`
whose `send()` hands one modern request to `Engine.handle` (the engine's one entry point) and
returns the JSON-RPC response the client would receive. `start()` does the same in a task, so a
test can interleave client requests with what the upstream does.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fake_upstream import WAIT_S, FakeCall, FakeUpstream, Push

from config.settings import Settings
from proxy.app.compose import bridge_runtime
from proxy.common.front_request import FrontRequest
from proxy.engine.engine import Engine
from proxy.upstream.base import SessionOpener
from proxy.upstream.pool import UpstreamPool
from translators.held.push_ledger import BatchKey, BatchSizes
from translators.protocol.eras import (
    ELICIT,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    RESULT_INPUT_REQUIRED,
    TOOLS_CALL,
)
from translators.wire.jsonrpc import JsonObject

ALL_CAPABILITIES: JsonObject = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
ELICIT_PARAMS: JsonObject = {
    "message": "Your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}

SAMPLING_PARAMS: JsonObject = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
    "maxTokens": 5,
}


def accepted(name: str) -> JsonObject:
    return {"action": "accept", "content": {"name": name}}


def text_result(text: str) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "isError": False}


@dataclass
class RecordingSink:
    """A request's notification stream: what the client would see before the response."""

    sent: list[JsonObject] = field(default_factory=list)

    def send(self, notification: JsonObject) -> None:
        self.sent.append(notification)


class OnePushPerRound(BatchSizes):
    """What a scripted bridge knows before its first call: every tool sends one push per round,
    unless a test teaches otherwise (`ScriptedBridge.learned`) or the bridge observes otherwise."""

    def declared(self, key: BatchKey) -> int:
        return 1


class ScriptedBridge:
    def __init__(self, engine: Engine, pool: UpstreamPool, upstream: FakeUpstream) -> None:
        engine.registry.batch_sizes = OnePushPerRound()
        self.engine = engine
        self.pool = pool
        self.upstream = upstream
        self._ids = itertools.count(1)

    def request(
        self,
        tool: str = "ask",
        arguments: JsonObject | None = None,
        *,
        principal: str = "alice",
        capabilities: JsonObject | None = None,
        method: str = TOOLS_CALL,
        extra: JsonObject | None = None,
    ) -> FrontRequest:
        meta = {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: {"name": "t", "version": "1"},
            META_CLIENT_CAPABILITIES: ALL_CAPABILITIES if capabilities is None else capabilities,
        }
        params: JsonObject = {
            "name": tool,
            "arguments": arguments or {},
            "_meta": meta,
            **(extra or {}),
        }
        return FrontRequest(next(self._ids), method, params, principal, transport="stdio")

    def learned(self, *sizes: int, tool: str = "ask", method: str = TOOLS_CALL) -> None:
        """Teach the bridge that `tool` sends `sizes[n]` pushes together in round n + 1 (as if an
        earlier call had shown it): a batch is then complete the moment its last push arrives.
        Before that, every tool is known to send one push per round (`OnePushPerRound`)."""
        for round_, size in enumerate(sizes, start=1):
            self.engine.registry.batch_sizes.note((method, tool), round_, size)

    def retry_of(
        self,
        first: FrontRequest,
        reply: JsonObject,
        responses: JsonObject,
        *,
        principal: str | None = None,
    ) -> FrontRequest:
        """The client's retry of `first` after `reply` (an InputRequiredResult response)."""
        state = reply["result"]["requestState"]
        params = {**first.params, "inputResponses": responses, "requestState": state}
        return FrontRequest(
            next(self._ids), first.method, params, principal or first.principal, transport="stdio"
        )

    async def send(self, request: FrontRequest, sink: RecordingSink | None = None) -> JsonObject:
        async with asyncio.timeout(WAIT_S):
            return await self.engine.handle(request, sink or RecordingSink())

    async def settled(self) -> None:
        """Wait (bounded) until no interactive call is left in the registry."""
        async with asyncio.timeout(WAIT_S):
            while len(self.engine.registry):
                await asyncio.sleep(0.001)

    def start(
        self, request: FrontRequest, sink: RecordingSink | None = None
    ) -> asyncio.Task[JsonObject]:
        return asyncio.get_running_loop().create_task(self.send(request, sink))


def input_requests(response: JsonObject) -> dict[str, Any]:
    """The inputRequests of an InputRequiredResult response (asserting that is what it is)."""
    result = response["result"]
    assert result["resultType"] == RESULT_INPUT_REQUIRED, response
    requests: dict[str, Any] = result.get("inputRequests", {})
    return requests


def result_text(response: JsonObject) -> str:
    result = response["result"]
    assert result["resultType"] == "complete", response
    text: str = result["content"][0]["text"]
    return text


def error_of(response: JsonObject) -> JsonObject:
    assert "error" in response, response
    error: JsonObject = response["error"]
    return error


def fault_of(response: JsonObject) -> JsonObject:
    """A bridge-side failure's error, less its correlation id (checked: the log's key to the
    details)."""
    error = error_of(response)
    correlation_id = error["data"].pop("correlationId")
    assert re.fullmatch(r"[0-9a-f]{16}", correlation_id), correlation_id
    return error


def settings_with(**sections: JsonObject) -> Settings:
    """Settings for a bridge in front of the fake. The batch ceiling is out of reach: a batch closes
    when it holds as many pushes as learned (`ScriptedBridge.learned`), never by a timer, unless a
    test sets one. The scripted fake serves many sessions: the session-limit check (a ping) is off
    unless a test turns it on."""
    data: dict[str, JsonObject] = {
        "upstream": {"url": "http://fake-upstream.invalid/mcp", "session_limit": "many"},
        "held": {"batch_quiet_ms": 600_000, "batch_max_ms": 600_000},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return Settings.model_validate(data)


@asynccontextmanager
async def scripted_bridge(
    fake: FakeUpstream | None = None, *, opener: SessionOpener | None = None, **sections: JsonObject
) -> AsyncIterator[ScriptedBridge]:
    """The bridge in front of `fake` (a new `FakeUpstream` if None); `sections` override
    settings."""
    fake = fake if fake is not None else FakeUpstream()
    async with bridge_runtime(settings_with(**sections), opener=opener or fake.open) as (
        engine,
        pool,
    ):
        yield ScriptedBridge(known_ordinary(engine), pool, fake)


def known_ordinary(engine: Engine) -> Engine:
    """The fake never asks for roots outside a call: say so up front, so the one-time roots probe
    (pinned by tests/proxy/calls/test_roots_affinity.py) opens no session of its own in these
    scripts."""
    engine.roots.keeps_roots = False
    return engine


@dataclass
class Held:
    """A call held after its first round: the first request, its upstream call, the push and the
    reply."""

    request: FrontRequest
    call: FakeCall
    push: Push
    reply: JsonObject


async def hold(
    bridge: ScriptedBridge,
    key: str = "name",
    *,
    tool: str = "ask",
    principal: str = "alice",
    arguments: JsonObject | None = None,
) -> Held:
    """Start a call whose upstream asks one elicitation (input key `key`) and wait for its round."""
    request = bridge.request(tool, arguments, principal=principal)
    first = bridge.start(request)
    call = await bridge.upstream.next_call()
    push = call.push(ELICIT, ELICIT_PARAMS, key=key)
    reply = await first
    assert list(input_requests(reply)) == [key]
    return Held(request, call, push, reply)


def rejections(bridge: ScriptedBridge, reason: str) -> float:
    """How many retries the bridge refused for `reason` (the requestState rejection metric)."""
    return bridge.engine.metrics.sample("mrtr_bridge_request_state_rejections_total", reason=reason)
