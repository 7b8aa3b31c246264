"""`GET /status` and `GET /status.json` (issue 29): what is held right now, against a real legacy
server (`tests/peers/journal_server.py`, mcp 1.x), and who may read it.

The ground truth is the server itself: the held call is listed while the server's journal says
its tool is waiting for its elicitation, the session's revision is the one the server answers a
legacy client's `initialize` with directly, and the call is gone from the page once the server
has returned its result."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from typing import Any
from unittest import mock

import aiohttp
import pytest
import structlog
from aiohttp.test_utils import make_mocked_request
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from safety_harness import (
    Held,
    InProcessBridge,
    JournalPeer,
    accept,
    bridge_settings,
    inprocess_bridge,
    inprocess_replicas,
    journal_peer,
    result_of,
    retry,
    start_held,
    text_of,
)
from status_fakes import Shown, held_registry

from config.settings import Settings
from proxy.app.status import StatusPage, StatusSources, is_loopback
from proxy.auth.keys import new_key
from proxy.auth.principal import principal_of

TIMEOUT_S = 30.0
ADMIN = "admin-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("status")) as peer:
        yield peer


async def _direct_revision(url: str) -> str:
    """The protocol version the server answers a legacy client's `initialize` with, directly."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "direct", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as reply:
        text = await reply.text()
    data = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    version: str = json.loads(data)["result"]["protocolVersion"]
    return version


async def next_snapshot(
    bridge: InProcessBridge, earlier: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """`/status.json` once it is a snapshot taken after `earlier` (they are taken at most once a
    second: proxy/app/status.py)."""
    while True:
        status, body = await bridge.get("/status.json")
        assert status == 200
        facts = json.loads(body)
        if facts["bridge"]["generated_at"] != earlier["bridge"]["generated_at"]:
            return body, facts
        await asyncio.sleep(0.1)


async def test_the_page_shows_the_call_held_at_that_moment(upstream: JournalPeer) -> None:
    kid, key = new_key()
    token = "tok-" + secrets.token_hex(16)
    answer = "elicited-" + secrets.token_hex(6)
    settings = bridge_settings(upstream.url, held={"keys": {kid: key}})
    principal = principal_of({"authorization": f"Bearer {token}"}, settings.identity)
    revision = await _direct_revision(upstream.url)
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        poster = bridge.poster(f"Bearer {token}")
        held = await start_held(poster, "ask", tag="status-1")
        await upstream.wait_for(lambda entries: any(e.get("tag") == "status-1" for e in entries))
        assert upstream.events("status-1") == ["call_started"]  # its tool waits for the answer

        status, body = await bridge.get("/status.json")
        assert status == 200
        facts = json.loads(body)
        assert facts["held"] == {"count": 1, "in_progress": 1, "rounds_total": 1}
        [up] = facts["upstreams"]
        held_facts = up["held"]
        assert (held_facts["count"], held_facts["in_progress"]) == (1, 1)
        assert held_facts["per_tool"] == {"tools/call ask": 1}
        [call] = held_facts["calls"]
        assert (call["method"], call["name"], call["principal"]) == (
            "tools/call",
            "ask",
            principal[:12],
        )
        assert (call["round"], call["state"]) == (1, "waiting_client")
        assert 0 <= call["age_s"] < TIMEOUT_S
        port = upstream.url.split(":")[2].split("/")[0]
        assert (up["name"], up["path"], up["era"], up["transport"]) == (
            f"127.0.0.1:{port}",
            "/mcp",  # the bridge's own endpoint
            "legacy",
            "streamable-http",
        )
        assert (up["ready"], up["health"]) == (None, "not checked yet")  # the page never probes
        mine = [s for s in up["sessions"] if s["principal"] == principal[:12]]
        assert [(s["revision"], s["held_by"]) for s in mine] == [(revision, "exclusive")]
        assert up["last_error"] is None
        assert facts["replicas"] == {"self": "r0", "clustered": False, "peers": []}
        assert facts["bridge"]["keys"] == "configured"

        page_status, page = await bridge.get("/status")
        assert page_status == 200
        assert "<td>ask</td>" in page and principal[:12] in page
        assert '<td class="waiting_client">waiting_client</td>' in page
        assert f"<td>127.0.0.1:{port}</td>" in page and f"<td>{revision}</td>" in page
        for text in (page, body):
            assert held.request_state not in text and token not in text
            assert f":{port}/mcp" not in text  # the upstream is a name, never its URL

        assert text_of(await retry(poster, held, accept(held, answer))) == f"status-1: {answer}"
        assert upstream.events("status-1") == ["call_started", "elicit_answered"]
        body, facts = await next_snapshot(bridge, facts)
        assert facts["held"] == {"count": 0, "in_progress": 0, "rounds_total": 1}
        [up] = facts["upstreams"]
        assert (up["held"]["count"], up["held"]["calls"]) == (0, [])
        [learned] = up["batch_sizes"]["learned"]
        assert learned == {"method": "tools/call", "name": "ask", "rounds": {"1": 1}}
        assert answer not in body and token not in body


async def test_a_resource_uris_userinfo_is_shown_nowhere(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    """Issue 40.8: `resources/read secret://alice:<password>@vault/<tag>`, held while the server's
    resource waits for its elicitation, then answered. The status page, `/status.json` (the held
    call, per tool, the learned batch size), both access lines and both spans (name and
    `mcp.resource.uri`) show `secret://vault/<tag>`: neither the user nor the password."""
    password = "pw-" + secrets.token_hex(8)
    uri, shown = f"secret://alice:{password}@vault/vault-1", "secret://vault/vault-1"
    settings = bridge_settings(upstream.url, held={"keys": dict([new_key()])})
    with structlog.testing.capture_logs() as captured:
        async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
            poster = bridge.poster()
            first = result_of(await poster.post("resources/read", {"uri": uri}))
            assert first["resultType"] == "input_required", first
            await upstream.wait_for(lambda entries: any(e.get("tag") == "vault-1" for e in entries))
            pages = [await bridge.get("/status"), await bridge.get("/status.json")]
            held = Held("", {}, first["requestState"], tuple(first["inputRequests"]))
            params = {
                "uri": uri,
                "requestState": held.request_state,
                "inputResponses": accept(held, "yes"),
            }
            final = result_of(await poster.post("resources/read", params))
            assert final["contents"][0]["text"] == "vault-1: yes"
            after = await next_snapshot(bridge, json.loads(pages[1][1]))
            pages.append((200, after[0]))
    assert upstream.events("vault-1") == ["call_started", "elicit_answered"]
    assert [status for status, _ in pages] == [200, 200, 200]
    assert f"<td>{shown}</td>" in pages[0][1]
    [up] = json.loads(pages[1][1])["upstreams"]
    assert [call["name"] for call in up["held"]["calls"]] == [shown]
    assert up["held"]["per_tool"] == {f"resources/read {shown}": 1}
    [up] = json.loads(pages[2][1])["upstreams"]
    learned = up["batch_sizes"]["learned"]
    assert learned == [{"method": "resources/read", "name": shown, "rounds": {"1": 1}}]
    access = [e for e in captured if e["event"] == "front_request_finished"]
    assert [(e["name"], e["outcome"]) for e in access] == [
        (shown, "input_required"),
        (shown, "complete"),
    ]
    roots = [s for s in spans.get_finished_spans() if s.name.startswith("resources/read")]
    assert [(s.name, dict(s.attributes or {})["mcp.resource.uri"]) for s in roots] == [
        (f"resources/read {shown}", shown)
    ] * 2
    shown_anywhere = [text for _, text in pages] + [repr(captured)]
    shown_anywhere += [repr((s.name, dict(s.attributes or {}))) for s in spans.get_finished_spans()]
    for text in shown_anywhere:
        assert password not in text and "alice" not in text


async def test_an_admin_token_opens_it_and_nothing_else_does(upstream: JournalPeer) -> None:
    settings = bridge_settings(upstream.url, status={"loopback": False, "admin_token": ADMIN})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        for path in ("/status", "/status.json"):
            url = bridge.server.make_url(path)
            async with bridge.http.get(url) as response:  # loopback, but loopback is off
                assert response.status == 403
                assert "status.admin_token" in await response.text()
            for wrong in (f"Bearer {ADMIN}x", f"Basic {ADMIN}", ADMIN, "Bearer "):
                async with bridge.http.get(url, headers={"Authorization": wrong}) as response:
                    assert response.status == 403
            admin = {"Authorization": f"Bearer {ADMIN}"}
            async with bridge.http.get(url, headers=admin) as response:
                assert response.status == 200
                assert ADMIN not in await response.text()
            rebinding = {**admin, "Host": "evil.example:8080"}
            async with bridge.http.get(url, headers=rebinding) as response:
                assert response.status == 403


def _request(remote: str, **headers: str) -> Any:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        (remote, 40000) if name == "peername" else default
    )
    return make_mocked_request(
        "GET", "/status", headers={"Host": "127.0.0.1:8080", **headers}, transport=transport
    )


def _page(**status: Any) -> StatusPage:
    sources = StatusSources([], None)
    return StatusPage(Settings.model_validate({"status": status}), lambda _app: sources)


def test_only_loopback_peers_without_a_token() -> None:
    page = _page()
    assert page.allowed(_request("127.0.0.1")) and page.allowed(_request("::1"))
    assert page.allowed(_request("::ffff:127.0.0.1")) and page.allowed(_request("127.9.0.1"))
    for remote in ("10.0.0.7", "192.168.1.2", "::ffff:10.0.0.7", "2001:db8::1", "not-an-ip"):
        assert not page.allowed(_request(remote)), remote
    # no admin token configured: a bearer token opens nothing
    assert not page.allowed(_request("10.0.0.7", Authorization=f"Bearer {ADMIN}"))
    assert not page.allowed(_request("127.0.0.1", Origin="http://evil.example"))
    assert not _page(loopback=False).allowed(_request("127.0.0.1"))
    with_token = _page(admin_token=ADMIN)
    assert with_token.allowed(_request("10.0.0.7", Authorization=f"Bearer {ADMIN}"))
    assert with_token.allowed(_request("10.0.0.7", Authorization=f"bearer  {ADMIN} "))
    assert not with_token.allowed(_request("10.0.0.7", Authorization=f"Bearer {ADMIN[:-1]}"))
    # a wrong token is refused even from loopback: whoever sends one means to be checked by it
    assert not with_token.allowed(_request("127.0.0.1", Authorization="Bearer wrong-token"))
    assert is_loopback("127.0.0.1") and not is_loopback(None)


def test_a_short_admin_token_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 characters"):
        Settings.model_validate({"status": {"admin_token": "short"}})


def test_the_page_escapes_what_it_shows() -> None:
    from proxy.app.status_page import render_page

    facts = _page().facts(StatusSources([Shown("<b>u</b>")], None))
    facts["upstreams"][0]["held"]["calls"] = [
        {
            "method": "tools/call",
            "name": "<script>alert(1)</script>",
            "principal": "abc",
            "age_s": 1.0,
            "round": 1,
            "state": "waiting_client",
        }
    ]
    html = render_page(facts)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>u</b>" not in html and "<h2>&lt;b&gt;u&lt;/b&gt;: held calls</h2>" in html


async def test_it_lists_the_replicas_this_one_sees(upstream: JournalPeer) -> None:
    """Two real bridges (make_app) peers of each other: each one's page names the other."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_replicas(upstream.url) as urls,
        aiohttp.ClientSession() as http,
    ):
        seen: list[dict[str, Any]] = []
        while len(seen) < 2 or not all(facts["peers"] for facts in seen):
            seen = []
            for url in urls:
                async with http.get(url + "/status.json") as response:
                    seen.append((await response.json())["replicas"])
            await asyncio.sleep(0.05)
    addresses = [url.removeprefix("http://") for url in urls]
    assert seen == [
        {
            "self": "r1",
            "clustered": True,
            "peers": [{"replica_id": "r2", "address": addresses[1]}],
        },
        {
            "self": "r2",
            "clustered": True,
            "peers": [{"replica_id": "r1", "address": addresses[0]}],
        },
    ]


def test_the_lists_are_bounded_and_the_counts_exact() -> None:
    """4,096 held calls of 600 tools: 500 calls and 500 tools listed, oldest first; every count
    exact."""
    registry = held_registry(4096, tools=600)
    held = _page().facts(StatusSources([Shown("u", registry)], None))["upstreams"][0]["held"]
    assert (held["count"], held["in_progress"], len(held["calls"])) == (4096, 4096, 500)
    assert len(held["per_tool"]) == 500 and sum(held["per_tool"].values()) <= 4096
    assert held["calls"][0]["principal"] == f"{4095:032x}"[:12]  # the oldest first
    assert held["calls"][0]["age_s"] >= 4095
    ages = [call["age_s"] for call in held["calls"]]
    assert ages == sorted(ages, reverse=True) and ages[-1] >= 4096 - 500
