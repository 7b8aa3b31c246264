"""Forwarding between replicas when it must not or cannot happen: the owner killed mid-call, a
forged "forwarded" request, an owner outside the peer set (docs/security.md § Forwarding)."""

from __future__ import annotations

import json
import time

import aiohttp
import mcp_types as types
from mcp.shared.exceptions import MCPError

from proxy.auth.keys import decode_key, new_key
from translators.auth.forward_proof import HEADER, ProofKeys, sign
from translators.held.request_state import KeyRing, StateClaims, principal_digest, seal
from translators.protocol.eras import MODERN_VERSION
from translators.wire.errors import INVALID_PARAMS, INVALID_REQUEST_STATE_MESSAGE

from .cluster_helpers import ONE_KEY, metric, rotating_client, scrape, start_cluster, start_replica
from .harness import InputAnswers, Peers, free_port
from .mrtr_helpers import assert_client_rejected

FAILURES = "mrtr_bridge_forward_failures_total"
OWNER_GONE_BOUND_S = 10.0


async def test_owner_killed_mid_call_gives_the_clear_error_in_bounded_time(peers: Peers) -> None:
    """The owner dies while the client answers its elicitation: the retry, landing on the next
    replica, gets the fixed invalid-requestState error within seconds, counted as owner_unreachable.
    """
    cluster = start_cluster(peers)
    owner = cluster.replicas[0]
    answers = InputAnswers(elicit_content={"name": "Ada"})

    async def kill_owner_then_answer(
        ctx: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        owner.popen.kill()
        owner.popen.wait(timeout=5)
        return await answers.elicitation(ctx, params)

    kwargs = {**answers.client_kwargs(), "elicitation_callback": kill_owner_then_answer}
    async with rotating_client(cluster.ports, 0, **kwargs) as (client, transport):
        started = time.monotonic()
        try:
            await client.call_tool("plan_trip", {"city": "Lisbon"})
        except MCPError as exc:
            outcome: BaseException | None = exc
        else:
            outcome = None
        elapsed = time.monotonic() - started
    assert_client_rejected(outcome)
    assert elapsed < OWNER_GONE_BOUND_S
    assert transport.sent_to == cluster.ports[:2]
    text = await scrape(cluster.ports[1])
    assert metric(text, FAILURES, reason="owner_unreachable") == 1
    assert (
        metric(text, "mrtr_bridge_request_state_rejections_total", reason="owner_unreachable") == 1
    )
    assert '"reason": "owner_unreachable"' in cluster.replicas[1].log_text()


HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


def _call_body(extra: dict[str, object] | None = None) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "forger", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta, **(extra or {})}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    ).encode()


async def test_forged_forwarded_request_is_rejected(peers: Peers) -> None:
    """A request from outside claiming to be forwarded (proof signed with a key the replicas do not
    share, a tampered proof, or a valid proof moved onto another body) gets 403, counted by reason.
    """
    cluster = start_cluster(peers, count=2)
    port = cluster.ports[0]
    body = _call_body()
    kid, other = new_key()
    outsider = ProofKeys({ONE_KEY[0]: decode_key(kid, other)}, ONE_KEY[0])
    shared = ProofKeys({ONE_KEY[0]: decode_key(*ONE_KEY)}, ONE_KEY[0])
    now = int(time.time() * 1000)
    forged = sign(
        outsider, sender="r2", owner="r1", now_ms=now, path="/mcp", body=body, authorization=None
    )
    moved = sign(
        shared, sender="r2", owner="r1", now_ms=now, path="/mcp", body=b"{}", authorization=None
    )
    garbled = "v1 kid=x from=r2"
    headers = HEADERS
    async with aiohttp.ClientSession() as http:
        statuses = []
        for proof in (forged, moved, garbled):
            forwarded = {**headers, HEADER: proof}
            async with http.post(
                f"http://127.0.0.1:{port}/mcp", data=body, headers=forwarded
            ) as reply:
                statuses.append((reply.status, (await reply.json())["error"]["message"][:9]))
        async with http.post(f"http://127.0.0.1:{port}/mcp", data=body, headers=headers) as reply:
            plain = (reply.status, (await reply.json())["result"]["content"][0]["text"])
    assert statuses == [(403, "Forbidden")] * 3
    assert plain == (200, "hi")
    text = await scrape(port)
    rejected = "mrtr_bridge_forward_proof_rejections_total"
    assert (
        metric(text, rejected, reason="bad_mac"),
        metric(text, rejected, reason="malformed"),
    ) == (2, 1)
    assert metric(text, "mrtr_bridge_forwarded_retries_received_total") == 0


async def test_owner_outside_the_peer_set_is_rejected_without_connecting(peers: Peers) -> None:
    """A replica sharing the keys but outside r1's peer set issues the requestState; the retry on r1
    is rejected as owner_not_in_peer_set, and the outsider never sees a second request."""
    cluster = start_cluster(peers, count=2)
    outside_port = free_port()
    outsider = start_replica(peers, cluster.legacy.url, "r9", outside_port, [outside_port])
    answers = InputAnswers(elicit_content={"name": "Ada"})
    async with rotating_client([outside_port, cluster.ports[0]], 0, **answers.client_kwargs()) as (
        client,
        _,
    ):
        try:
            await client.call_tool("plan_trip", {"city": "Lisbon"})
        except MCPError as exc:
            outcome: BaseException | None = exc
        else:
            outcome = None
    assert_client_rejected(outcome)
    text = await scrape(cluster.ports[0])
    assert metric(text, FAILURES, reason="owner_not_in_peer_set") == 1
    assert metric(text, FAILURES, reason="owner_unreachable") == 0
    assert metric(await scrape(outside_port), "mrtr_bridge_forwarded_retries_received_total") == 0
    assert outsider.final_log().count('"front_request_finished"') == 1


async def _rejected_call(ports: list[int], authorizations: list[str]) -> BaseException | None:
    answers = InputAnswers(elicit_content={"name": "Ada"})
    async with rotating_client(ports, 0, authorizations, **answers.client_kwargs()) as (client, _):
        try:
            await client.call_tool("plan_trip", {"city": "Lisbon"})
        except MCPError as exc:
            return exc
    return None


async def test_the_owner_still_checks_the_callers_credential(peers: Peers) -> None:
    """Alice's call, retried with Mallory's token on another replica: forwarded, and the owner
    rejects it (principal binding), counted there as other_principal."""
    cluster = start_cluster(peers, count=2)
    outcome = await _rejected_call(
        cluster.ports, ["Bearer alice-token-1", "Bearer mallory-token-2"]
    )
    assert_client_rejected(outcome)
    owner, relay = await scrape(cluster.ports[0]), await scrape(cluster.ports[1])
    assert metric(relay, "mrtr_bridge_forwarded_retries_total") == 1
    assert metric(owner, "mrtr_bridge_forwarded_retries_received_total") == 1
    assert (
        metric(owner, "mrtr_bridge_request_state_rejections_total", reason="other_principal") == 1
    )


async def test_a_forwarded_request_is_never_forwarded_again(peers: Peers) -> None:
    """A genuinely forwarded request to r1 whose requestState names r2 is answered by r1 (the fixed
    rejection; the claims are checked in order and the made-up principal fails first); r1 sends
    nothing on to r2."""
    cluster = start_cluster(peers, count=2)
    keys = KeyRing({ONE_KEY[0]: decode_key(*ONE_KEY)}, ONE_KEY[0])
    claims = StateClaims(
        b"\x01" * 16,
        1,
        "r2",
        principal_digest(""),
        "tools/call",
        b"\x02" * 16,
        b"\x03" * 8,
        int(time.time() * 1000) + 60_000,
    )
    body = _call_body({"requestState": seal(claims, keys, b"\x04" * 12), "inputResponses": {}})
    shared = ProofKeys({ONE_KEY[0]: decode_key(*ONE_KEY)}, ONE_KEY[0])
    proof = sign(
        shared,
        sender="r2",
        owner="r1",
        now_ms=int(time.time() * 1000),
        path="/mcp",
        body=body,
        authorization=None,
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"http://127.0.0.1:{cluster.ports[0]}/mcp",
            data=body,
            headers={**HEADERS, HEADER: proof},
        ) as reply:
            error = (await reply.json())["error"]
    assert error == {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE}
    first, second = await scrape(cluster.ports[0]), await scrape(cluster.ports[1])
    assert metric(first, "mrtr_bridge_forwarded_retries_received_total") == 1
    assert (
        metric(first, "mrtr_bridge_request_state_rejections_total", reason="other_principal") == 1
    )
    assert metric(first, "mrtr_bridge_forwarded_retries_total") == 0
    assert metric(second, "mrtr_bridge_forwarded_retries_received_total") == 0
