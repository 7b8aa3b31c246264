"""The forwarding hop in process (proxy/cluster/forward.py): which requests it forwards, the
owner-unreachable outcome (the fixed error, or a recovery hook's answer), a stalled owner's
retryable error, and the in-flight cap."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from fake_clock import FakeClock

from config import load_settings
from proxy.auth.keys import load_keyring, new_key
from proxy.cluster.forward import Forwarder, OwnerUnreachable
from proxy.cluster.peers import PeerDirectory
from proxy.common.clock import Clock
from proxy.observe.metrics import BridgeMetrics
from translators.held.request_state import StateClaims, seal
from translators.protocol.request_validation import ModernRoute
from translators.tasks_ext.task_ids import TaskClaims, seal_task_id
from translators.wire.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST_STATE_MESSAGE

KID, KEY = new_key()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed on return: connecting is refused


def _setup(
    client: aiohttp.ClientSession, clock: Clock = time.monotonic, **cluster: Any
) -> tuple[Forwarder, BridgeMetrics, str]:
    port = _closed_port()
    env = {
        "MRTR_BRIDGE_HELD_KEYS": f"{KID}={KEY}",
        "MRTR_BRIDGE_HELD_REPLICA_ID": "r1",
        "MRTR_BRIDGE_CLUSTER_PEERS": f"http://127.0.0.1:{port}",
        **{f"MRTR_BRIDGE_CLUSTER_{name.upper()}": str(value) for name, value in cluster.items()},
    }
    settings = load_settings(None, env)
    metrics = BridgeMetrics()
    metrics.upstream("alpha", "/mcp")  # the upstream whose endpoint the retries come to
    directory = PeerDirectory(settings.cluster, "r1", client)
    directory._owners["r2"] = f"http://127.0.0.1:{port}"  # r2 was a peer, and is gone now
    directory._refreshed_at = float("inf")
    keyring = load_keyring(settings.held)[0]
    state = seal(
        StateClaims(
            os.urandom(16), 1, "r2", b"\0" * 16, "tools/call", b"\0" * 16, b"\0" * 8, 2**62
        ),
        keyring,
        os.urandom(12),
    )
    return Forwarder(settings, keyring, directory, client, metrics, clock), metrics, state


def _route(params: dict[str, Any]) -> ModernRoute:
    return ModernRoute(
        front_request_id=5,
        method="tools/call",
        params=params,
        protocol_version="2026-07-28",
        client_capabilities={},
    )


async def test_only_retries_owned_elsewhere_are_forwarded() -> None:
    async with aiohttp.ClientSession() as client:
        forwarder, _, state = _setup(client)
        assert forwarder.owner_elsewhere(_route({"name": "x", "requestState": state})) == "r2"
        assert forwarder.owner_elsewhere(_route({"name": "x"})) is None
        assert forwarder.owner_elsewhere(_route({"name": "x", "requestState": "v1.forged"})) is None
        listing = ModernRoute(
            front_request_id=5,
            method="tools/list",
            params={"requestState": state},
            protocol_version="2026-07-28",
            client_capabilities={},
        )
        assert forwarder.owner_elsewhere(listing) is None


async def test_tasks_owned_elsewhere_are_forwarded_by_their_sealed_id() -> None:
    """tasks/get|update|cancel and an in-bridge task round go to the replica the task id names;
    a forged id or this replica's own task is served here (docs/tasks.md)."""
    async with aiohttp.ClientSession() as client:
        forwarder, _, _ = _setup(client)
        keyring = load_keyring(forwarder._settings.held)[0]

        def task_id(replica: str) -> str:
            claims = TaskClaims(os.urandom(16), b"\0" * 16, 2**62, replica)
            return seal_task_id(claims, keyring, os.urandom(12))

        def task_route(method: str, params: dict[str, Any]) -> ModernRoute:
            return ModernRoute(
                front_request_id=5,
                method=method,
                params=params,
                protocol_version="2026-07-28",
                client_capabilities={},
            )

        elsewhere, here = task_id("r2"), task_id("r1")
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            assert forwarder.owner_elsewhere(task_route(method, {"taskId": elsewhere})) == "r2"
            assert forwarder.owner_elsewhere(task_route(method, {"taskId": here})) is None
            forged = elsewhere[:-4] + "AAAA"
            assert forwarder.owner_elsewhere(task_route(method, {"taskId": forged})) is None
        round_ = _route({"name": "x", "requestState": elsewhere, "inputResponses": {}})
        assert forwarder.owner_elsewhere(round_) == "r2"


async def test_an_unreachable_owner_gets_the_fixed_error_and_is_counted() -> None:
    async with aiohttp.ClientSession() as client:
        forwarder, metrics, state = _setup(client)
        request = make_mocked_request("POST", "/mcp", headers={"Content-Type": "application/json"})
        response = await forwarder.forward(request, b"{}", _route({"requestState": state}), "r2")
    assert isinstance(response, web.Response) and response.body is not None
    assert json.loads(bytes(response.body))["error"] == {
        "code": INVALID_PARAMS,
        "message": INVALID_REQUEST_STATE_MESSAGE,
    }
    assert metrics.sample("mrtr_bridge_forward_failures_total", reason="owner_unreachable") == 1
    rejections = "mrtr_bridge_request_state_rejections_total"
    assert metrics.sample(rejections, upstream="alpha", reason="owner_unreachable") == 1


async def test_a_recovery_hook_answers_instead() -> None:
    """`on_unreachable` (the hook for recovering a call whose owner is gone) gets the request,
    the route and the reason; its answer replaces the fixed error."""
    seen: list[tuple[str, str]] = []

    async def recover(
        request: web.Request, route: ModernRoute, exc: OwnerUnreachable
    ) -> web.StreamResponse:
        seen.append((exc.owner, exc.reason))
        return web.json_response(
            {"jsonrpc": "2.0", "id": route.front_request_id, "result": {"recovered": True}}
        )

    async with aiohttp.ClientSession() as client:
        forwarder, _, state = _setup(client)
        request = make_mocked_request("POST", "/mcp")
        retry = _route({"requestState": state})
        response = await forwarder.forward(request, b"{}", retry, "r2", on_unreachable=recover)
        missing = await forwarder.forward(request, b"{}", retry, "r7", on_unreachable=recover)
    assert isinstance(response, web.Response) and response.body is not None
    assert json.loads(bytes(response.body))["result"] == {"recovered": True}
    assert isinstance(missing, web.Response)
    assert seen == [("r2", "owner_unreachable"), ("r7", "owner_not_in_peer_set")]


async def test_an_owner_too_slow_for_its_proof_is_stalled_not_gone() -> None:
    """An owner that reads the forward only after `cluster.proof_max_age_s` (paused, then resumed:
    the forwarder's clock moves past it meanwhile) refuses the proof as stale: the retry gets the
    retryable error, and no recovery starts."""
    clock = FakeClock()

    async def resumed_late(request: web.Request) -> web.Response:
        clock.advance(0.2)
        return web.json_response({"error": "stale proof"}, status=403)

    app = web.Application()
    app.router.add_post("/mcp", resumed_late)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook_calls: list[OwnerUnreachable] = []

    async def recover(
        request: web.Request, route: ModernRoute, exc: OwnerUnreachable
    ) -> web.StreamResponse:
        hook_calls.append(exc)
        return web.json_response({})

    try:
        async with aiohttp.ClientSession() as client:
            forwarder, metrics, state = _setup(client, clock, proof_max_age_s=0.2)
            forwarder._directory._owners["r2"] = f"http://127.0.0.1:{port}"
            request = make_mocked_request("POST", "/mcp")
            response = await forwarder.forward(
                request, b"{}", _route({"requestState": state}), "r2", on_unreachable=recover
            )
    finally:
        await runner.cleanup()
    assert isinstance(response, web.Response) and response.body is not None
    assert json.loads(bytes(response.body))["error"] == {
        "code": INTERNAL_ERROR,
        "message": "The replica holding this call did not answer in time; send the same "
        "request again",
        "data": {"source": "mrtr-bridge", "retryable": True},
    }
    assert hook_calls == []
    assert metrics.sample("mrtr_bridge_forward_failures_total", reason="owner_stalled") == 1
    assert metrics.sample("mrtr_bridge_forwarded_retries_total") == 0
