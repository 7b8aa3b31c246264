"""Negotiating older revisions with the fake legacy server (HTTP) and a scripted stdio peer.

Table-driven from the revision matrix: for each revision the server answers, the session remembers
it, the version header is sent exactly where the revision has it, and the capabilities declared in
`initialize` are the revision's shape."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from fake_legacy import FakeCall, FakeLegacy, echo_legacy, text_result
from safety_harness import (
    Held,
    bridge_settings,
    call,
    error_of,
    inprocess_bridge,
    result_of,
    retry,
    text_of,
)
from structlog.testing import capture_logs

from config.settings import UpstreamSettings
from proxy.app.compose import http_opener
from proxy.upstream.base import Inbound
from proxy.upstream.http.session import HttpUpstreamSession
from proxy.upstream.negotiation import NegotiatingOpener
from proxy.upstream.stdio.session import StdioUpstreamSession
from translators.protocol.revisions import OFFERED, REVISIONS, SUPPORTED, UnsupportedUpstreamVersion
from translators.wire.jsonrpc import JsonObject

MISBEHAVING = Path(__file__).resolve().parents[2] / "peers" / "stdio_misbehaving.py"
# What a modern client that declared everything becomes in the newest revision's shape.
FULL: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"context": {}, "tools": {}},
    "roots": {},
}
# The capabilities each revision's `initialize` carries for FULL.
SHAPED: dict[str, dict[str, Any]] = {
    "2025-11-25": FULL,
    "2025-06-18": {"elicitation": {}, "sampling": {}, "roots": {}},
    "2025-03-26": {"sampling": {}, "roots": {}},
    "2024-11-05": {"sampling": {}, "roots": {}},
}
WITH_HEADER = {"2025-11-25", "2025-06-18"}


def _ignore(inbound: Inbound) -> None:
    pass


@pytest.fixture
def fake() -> FakeLegacy:
    return echo_legacy()


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def url(fake: FakeLegacy, aiohttp_server: Any) -> str:
    server: TestServer = await aiohttp_server(fake.app)
    return str(server.make_url("/mcp"))


def _settings(url: str) -> UpstreamSettings:
    return UpstreamSettings(url=url, init_timeout_s=5.0, connect_timeout_s=2.0)


async def _echo(session: HttpUpstreamSession | StdioUpstreamSession, text: str) -> Any:
    call = session.start(
        "tools/call", {"name": "echo", "arguments": {"text": text}}, headers={}, on_inbound=None
    )
    async with asyncio.timeout(10):
        return await call.result()


def test_the_matrix_covers_the_supported_set() -> None:
    """The tables of this test name exactly the supported revisions, newest (offered) first."""
    assert SUPPORTED == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05") == tuple(SHAPED)
    assert OFFERED == "2025-11-25"
    assert {rev.version for rev in REVISIONS.values() if rev.version_header} == WITH_HEADER


@pytest.mark.parametrize("version", SUPPORTED)
async def test_http_session_speaks_the_answered_revision(
    version: str, fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """The bridge offers 2025-11-25, accepts the older answer, remembers it, and sends the version
    header on every later request only from 2025-06-18 on."""
    fake.protocol_version = version
    session = await HttpUpstreamSession.open(
        client, url, {}, headers={}, on_unrelated=_ignore, settings=_settings(url)
    )
    try:
        assert session.revision is REVISIONS[version]
        assert await _echo(session, "hi") == text_result("hi")
    finally:
        await session.aclose()
    [server_session] = fake.all_sessions
    assert server_session.init_params["protocolVersion"] == OFFERED
    later = [headers for verb, rpc, headers in fake.requests if rpc != "initialize"]
    # the GET stream opens before `initialized`, so a push sent on it is not lost
    assert [verb for verb, rpc, _ in fake.requests] == ["POST", "GET", "POST", "POST", "DELETE"]
    sent = {headers.get("MCP-Protocol-Version") for headers in later}
    assert sent == ({version} if version in WITH_HEADER else {None})


@pytest.mark.parametrize("version", SUPPORTED)
async def test_opener_declares_the_revisions_capabilities(
    version: str, fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """The first session learns the revision; if its shape differs the session is deleted unused (a
    moment later) and reopened with the revision's shape; the next session is shaped right at once.
    """
    fake.protocol_version = version
    opener = NegotiatingOpener(http_opener(client, _settings(url)), retire_after_s=0.0)
    first = await opener(FULL, {}, _ignore)
    second = await opener(FULL, {}, _ignore)
    try:
        assert first.revision is second.revision is REVISIONS[version]
        assert opener.expected is REVISIONS[version]
    finally:
        await opener.aclose()
        await first.aclose()
        await second.aclose()
    declared = [session.init_params["capabilities"] for session in fake.all_sessions]
    if version == OFFERED:
        assert declared == [FULL, FULL]
    else:
        assert declared == [FULL, SHAPED[version], SHAPED[version]]
        assert fake.deleted[0] == fake.all_sessions[0].session_id
        assert not [
            rpc
            for verb, rpc, headers in fake.requests
            if rpc == "tools/call" and headers.get("Mcp-Session-Id") == fake.deleted[0]
        ]


async def test_opener_without_capabilities_learns_at_no_cost(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A capability-less session (the readiness probe) is never reopened, and teaches the
    revision."""
    fake.protocol_version = "2025-03-26"
    opener = NegotiatingOpener(http_opener(client, _settings(url)))
    probe = await opener({}, {}, _ignore)
    session = await opener(FULL, {}, _ignore)
    await probe.aclose()
    await session.aclose()
    assert [s.init_params["capabilities"] for s in fake.all_sessions] == [{}, SHAPED["2025-03-26"]]


async def test_unknown_version_is_refused_by_the_opener(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A version outside the set: a clear error naming it and the set; the session is deleted."""
    fake.protocol_version = "2026-07-28"
    opener = NegotiatingOpener(http_opener(client, _settings(url)))
    with pytest.raises(UnsupportedUpstreamVersion) as raised:
        await opener(FULL, {}, _ignore)
    assert "protocol version '2026-07-28'" in raised.value.message
    assert (
        "supports 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 upstream" in raised.value.message
    )
    assert raised.value.verdict == (
        "unsupported protocol version '2026-07-28' (supported: 2025-11-25, 2025-06-18, "
        "2025-03-26, 2024-11-05)"
    )
    assert fake.deleted == ["sess-1"]


def _stdio(version: str) -> UpstreamSettings:
    command = shlex.join([sys.executable, str(MISBEHAVING), "--protocol-version", version])
    return UpstreamSettings(command=command, init_timeout_s=15.0, kill_grace_s=1.0)


@pytest.mark.parametrize("version", SUPPORTED)
async def test_stdio_session_speaks_the_answered_revision(version: str) -> None:
    """Over stdio the answered revision is accepted and remembered just the same."""
    async with asyncio.timeout(30):
        session = await StdioUpstreamSession.open(_stdio(version), {}, on_unrelated=_ignore)
    try:
        assert session.revision is REVISIONS[version]
        assert await _echo(session, "x") == {
            "content": [{"type": "text", "text": "echo:x"}],
            "isError": False,
        }
    finally:
        await session.aclose()


async def test_stdio_unknown_version_is_refused() -> None:
    """Over stdio too, the error names the version and the supported set, and the process is
    stopped."""
    with pytest.raises(
        UnsupportedUpstreamVersion, match=r"protocol version '2024-01-01'; the bridge supports"
    ):
        async with asyncio.timeout(30):
            await StdioUpstreamSession.open(_stdio("2024-01-01"), {}, on_unrelated=_ignore)


async def test_readyz_names_an_unsupported_version(fake: FakeLegacy, url: str) -> None:
    """/readyz is 503 and says which version the upstream answered and which the bridge supports."""
    fake.protocol_version = "2099-01-01"
    settings = bridge_settings(url, held={"keys": {"k1": "A" * 43}})
    async with asyncio.timeout(30), inprocess_bridge(settings) as bridge:
        status, body = await bridge.get("/readyz")
        error = error_of(await call(bridge.poster(), "echo", text="x"))
    verdict = (
        "unsupported protocol version '2099-01-01' (supported: 2025-11-25, 2025-06-18, "
        "2025-03-26, 2024-11-05)"
    )
    checks = {"upstream": verdict, "transport": "streamable-http", "era": "legacy"}
    assert (status, json.loads(body)) == (
        503,
        {
            "status": "unavailable",
            "ready_requires": "any",
            "checks": {"keys": "configured", **checks},
            "upstreams": {"/mcp": {"status": "unavailable", "checks": checks}},
        },
    )
    assert (
        "protocol version '2099-01-01'; the bridge supports 2025-11-25, 2025-06-18"
        in error["message"]
    )


# ---- through the bridge: pushes and answers in the session's revision ---------------------------

SIZES: dict[str, Any] = {
    "type": "object",
    "properties": {"size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]}},
    "required": ["size"],
}


def _asking(fake: FakeLegacy) -> None:
    async def pick(script: FakeCall) -> dict[str, Any]:
        answer = await script.push(
            "elicitation/create", {"message": "Size?", "requestedSchema": SIZES}
        )
        return text_result(json.dumps(answer.get("result", answer.get("error"))))

    fake.tools["pick"] = pick


async def test_2025_06_18_elicitation_end_to_end(fake: FakeLegacy, url: str) -> None:
    """The client sees the titled single-select; a multi-select answer is refused with the
    reason and never sent; the held call survives and a valid answer reaches the server."""
    fake.protocol_version = "2025-06-18"
    _asking(fake)
    async with asyncio.timeout(30), inprocess_bridge(bridge_settings(url)) as bridge:
        poster = bridge.poster()
        first = result_of(await call(poster, "pick"))
        [key] = first["inputRequests"]
        held = Held("pick", {}, first["requestState"], (key,))
        refused = error_of(
            await retry(poster, held, {key: {"action": "accept", "content": {"size": ["s", "l"]}}})
        )
        final = text_of(
            await retry(poster, held, {key: {"action": "accept", "content": {"size": "l"}}})
        )
    assert first["inputRequests"][key]["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "size": {
                "type": "string",
                "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            }
        },
        "required": ["size"],
    }
    [session] = [s for s in fake.all_sessions if s.responses]
    assert [r["result"] for r in session.responses] == [
        {"action": "accept", "content": {"size": "l"}}
    ]
    assert json.loads(final) == {"action": "accept", "content": {"size": "l"}}
    assert refused["code"] == -32602
    assert refused["message"] == (
        f"inputResponses[{key!r}] cannot be sent to the server: content['size'] is a list;"
        " this revision takes single values only (the server speaks MCP 2025-06-18)"
    )


# ---- 2025-03-26 batches --------------------------------------------------------------------------


async def test_stdio_batch_line_is_split_at_2025_03_26() -> None:
    """A batch line from a 2025-03-26 server: the log, then the answer, each handled as if alone."""
    inbox: list[JsonObject] = []
    async with asyncio.timeout(30):
        session = await StdioUpstreamSession.open(
            _stdio("2025-03-26"), {}, on_unrelated=lambda inbound: inbox.append(inbound.message)
        )
    try:
        call = session.start("tools/call", {"name": "batch", "arguments": {"text": "b"}})
        async with asyncio.timeout(10):
            result = await call.result()
    finally:
        await session.aclose()
    assert result == {"content": [{"type": "text", "text": "batch:b"}], "isError": False}
    assert inbox == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "batched"},
        }
    ]


async def test_stdio_batch_line_is_invalid_at_2025_11_25() -> None:
    """Outside 2025-03-26 an array line is one invalid line: rejected, nothing in it is
    delivered."""
    inbox: list[JsonObject] = []
    async with asyncio.timeout(30):
        session = await StdioUpstreamSession.open(
            _stdio("2025-11-25"), {}, on_unrelated=lambda inbound: inbox.append(inbound.message)
        )
    try:
        with capture_logs() as logs:
            batched = session.start("tools/call", {"name": "batch", "arguments": {"text": "b"}})
            assert await _echo(session, "after") == {
                "content": [{"type": "text", "text": "echo:after"}],
                "isError": False,
            }
        assert not batched.is_done  # its answer was inside the rejected line
    finally:
        await session.aclose()
    assert inbox == []
    assert [
        entry["reason"] for entry in logs if entry["event"] == "upstream_stdio_line_rejected"
    ] == ["line is JSON but not an object"]


def _batching(fake: FakeLegacy) -> None:
    async def batch(script: FakeCall) -> dict[str, Any]:
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1},
        }
        reply = {"jsonrpc": "2.0", "id": script.request_id, "result": text_result("batched")}
        await script.send_raw(json.dumps([progress, reply]))
        return text_result("after the batch")  # the call's answer only where the batch is skipped

    fake.tools["batch"] = batch


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
async def test_http_batch_event_is_split_only_at_2025_03_26(
    version: str, fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An SSE event holding a batch: at 2025-03-26 the progress goes to the call, then its answer;
    at any other revision the event is not a message: logged and skipped (the one rule for bad
    upstream events on every transport), so the call gets the server's next answer."""
    fake.protocol_version = version
    _batching(fake)
    inbound: list[JsonObject] = []
    session = await HttpUpstreamSession.open(
        client, url, {}, headers={}, on_unrelated=_ignore, settings=_settings(url)
    )
    try:
        call = session.start(
            "tools/call",
            {"name": "batch"},
            headers={},
            on_inbound=lambda message: inbound.append(message.message),
        )
        with capture_logs() as logs:
            async with asyncio.timeout(10):
                result = await call.result()
    finally:
        await session.aclose()
    skipped = [entry["reason"] for entry in logs if entry["event"] == "upstream_message_ignored"]
    if version == "2025-03-26":
        assert (result, skipped) == (text_result("batched"), [])
    else:
        assert (result, skipped) == (
            text_result("after the batch"),
            ["sent something that is not a JSON-RPC 2.0 message object"],
        )
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": 1},
    }
    assert inbound == ([progress] if version == "2025-03-26" else [])


async def test_2024_11_05_server_is_reflected_honestly(fake: FakeLegacy, url: str) -> None:
    """discover claims exactly what the old server declared (no completions flag, nothing invented),
    a result keeps only the fields the server sent, and completion is forwarded for the server to
    answer."""
    fake.protocol_version = "2024-11-05"
    fake.capabilities = {"tools": {}, "logging": {}}
    async with asyncio.timeout(30), inprocess_bridge(bridge_settings(url)) as bridge:
        poster = bridge.poster()
        discovered = result_of(await poster.post("server/discover", {}))
        echoed = result_of(await call(poster, "echo", text="old"))
        completion = error_of(
            await poster.post(
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "p"},
                    "argument": {"name": "a", "value": "x"},
                    "context": {"arguments": {"b": "y"}},
                },
            )
        )
    # and the one thing the bridge serves itself: the Tasks extension (long calls as tasks)
    assert discovered["capabilities"] == {
        "tools": {},
        "logging": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert {k: v for k, v in echoed.items() if k != "_meta"} == {
        **text_result("old"),
        "resultType": "complete",
    }
    assert completion == {"code": -32601, "message": "Method not found"}
    [sent] = [m["params"] for m in fake.messages if m.get("method") == "completion/complete"]
    assert sent == {
        "ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "a", "value": "x"},
    }


@pytest.mark.parametrize("version", SUPPORTED)
async def test_bridge_declares_each_revisions_capabilities(
    version: str, fake: FakeLegacy, url: str
) -> None:
    """Through the whole bridge: the session that serves calls declared the revision's capabilities,
    and later requests carry the version header only from 2025-06-18 on."""
    fake.protocol_version = version
    async with asyncio.timeout(30), inprocess_bridge(bridge_settings(url)) as bridge:
        poster = bridge.poster()  # elicitation.form, sampling and roots
        assert text_of(await call(poster, "echo", text="a")) == "a"
        assert text_of(await call(poster, "echo", text="b")) == "b"
    expected = {
        "2025-11-25": {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
        "2025-06-18": {"elicitation": {}, "sampling": {}, "roots": {}},
        "2025-03-26": {"sampling": {}, "roots": {}},
        "2024-11-05": {"sampling": {}, "roots": {}},
    }[version]
    # The one-time roots probe declares roots alone, the same in every revision, so it also teaches
    # the opener the upstream's revision: no session is opened mis-shaped. It is deleted unused.
    probe, serving = fake.all_sessions
    assert probe.init_params["capabilities"] == {"roots": {}}
    assert fake.deleted[:1] == [probe.session_id]
    assert serving.init_params["capabilities"] == expected
    calls = [headers for verb, rpc, headers in fake.requests if rpc == "tools/call"]
    assert len(calls) == 2
    assert {h.get("Mcp-Session-Id") for h in calls} == {serving.session_id}
    assert {h.get("MCP-Protocol-Version") for h in calls} == (
        {version} if version in WITH_HEADER else {None}
    )
