"""The access log (issue 29): one `front_request_finished` line per front request at info level,
against a real legacy server (`tests/peers/journal_server.py`, mcp 1.x).

The events are captured before the redaction processor runs (`structlog.testing.capture_logs`), so
the absence of secrets is proven for what the code hands the logger, not for what redaction
leaves. The ground truth of each line is the server's journal (the rounds it asked for) and the
responses the client got."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from integration.raw_http import CLIENT_INFO
from integration.streams_helpers import StdioBridge, request
from integration.streams_helpers import call as call_params
from safety_harness import (
    Held,
    JournalPeer,
    accept,
    bridge_settings,
    call,
    inprocess_bridge,
    journal_peer,
    result_of,
    retry,
    start_held,
)

from config.settings import UpstreamSettings
from proxy.auth.keys import new_key
from proxy.auth.principal import principal_of
from proxy.observe.access import call_name, upstream_name
from proxy.stdio_front.front import STDIO_PRINCIPAL
from translators.protocol.eras import META_CLIENT_CAPABILITIES, TOOLS_CALL

TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("access")) as peer:
        yield peer


def _access(captured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in captured if entry["event"] == "front_request_finished"]


async def test_one_line_per_request_of_a_two_round_call(upstream: JournalPeer) -> None:
    kid, key = new_key()
    token = "tok-" + secrets.token_hex(16)
    answers = ["first-" + secrets.token_hex(4), "second-" + secrets.token_hex(4)]
    settings = bridge_settings(upstream.url, held={"keys": {kid: key}})
    principal = principal_of({"authorization": f"Bearer {token}"}, settings.identity)
    states: list[str] = []
    with structlog.testing.capture_logs() as captured:
        async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
            poster = bridge.poster(f"Bearer {token}")
            held = await start_held(poster, "ask_rounds", rounds=2)
            states.append(held.request_state)
            second = result_of(await retry(poster, held, accept(held, answers[0])))
            assert second["resultType"] == "input_required"
            held = type(held)(
                held.tool, held.arguments, second["requestState"], tuple(second["inputRequests"])
            )
            states.append(held.request_state)
            final = result_of(await retry(poster, held, accept(held, answers[1])))
            assert final["content"][0]["text"] == "2 rounds done"
            missing = result_of(await call(poster, "no_such_tool"))
            assert missing["isError"] is True
            refused = await retry(poster, held, accept(held, answers[1]))  # a replayed state
            code = refused.response["error"]["code"]
            unread = await poster.post(
                "resources/read", {"uri": "file:///secret.txt?token=" + token + "#frag"}
            )
            unread_code = unread.response["error"]["code"]
    rounds = [e for e in upstream.entries() if e.get("tag") == "rounds-2"]
    assert [e["event"] for e in rounds] == ["call_started", "elicit_answered", "elicit_answered"]

    lines = _access(captured)
    assert len(lines) == 6
    port = upstream.url.split(":")[2].split("/")[0]
    for line in lines:
        assert line["log_level"] == "info"
        assert line["principal"] == principal[:12]
        assert (line["client_era"], line["upstream_era"]) == ("modern", "legacy")
        assert line["upstream"] == f"127.0.0.1:{port}"
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    summary = [
        (e["method"], e["name"], e["outcome"], e["round"], e["rounds"], e["code"]) for e in lines
    ]
    assert summary == [
        ("tools/call", "ask_rounds", "input_required", 1, 1, None),
        ("tools/call", "ask_rounds", "input_required", 2, 2, None),
        ("tools/call", "ask_rounds", "complete", None, 2, None),
        ("tools/call", "no_such_tool", "complete", None, 0, None),  # a tool error is a result
        ("tools/call", "ask_rounds", "error", None, 0, code),
        ("resources/read", "file:///secret.txt", "error", None, 0, unread_code),
    ]
    revision = lines[0]["upstream_revision"]
    assert revision in ("2025-11-25", "2025-06-18") and lines[2]["upstream_revision"] == revision
    text = json.dumps(lines) + repr(captured)
    for secret in (token, *answers, *states):
        assert secret not in text
    assert "/mcp" not in json.dumps(lines)  # the upstream is a name, never its URL


async def test_the_setting_turns_it_down_to_debug(upstream: JournalPeer) -> None:
    settings = bridge_settings(upstream.url, log={"access": False})
    with structlog.testing.capture_logs() as captured:
        async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
            assert "result" in (await call(bridge.poster(), "echo", text="hi")).response
    assert [line["log_level"] for line in _access(captured)] == ["debug"]


def test_names_and_upstream_names() -> None:
    assert call_name("resources/read", {"uri": "db://t?q=1#x"}) == "db://t"
    assert call_name("resources/read", {"uri": "db://me:pw@t/x"}) == "db://t/x"
    assert call_name("prompts/get", {"name": "p" * 300}) == "p" * 200 + "...[cut, 300 characters]"
    assert call_name("tools/call", {"name": "a?b@c"}) == "a?b@c"  # a name is not a URI
    assert call_name("tools/list", {"name": "x"}) is None
    assert call_name("tools/call", []) is None
    named = [
        UpstreamSettings(url="http://10.0.0.5:8931/mcp?k=v"),
        UpstreamSettings(url="https://[::1]/sse"),
        UpstreamSettings(command="/usr/bin/python3 -m server --token abc"),
    ]
    assert [upstream_name(s) for s in named] == ["10.0.0.5:8931", "[::1]", "stdio:python3"]


async def test_the_stdio_front_logs_the_same_line(upstream: JournalPeer, tmp_path: Path) -> None:
    """`mrtr-bridge stdio` (a real child process) in front of the same server: a two-round call
    gives two lines, `mode` stdio."""
    capabilities = {META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}}}
    log_path = tmp_path / "bridge-stdio.log"
    async with asyncio.timeout(TIMEOUT_S), StdioBridge.running(upstream.url, log_path) as bridge:
        params = call_params("ask", {"tag": "stdio-1"})
        bridge.send(request(1, TOOLS_CALL, params, **capabilities))
        await bridge.until_responses(1)
        asked = bridge.response(1)["result"]
        held = Held("ask", {"tag": "stdio-1"}, asked["requestState"], tuple(asked["inputRequests"]))
        answered = {
            **params,
            "requestState": held.request_state,
            "inputResponses": accept(held, "ok"),
        }
        bridge.send(request(2, TOOLS_CALL, answered, **capabilities))
        await bridge.until_responses(2)
        assert bridge.response(2)["result"]["content"][0]["text"] == "stdio-1: ok"
    assert upstream.events("stdio-1") == ["call_started", "elicit_answered"]
    lines = [
        json.loads(line)
        for line in log_path.read_text().splitlines()
        if '"front_request_finished"' in line
    ]
    port = upstream.url.split(":")[2].split("/")[0]
    assert [
        (e["request_id"], e["name"], e["outcome"], e["round"], e["rounds"], e["mode"], e["level"])
        for e in lines
    ] == [
        (1, "ask", "input_required", 1, 1, "stdio", "info"),
        (2, "ask", "complete", None, 1, "stdio", "info"),
    ]
    assert {(e["upstream"], e["client_era"], e["principal"]) for e in lines} == {
        (f"127.0.0.1:{port}", "modern", STDIO_PRINCIPAL)  # the one stdio client
    }
    # who: the clientInfo name of its `_meta`; no address or user agent over stdio
    assert {(e["client_name"], e["client_address"], e["user_agent"]) for e in lines} == {
        (CLIENT_INFO["name"], None, None)
    }
    assert len({e["bridge_request_id"] for e in lines}) == 2
    assert held.request_state not in log_path.read_text()
