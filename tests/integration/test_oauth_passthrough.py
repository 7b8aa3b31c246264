"""End to end: logging in through the bridge to an OAuth-protected legacy server.

A real authorization server (npm `oauth2-mock-server`: authorization code + PKCE, RS256 JWTs
bound to the requested `resource`), an `mcp` 1.x server validating those tokens as a resource
server (signature against the JWKS, issuer, expiry, audience = the bridge's public URL, scope
`mcp:tools`), the bridge in front with `front.public_url`, and the `mcp` 2.x client with its
`OAuthClientProvider`. No part of the flow is stubbed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest
from mcp.shared.auth import OAuthToken

from translators.auth.challenges import parse_challenges
from translators.wire.errors import INVALID_REQUEST

from .harness import LegacyPoster, Peers
from .mrtr_helpers import assert_state_rejected, call_tool, complete_text, input_required, poster
from .oauth_flow import (
    SCOPE,
    OAuthStack,
    OAuthUser,
    answer_name,
    client_credentials_token,
    oauth_client,
    run_legacy_oauth_client,
    start_own_issuer_stack,
    start_stack,
)

T = 60.0
WELL_KNOWN = "/.well-known/oauth-protected-resource"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthStack]:
    peers = Peers(log_dir=tmp_path_factory.mktemp("oauth-peers"))
    try:
        yield start_stack(peers, "--required-scope", SCOPE)
    finally:
        peers.close()


def _params(header: str) -> dict[str, str]:
    (challenge,) = parse_challenges(header)
    assert challenge.scheme == "Bearer"
    return dict(challenge.params)


async def _tools_list(
    stack: OAuthStack, authorization: str | None
) -> tuple[int, str | None, dict[str, object]]:
    async with aiohttp.ClientSession() as http:
        reply = await poster(http, stack.url, authorization=authorization).post("tools/list")
    return reply.status, reply.headers.get("www-authenticate"), reply.response


async def test_no_token_gets_401_pointing_at_the_bridge(stack: OAuthStack) -> None:
    """No Authorization: the upstream's 401 arrives as a 401 whose resource_metadata is the
    bridge's."""
    async with asyncio.timeout(T):
        status, challenge, body = await _tools_list(stack, None)
    assert status == 401
    assert challenge is not None
    assert _params(challenge) == {
        "error": "invalid_token",
        "error_description": "Authentication required",
        "resource_metadata": stack.metadata_url,
    }
    assert body["error"]["code"] == INVALID_REQUEST  # type: ignore[index]


@pytest.mark.parametrize("path", [WELL_KNOWN + "/mcp", WELL_KNOWN])
async def test_metadata_is_relayed_with_the_bridge_as_resource(
    stack: OAuthStack, path: str
) -> None:
    """Both well-known variants relay the upstream's document; only `resource` changes, and a Host
    header naming another site changes nothing."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        async with http.get(f"{stack.legacy.url.removesuffix('/mcp')}{WELL_KNOWN}/mcp") as response:
            upstream = await response.json()
        async with http.get(stack.origin + path) as response:
            assert response.status == 200
            relayed = await response.json()
        async with http.get(stack.origin + path, headers={"Host": "evil.example"}) as response:
            hostile = await response.json()
    assert upstream["resource"] == stack.legacy.url
    assert relayed == {**upstream, "resource": stack.url}
    assert relayed["authorization_servers"] == [stack.issuer]
    assert hostile == relayed


async def test_the_modern_client_logs_in_through_the_bridge(stack: OAuthStack) -> None:
    """The mcp 2.x client is challenged, discovers everything through the bridge, gets a token
    bound to the bridge's URL, and calls tools, one of them with an elicitation round."""
    alice = OAuthUser("alice-app")
    async with (
        asyncio.timeout(T),
        oauth_client(alice, stack.url, elicitation_callback=answer_name) as client,
    ):
        tools = await client.list_tools()
        who = await client.call_tool("whoami", {})
        booked = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
    assert sorted(tool.name for tool in tools.tools) == ["book_table", "whoami"]
    assert who.content[0].text.startswith("alice-app session=")  # type: ignore[union-attr]
    assert booked.content[0].text == "Booked Chez Nous under Ada for alice-app."  # type: ignore[union-attr]
    wire = alice.wire.exchanges
    first_call, discovery = wire[0], wire[1]
    assert (first_call[1], first_call[2]) == (stack.url, 401)
    assert discovery == ("GET", stack.metadata_url, 200)
    assert ("POST", f"{stack.issuer}token", 200) in wire
    assert not [url for _, url, _ in wire if url.startswith(stack.legacy.url.removesuffix("/mcp"))]
    (authorization_url,) = alice.browser.visited
    assert f"resource={stack.url.replace(':', '%3A').replace('/', '%2F')}" in authorization_url
    assert f"scope={SCOPE.replace(':', '%3A')}" in authorization_url


async def test_a_token_for_another_audience_is_refused_with_401(stack: OAuthStack) -> None:
    """A valid token of the same server minted for another resource: the upstream refuses it, the
    client sees 401."""
    token = await client_credentials_token(
        stack.issuer, audience="https://elsewhere.example/mcp", scope=SCOPE
    )
    async with asyncio.timeout(T):
        status, challenge, body = await _tools_list(stack, f"Bearer {token}")
    assert status == 401
    assert challenge is not None
    assert _params(challenge)["resource_metadata"] == stack.metadata_url
    assert body["error"]["code"] == INVALID_REQUEST  # type: ignore[index]


async def test_a_403_step_up_challenge_passes_through(stack: OAuthStack) -> None:
    """A token for the bridge without the required scope: 403 insufficient_scope, rewritten, as the
    upstream said."""
    token = await client_credentials_token(stack.issuer, audience=stack.url, scope="profile")
    async with asyncio.timeout(T):
        status, challenge, _ = await _tools_list(stack, f"Bearer {token}")
    assert status == 403
    assert challenge is not None
    assert _params(challenge) == {
        "error": "insufficient_scope",
        "error_description": f"Required scope: {SCOPE}",
        "resource_metadata": stack.metadata_url,
    }


async def test_the_modern_client_steps_up_on_a_passed_through_403(stack: OAuthStack) -> None:
    """The client holds a token without the required scope: the 403 step-up challenge reaches it
    through the bridge, it authorizes again for the scope the bridge's metadata lists, and the call
    goes through."""
    carol = OAuthUser("carol-app")
    narrow = await client_credentials_token(stack.issuer, audience=stack.url, scope="profile")
    carol.storage.tokens = OAuthToken(access_token=narrow, scope="profile", expires_in=3600)
    async with asyncio.timeout(T), oauth_client(carol, stack.url) as client:
        who = await client.call_tool("whoami", {})
    assert who.content[0].text.startswith("carol-app session=")  # type: ignore[union-attr]
    wire = carol.wire.exchanges
    assert (wire[0][1], wire[0][2]) == (stack.url, 403)
    assert wire[1] == ("GET", stack.metadata_url, 200)
    assert carol.storage.tokens is not None
    assert set((carol.storage.tokens.scope or "").split()) == {"profile", SCOPE}


async def test_two_users_never_share_a_session_or_a_request_state(stack: OAuthStack) -> None:
    """Alice and Bob log in with their own tokens: their calls land on disjoint legacy sessions,
    and Bob cannot resume Alice's held call with her requestState; Alice then completes it."""
    alice, bob = OAuthUser("alice-app"), OAuthUser("bob-app")
    async with asyncio.timeout(T):
        for user in (alice, bob):
            async with oauth_client(user, stack.url) as client:
                await client.list_tools()
        async with aiohttp.ClientSession() as http:
            as_alice = poster(http, stack.url, authorization=alice.authorization)
            as_bob = poster(http, stack.url, authorization=bob.authorization)
            seen = [
                complete_text(await call_tool(post, "whoami", {}))
                for post in (as_alice, as_bob) * 3
            ]
            requests, state = input_required(
                await call_tool(as_alice, "book_table", {"restaurant": "Chez Nous"})
            )
            (key,) = requests
            evil, good = (
                {"action": "accept", "content": {"name": name}} for name in ("Mallory", "Ada")
            )
            arguments = {"restaurant": "Chez Nous"}
            stolen = await call_tool(
                as_bob, "book_table", arguments, responses={key: evil}, state=state
            )
            rightful = await call_tool(
                as_alice, "book_table", arguments, responses={key: good}, state=state
            )
    assert_state_rejected(stolen)
    assert complete_text(rightful) == "Booked Chez Nous under Ada for alice-app."
    subjects = (
        {text.split(" ")[0] for text in seen[0::2]},
        {text.split(" ")[0] for text in seen[1::2]},
    )
    assert subjects == ({"alice-app"}, {"bob-app"})
    sessions = (
        {text.split("=")[1] for text in seen[0::2]},
        {text.split("=")[1] for text in seen[1::2]},
    )
    assert sessions[0].isdisjoint(sessions[1])


async def test_a_2025_03_26_server_that_is_its_own_authorization_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """No RFC 9728 document upstream, only RFC 8414 metadata at its origin: the bridge's
    metadata names the upstream as authorization server, and the client registers, logs in there and
    calls through the bridge."""
    peers = Peers(log_dir=tmp_path_factory.mktemp("oauth-own-issuer"))
    try:
        own = start_own_issuer_stack(peers)
        dave = OAuthUser("dave-app", preregistered=False)
        async with asyncio.timeout(T), oauth_client(dave, own.url) as client:
            who = await client.call_tool("whoami", {})
            async with aiohttp.ClientSession() as http, http.get(own.metadata_url) as response:
                metadata = await response.json()
    finally:
        peers.close()
    assert who.content[0].text == "dave-app"  # type: ignore[union-attr]
    assert metadata == {
        "resource": own.url,
        "authorization_servers": [own.issuer],
        "bearer_methods_supported": ["header"],
    }
    wire = dave.wire.exchanges
    assert (wire[0][1], wire[0][2]) == (own.url, 401)
    assert wire[1] == ("GET", own.metadata_url, 200)
    assert ("POST", f"{own.issuer}register", 201) in wire
    assert ("POST", f"{own.issuer}token", 200) in wire


async def test_a_legacy_client_without_a_token_gets_the_bridges_challenge(
    stack: OAuthStack,
) -> None:
    """Issue 24 defect 1: a legacy initialize without a token got the upstream's own 401 (its
    internal address in WWW-Authenticate, its own body). Now the relay rewrites it as the modern
    path does: the bridge's metadata URL, and a JSON-RPC error echoing the request's id."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await LegacyPoster(http, stack.url, next_id=7).post(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
        )
    assert reply.status == 401
    challenge = reply.headers.get("www-authenticate")
    assert challenge is not None
    assert _params(challenge) == {
        "error": "invalid_token",
        "error_description": "Authentication required",
        "resource_metadata": stack.metadata_url,
    }
    assert reply.response == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": INVALID_REQUEST,
            "message": "Unauthorized: the server requires authorization (HTTP 401); see "
            "WWW-Authenticate",
            "data": {"source": "mrtr-bridge", "httpStatus": 401},
        },
    }
    assert str(stack.legacy.port) not in challenge + reply.text


async def test_a_legacy_client_logs_in_through_the_bridge(stack: OAuthStack) -> None:
    """The mcp 1.x client with its own OAuthClientProvider: challenged by the bridge, discovers
    everything through the bridge, gets a token bound to the bridge's URL, and calls tools (one
    with an elicitation round) in a legacy session relayed to the upstream."""
    async with asyncio.timeout(T):
        report = await run_legacy_oauth_client(stack.url, "legacy-app")
    assert report["protocolVersion"] == "2025-11-25"
    assert report["whoami"].startswith("legacy-app session=")
    assert report["booked"] == "Booked Chez Nous under Ada for legacy-app."
    wire = [tuple(exchange) for exchange in report["wire"]]
    assert (wire[0][1], wire[0][2]) == (stack.url, 401)
    assert wire[1] == ("GET", stack.metadata_url, 200)
    assert ("POST", f"{stack.issuer}token", 200) in wire
    assert not [url for _, url, _ in wire if url.startswith(stack.legacy.url.removesuffix("/mcp"))]
