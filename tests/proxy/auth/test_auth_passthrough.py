"""OAuth pass-through in process: the whole bridge (`make_app`) in front of the scriptable legacy
fake behind an authorization gate, for the cases a real resource server will not produce on demand:
a token refused on a call or on a session re-initialize, a malformed or oversized challenge, a 403
that is not a step-up, a hostile `Host`, foreign or missing metadata, a 2025-03-26 server that is
its own authorization server, and static upstream credentials.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from fake_legacy import FakeLegacy
from pydantic import SecretStr
from safety_harness import InProcessBridge, inprocess_bridge

from config.settings import Settings
from translators.auth.challenges import MAX_CHALLENGE_CHARS
from translators.protocol.eras import DISCOVER
from translators.wire.errors import INTERNAL_ERROR, INVALID_REQUEST

WELL_KNOWN = "/.well-known/oauth-protected-resource"
ALICE = "Bearer alice-token-0001"
PUBLIC = "https://bridge.example/mcp"
OWN_METADATA = "https://bridge.example/.well-known/oauth-protected-resource/mcp"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Gate:
    """An authorization gate in front of the fake's `/mcp`, and the documents it publishes."""

    origin: str = ""
    valid: set[str] = field(default_factory=lambda: {ALICE})
    init_only: set[str] = field(default_factory=set)  # accepted for the handshake, refused on calls
    status: int = 401
    challenge: str | None = None  # default: invalid_token naming the fake's own metadata
    documents: dict[str, Any] = field(default_factory=dict)  # path -> JSON body (absent: 404)
    seen: list[str | None] = field(default_factory=list)
    era_probes: list[str | None] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)  # paths other than /mcp that were asked for

    def refusal(self) -> web.Response:
        value = self.challenge
        if value is None:
            value = (
                f'Bearer error="invalid_token", resource_metadata="{self.origin}{WELL_KNOWN}/mcp"'
            )
        return web.json_response(
            {"error": "invalid_token"}, status=self.status, headers={"WWW-Authenticate": value}
        )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != "/mcp":
            self.fetched.append(request.path)
            document = self.documents.get(request.path)
            return web.json_response(document) if document is not None else web.Response(status=404)
        authorization = request.headers.get("Authorization")
        # the bridge's own era probe: no client's credentials
        if request.headers.get("Mcp-Method") == DISCOVER:
            self.era_probes.append(authorization)
            return self.refusal()
        self.seen.append(authorization)
        body = await request.read()
        is_call = b'"tools/call"' in body
        if authorization in self.valid or (authorization in self.init_only and not is_call):
            return await handler(request)
        return self.refusal()


@contextlib.asynccontextmanager
async def gated_upstream(gate: Gate) -> AsyncIterator[FakeLegacy]:
    fake = FakeLegacy()
    fake.json_mode = True
    fake.tools["echo"] = _echo
    fake.app.middlewares.append(gate.middleware)
    server = TestServer(fake.app, host="127.0.0.1")
    await server.start_server()
    gate.origin = str(server.make_url("")).rstrip("/")
    try:
        yield fake
    finally:
        await server.close()


async def _echo(call: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ok"}]}


@contextlib.asynccontextmanager
async def bridged(gate: Gate, **front: Any) -> AsyncIterator[tuple[FakeLegacy, InProcessBridge]]:
    upstream = front.pop("upstream", {})
    front.setdefault("public_url", PUBLIC)
    async with gated_upstream(gate) as fake:
        settings = Settings.model_validate(
            {"upstream": {"url": gate.origin + "/mcp", **upstream}, "front": front}
        )
        async with inprocess_bridge(settings) as bridge:
            yield fake, bridge


async def test_a_token_refused_on_a_call_gets_the_upstreams_401() -> None:
    """Accepted at initialize, refused on tools/call: the call's answer is the 401, never a
    -32603."""
    gate = Gate(valid=set(), init_only={ALICE})
    async with bridged(gate) as (_, bridge):
        reply = await bridge.poster(ALICE).post("tools/call", {"name": "echo", "arguments": {}})
    assert reply.status == 401
    assert (
        reply.headers["www-authenticate"]
        == f'Bearer error="invalid_token", resource_metadata="{OWN_METADATA}"'
    )
    assert reply.response["error"]["code"] == INVALID_REQUEST


async def test_a_token_refused_on_session_reinitialize_gets_the_upstreams_401() -> None:
    """The session expires and the token was revoked meanwhile: the re-initialize's 401 reaches the
    client."""
    gate = Gate()
    async with bridged(gate) as (fake, bridge):
        first = await bridge.poster(ALICE).post("tools/call", {"name": "echo", "arguments": {}})
        gate.valid.clear()
        await fake.expire()
        second = await bridge.poster(ALICE).post("tools/call", {"name": "echo", "arguments": {}})
    assert first.status == 200 and first.response["result"]["content"][0]["text"] == "ok"
    assert second.status == 401
    assert second.headers["www-authenticate"].endswith(f'resource_metadata="{OWN_METADATA}"')
    # the one-time roots probe's session and the call's; the re-initialize was refused
    assert len(fake.all_sessions) == 2


async def test_the_clients_authorization_reaches_the_upstream_unchanged() -> None:
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        reply = await bridge.poster(ALICE).post("tools/list")
    assert reply.status == 200
    assert set(gate.seen) == {ALICE}
    # the bridge's era probe at start carries no client's credentials
    assert gate.era_probes == [None]


async def test_a_403_that_is_not_a_step_up_stays_an_upstream_error() -> None:
    """403 without error="insufficient_scope" is not a challenge: a JSON-RPC error, no
    WWW-Authenticate."""
    gate = Gate(valid=set(), status=403, challenge='Bearer error="invalid_request"')
    async with bridged(gate) as (_, bridge):
        reply = await bridge.poster(ALICE).post("tools/list")
    assert reply.status == 200
    assert "www-authenticate" not in reply.headers
    assert reply.response["error"]["code"] == INTERNAL_ERROR


async def test_a_step_up_403_passes_with_its_scope() -> None:
    gate = Gate(
        valid=set(), status=403, challenge='Bearer error="insufficient_scope", scope="admin"'
    )
    async with bridged(gate) as (_, bridge):
        reply = await bridge.poster(ALICE).post("tools/list")
    assert reply.status == 403
    expected = (
        f'Bearer error="insufficient_scope", scope="admin", resource_metadata="{OWN_METADATA}"'
    )
    assert reply.headers["www-authenticate"] == expected


async def test_malformed_or_oversized_upstream_challenges_become_the_bridges_own() -> None:
    """A challenge that does not parse, or is too long, is never echoed: the client gets a minimal
    one."""
    for challenge in [
        'Bearer realm="unterminated',
        "Bearer " + ", ".join(f"p{i}=x" for i in range(900)),
        'Bearer a="' + "x" * MAX_CHALLENGE_CHARS + '"',
        "Bearer a=b c",
    ]:
        gate = Gate(valid=set(), challenge=challenge)
        async with bridged(gate) as (_, bridge):
            reply = await bridge.poster(ALICE).post("tools/list")
        assert reply.status == 401
        assert reply.headers["www-authenticate"] == f'Bearer resource_metadata="{OWN_METADATA}"'


async def test_public_url_decides_every_url_never_the_host_header() -> None:
    """With `front.public_url`, a request whose Host names another site still gets the configured
    URLs."""
    public = "https://mcp.example.com/tools/mcp"
    gate = Gate(valid=set())
    async with bridged(gate, public_url=public, allowed_hosts=["*"]) as (_, bridge):
        gate.documents[WELL_KNOWN + "/mcp"] = {
            "resource": gate.origin + "/mcp",
            "authorization_servers": ["https://as"],
        }
        hostile = {"Host": "evil.example", "X-Forwarded-Host": "evil.example"}
        reply = await bridge.poster(ALICE, **hostile).post("tools/list")
        documents = []
        for path in (WELL_KNOWN, WELL_KNOWN + "/mcp", WELL_KNOWN + "/tools/mcp"):
            async with bridge.http.get(bridge.server.make_url(path), headers=hostile) as response:
                documents.append((response.status, await response.json()))
    metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/tools/mcp"
    assert (
        reply.headers["www-authenticate"]
        == f'Bearer error="invalid_token", resource_metadata="{metadata}"'
    )
    assert documents == [(200, {"resource": public, "authorization_servers": ["https://as"]})] * 3


async def test_metadata_naming_a_foreign_resource_is_refused() -> None:
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        gate.documents[WELL_KNOWN + "/mcp"] = {
            "resource": "https://evil.example/mcp",
            "authorization_servers": ["https://evil.example"],
        }
        status, text = await bridge.get(WELL_KNOWN + "/mcp")
    assert status == 502
    assert "evil" not in text
    assert json.loads(text)["error"] == "temporarily_unavailable"


async def test_the_root_document_is_used_when_the_path_variant_is_missing() -> None:
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        gate.documents[WELL_KNOWN] = {
            "resource": gate.origin,
            "authorization_servers": ["https://as.example"],
            "scopes_supported": ["a"],
        }
        status, text = await bridge.get(WELL_KNOWN + "/mcp")
    assert status == 200
    assert json.loads(text) == {
        "resource": PUBLIC,
        "authorization_servers": ["https://as.example"],
        "scopes_supported": ["a"],
    }


async def test_a_2025_03_26_server_gets_a_document_naming_its_issuer() -> None:
    """No RFC 9728 document, but RFC 8414 metadata at the upstream's origin: the bridge names that
    issuer."""
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        gate.documents["/.well-known/oauth-authorization-server"] = {
            "issuer": gate.origin,
            "authorization_endpoint": gate.origin + "/authorize",
            "token_endpoint": gate.origin + "/token",
            "scopes_supported": ["read"],
        }
        status, text = await bridge.get(WELL_KNOWN)
    assert status == 200
    assert json.loads(text) == {
        "resource": PUBLIC,
        "authorization_servers": [gate.origin],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["read"],
    }


async def test_no_metadata_anywhere_is_404() -> None:
    async with bridged(Gate()) as (_, bridge):
        status, _ = await bridge.get(WELL_KNOWN + "/mcp")
    assert status == 404


async def test_static_credentials_replace_the_token_and_turn_pass_through_off() -> None:
    """With `upstream.authorization` the client's token never goes upstream, no metadata is served,
    and the upstream refusing the bridge's own credential is the bridge's problem (-32603), not a
    challenge."""
    service = "Bearer service-credential-42"
    gate = Gate(valid={service})
    upstream = {"authorization": SecretStr(service)}
    async with bridged(gate, upstream=upstream) as (_, bridge):
        accepted = await bridge.poster(ALICE).post("tools/list")
        metadata_status, _ = await bridge.get(WELL_KNOWN + "/mcp")
        gate.valid.clear()
        refused = await bridge.poster("Bearer bob-token-0002").post("tools/list")
    assert accepted.status == 200 and "tools" in accepted.response["result"]
    assert set(gate.seen) == {service}
    assert metadata_status == 404
    assert (refused.status, refused.response["error"]["code"]) == (200, INTERNAL_ERROR)
    assert "www-authenticate" not in refused.headers


async def test_a_found_document_is_reused_and_a_failure_is_not() -> None:
    """A refused document is fetched again on the next request; a good one is then served from
    memory."""
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        gate.documents[WELL_KNOWN + "/mcp"] = {"resource": "https://evil.example/mcp"}
        refused, _ = await bridge.get(WELL_KNOWN + "/mcp")
        gate.documents[WELL_KNOWN + "/mcp"] = {"resource": gate.origin + "/mcp"}
        statuses = [
            (await bridge.get(path))[0]
            for path in (WELL_KNOWN + "/mcp", WELL_KNOWN, WELL_KNOWN + "/mcp")
        ]
    assert (refused, statuses) == (502, [200, 200, 200])
    assert gate.fetched == [WELL_KNOWN + "/mcp", WELL_KNOWN + "/mcp"]


async def test_browsers_get_a_cors_preflight_answer() -> None:
    async with bridged(Gate()) as (_, bridge):
        headers = {
            "Origin": "https://inspector.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "mcp-protocol-version",
        }
        async with bridge.http.options(
            bridge.server.make_url(WELL_KNOWN + "/mcp"), headers=headers
        ) as response:
            status, allowed = response.status, dict(response.headers)
    assert status == 204
    assert (allowed["Access-Control-Allow-Origin"], allowed["Access-Control-Allow-Methods"]) == (
        "*",
        "GET",
    )


async def test_an_upstream_that_challenges_the_probe_is_ready() -> None:
    """/readyz has no user token: the upstream's 401 still proves it answers."""
    gate = Gate(valid=set())
    async with bridged(gate) as (_, bridge):
        status, text = await bridge.get("/readyz")
    assert status == 200
    assert (
        json.loads(text)["checks"]["upstream"]
        == "reachable (it asks for credentials the probe does not have; set upstream.authorization "
        "to probe with one)"
    )
