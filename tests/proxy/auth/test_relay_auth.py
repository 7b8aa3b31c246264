"""OAuth through the legacy relay, in process (issue 24, defects 1, 8 and 9): the whole bridge in
front of the gated legacy fake of `test_auth_passthrough.py`, for what a real resource server will
not produce on demand: a challenge naming the upstream by another spelling or another internal
host, a `403` that is not a step-up, static credentials refused, and metadata members naming the
upstream or an internal host. The legacy client gets what the modern path gives, never the
upstream's own body or addresses."""

from __future__ import annotations

import json

import pytest
from integration.harness import LegacyPoster, RawReply
from pydantic import SecretStr
from safety_harness import InProcessBridge
from test_auth_passthrough import ALICE, OWN_METADATA, PUBLIC, WELL_KNOWN, Gate, bridged

from proxy.passthrough.http_proxy import CREDENTIALS_REFUSED
from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR, INVALID_REQUEST

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}


async def legacy_initialize(bridge: InProcessBridge, authorization: str = ALICE) -> RawReply:
    poster = LegacyPoster(
        bridge.http, bridge.url, next_id=3, headers={"Authorization": authorization}
    )
    return await poster.post("initialize", INITIALIZE)


def assert_no_upstream(gate: Gate, reply: RawReply) -> None:
    """Nothing of the upstream's: neither its address nor its own error body."""
    port = gate.origin.rsplit(":", 1)[1]
    seen = reply.text + reply.headers.get("www-authenticate", "")
    assert port not in seen and "127.0.0.1" not in seen and '"invalid_token"}' not in seen


async def test_a_legacy_initialize_gets_the_rewritten_challenge_and_the_bridges_body() -> None:
    gate = Gate(valid=set())
    async with bridged(gate) as (_, bridge):
        reply = await legacy_initialize(bridge)
    assert reply.status == 401
    assert (
        reply.headers["www-authenticate"]
        == f'Bearer error="invalid_token", resource_metadata="{OWN_METADATA}"'
    )
    assert reply.response == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": INVALID_REQUEST,
            "message": "Unauthorized: the server requires authorization (HTTP 401); see "
            "WWW-Authenticate",
            "data": {"source": BRIDGE_MARKER, "httpStatus": 401},
        },
    }
    assert_no_upstream(gate, reply)


@pytest.mark.parametrize(
    "metadata",
    [
        "http://localhost:{port}/.well-known/oauth-protected-resource/mcp",
        "http://[::1]:{port}/.well-known/oauth-protected-resource",
        "http://mcp-upstream.svc.cluster.local:8080/.well-known/oauth-protected-resource",
        "https://somewhere.example/.well-known/oauth-protected-resource",
    ],
)
async def test_a_challenge_naming_the_upstream_by_another_name_points_at_the_bridge(
    metadata: str,
) -> None:
    """Defect 8: `resource_metadata` always becomes the bridge's own metadata URL, on the modern
    path and on the legacy relay alike; an internal URL in another auth-param is left out."""
    gate = Gate(valid=set())
    async with bridged(gate) as (_, bridge):
        port = gate.origin.rsplit(":", 1)[1]
        gate.challenge = (
            f'Bearer error="invalid_token", resource_metadata="{metadata.format(port=port)}", '
            'login="http://auth.corp.internal/login"'
        )
        modern = await bridge.poster(ALICE).post("tools/list")
        legacy = await legacy_initialize(bridge)
    expected = f'Bearer error="invalid_token", resource_metadata="{OWN_METADATA}"'
    assert (modern.status, modern.headers["www-authenticate"]) == (401, expected)
    assert (legacy.status, legacy.headers["www-authenticate"]) == (401, expected)
    assert_no_upstream(gate, legacy)


async def test_a_step_up_403_reaches_a_legacy_client_rewritten() -> None:
    gate = Gate(
        valid=set(), status=403, challenge='Bearer error="insufficient_scope", scope="admin"'
    )
    async with bridged(gate) as (_, bridge):
        reply = await legacy_initialize(bridge)
    assert reply.status == 403
    assert reply.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="admin", resource_metadata="{OWN_METADATA}"'
    )
    assert reply.response["error"]["data"] == {"source": BRIDGE_MARKER, "httpStatus": 403}


async def test_a_403_that_is_not_a_step_up_keeps_its_status_without_the_upstreams_body() -> None:
    gate = Gate(valid=set(), status=403, challenge='Bearer error="invalid_request"')
    async with bridged(gate) as (_, bridge):
        reply = await legacy_initialize(bridge)
    assert reply.status == 403
    assert "www-authenticate" not in reply.headers
    assert reply.response == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": INVALID_REQUEST,
            "message": "Forbidden: the upstream server refused the request (HTTP 403)",
            "data": {"source": BRIDGE_MARKER, "httpStatus": 403},
        },
    }


async def test_static_credentials_refused_are_an_upstream_fault_not_a_challenge() -> None:
    gate = Gate(valid=set())
    upstream = {"authorization": SecretStr("Bearer service-credential-42")}
    async with bridged(gate, upstream=upstream) as (_, bridge):
        reply = await legacy_initialize(bridge)
        faults = bridge.sample("mrtr_bridge_upstream_errors_total", kind="UpstreamFault")
    assert reply.status == 502
    assert "www-authenticate" not in reply.headers
    error = reply.response["error"]
    assert error == {
        "code": INTERNAL_ERROR,
        "message": CREDENTIALS_REFUSED,
        "data": {"source": BRIDGE_MARKER, "correlationId": error["data"]["correlationId"]},
    }
    assert reply.response["id"] == 3
    assert_no_upstream(gate, reply)
    assert faults == 1


async def test_metadata_members_reach_clients_without_upstream_or_internal_urls() -> None:
    """Defect 9, end to end: the document the bridge serves keeps the real authorization servers,
    moves the upstream's pages to the public origin, and leaves out its keys, its signature and
    internal hosts."""
    gate = Gate()
    async with bridged(gate) as (_, bridge):
        spelled = gate.origin.replace("127.0.0.1", "localhost")
        gate.documents[WELL_KNOWN + "/mcp"] = {
            "resource": gate.origin + "/mcp",
            "authorization_servers": ["https://as.example/tenant"],
            "jwks_uri": gate.origin + "/jwks",
            "resource_documentation": spelled + "/docs",
            "resource_tos_uri": "http://wiki.corp.internal/tos",
            "resource_policy_uri": "https://example.com/policy",
            "signed_metadata": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
        }
        status, text = await bridge.get(WELL_KNOWN + "/mcp")
    assert status == 200
    assert json.loads(text) == {
        "resource": PUBLIC,
        "authorization_servers": ["https://as.example/tenant"],
        "resource_documentation": "https://bridge.example/docs",
        "resource_policy_uri": "https://example.com/policy",
    }
