"""Scripted conversations for upstream sessions: opening, reuse, death, garbage, limits, shutdown.

The real engine and pool run against `FakeUpstream` (or, for the stdio opener, its fake spare
processes); both the client's responses and the server's inbox are asserted.
"""

from __future__ import annotations

import pytest
from engine_harness import (
    ELICIT_PARAMS,
    accepted,
    error_of,
    fault_of,
    hold,
    input_requests,
    result_text,
    scripted_bridge,
    text_result,
)
from fake_upstream import FakeUpstream

from proxy.app.compose import stdio_opener
from translators.protocol.eras import DISCOVER, ELICIT, MODERN_VERSION
from translators.wire.errors import (
    INTERNAL_ERROR,
    LEGACY_URL_ELICITATION_REQUIRED,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject

STDIO = {"command": "fake-legacy-server", "url": None}
BRIDGE_ERROR = {"source": "mrtr-bridge"}


async def test_a_spare_that_died_before_initialize_is_replaced_once() -> None:
    upstream = FakeUpstream()
    spares = upstream.spares(dead_first=1)
    async with scripted_bridge(upstream, opener=stdio_opener(spares), upstream=STDIO) as bridge:  # type: ignore[arg-type]
        first = bridge.start(bridge.request("echo", capabilities={}))
        call = await upstream.next_call()
        call.finish(text_result("second spare"))
        assert result_text(await first) == "second spare"
        dead, alive = spares.taken
        assert dead.received == [("close", None, None)]
        assert upstream.sessions == [alive]
        assert alive.received == [("request", 1, "tools/call")]


async def test_two_dead_spares_in_a_row_fail_the_request_with_why() -> None:
    upstream = FakeUpstream()
    spares = upstream.spares(dead_first=2)
    async with scripted_bridge(upstream, opener=stdio_opener(spares), upstream=STDIO) as bridge:  # type: ignore[arg-type]
        reply = await bridge.send(bridge.request("echo", capabilities={}))
        assert fault_of(reply) == {
            "code": INTERNAL_ERROR,
            "data": BRIDGE_ERROR,
            "message": "The upstream server is unavailable",
        }
        assert len(spares.taken) == 2
        assert upstream.sessions == []


async def test_a_failed_open_fails_only_its_own_request() -> None:
    upstream = FakeUpstream()
    upstream.open_errors.append(UpstreamUnavailable("Fake upstream refused the connection"))
    async with scripted_bridge(upstream) as bridge:
        refused = await bridge.send(bridge.request("echo"))
        assert fault_of(refused) == {
            "code": INTERNAL_ERROR,
            "data": BRIDGE_ERROR,
            "message": "The upstream server is unavailable",
        }
        after = bridge.start(bridge.request("echo"))
        (await upstream.next_call()).finish(text_result("opened"))
        assert result_text(await after) == "opened"
        assert (
            bridge.engine.metrics.sample(
                "mrtr_bridge_upstream_errors_total", kind="UpstreamUnavailable"
            )
            == 1
        )


async def test_a_finished_call_leaves_its_session_warm_for_the_next() -> None:
    async with scripted_bridge() as bridge:
        for n in range(2):
            task = bridge.start(bridge.request("echo", {"n": n}))
            call = await bridge.upstream.next_call()
            assert call.arguments == {"n": n}
            call.finish(text_result(str(n)))
            assert result_text(await task) == str(n)
            await bridge.settled()
        assert len(bridge.upstream.sessions) == 1
        assert bridge.pool.stats().reused_total == 1


async def test_concurrent_calls_of_two_callers_never_cross() -> None:
    async with scripted_bridge() as bridge:
        alice = await hold(bridge, "who", principal="alice")
        bob = await hold(bridge, "who", principal="bob")
        assert alice.call.session is not bob.call.session
        retries = [
            bridge.start(bridge.retry_of(h.request, h.reply, {"who": accepted(n)}))
            for h, n in ((bob, "Bob"), (alice, "Alice"))
        ]
        assert await alice.push.answered() == {"result": accepted("Alice")}
        assert await bob.push.answered() == {"result": accepted("Bob")}
        alice.call.finish(text_result("for alice"))
        bob.call.finish(text_result("for bob"))
        assert [result_text(await task) for task in retries] == ["for bob", "for alice"]


async def test_upstream_death_while_attached_answers_the_attempt_with_why() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        call.session.die("exited with code 9")
        assert fault_of(await first) == {
            "code": INTERNAL_ERROR,
            "data": BRIDGE_ERROR,
            "message": "The upstream session was lost: exited with code 9",
        }
        assert call.session.received == [("request", 1, "tools/call")]


async def test_a_dropped_stream_fails_the_call_with_a_bridge_error() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request("echo"))
        (await bridge.upstream.next_call()).drop()
        assert fault_of(await first) == {
            "code": INTERNAL_ERROR,
            "data": BRIDGE_ERROR,
            "message": "The upstream session was lost",
        }


async def test_a_garbage_result_is_an_upstream_protocol_error() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request("echo"))
        call = await bridge.upstream.next_call()
        call.reply_raw(
            {"jsonrpc": "2.0", "id": call.upstream_request_id, "result": "not an object"}
        )
        assert fault_of(await first) == {
            "code": INTERNAL_ERROR,
            "data": BRIDGE_ERROR,
            "message": "The upstream server sent a message the bridge cannot use",
        }
        assert (
            bridge.engine.metrics.sample(
                "mrtr_bridge_upstream_errors_total", kind="UpstreamProtocolError"
            )
            == 1
        )


async def test_garbage_messages_on_the_stream_are_ignored() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        call.garbage({"jsonrpc": "2.0", "id": 55})
        call.garbage({"jsonrpc": "2.0", "method": 17})
        call.garbage({"jsonrpc": "2.0", "method": "notifications/progress", "params": "nope"})
        call.finish(text_result("unbothered"))
        assert result_text(await first) == "unbothered"
        assert call.session.received == [("request", 1, "tools/call")]


async def test_a_server_error_reply_reaches_the_client_as_its_error() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request("echo"))
        (await bridge.upstream.next_call()).fail(-32602, "Unknown tool: echo")
        assert error_of(await first) == {"code": -32602, "message": "Unknown tool: echo"}


async def test_url_elicitation_required_is_a_round_and_the_call_is_sent_again() -> None:
    async with scripted_bridge() as bridge:
        request = bridge.request("pay")
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        elicitation = {
            "mode": "url",
            "message": "Sign in",
            "url": "https://example.com/pay",
            "elicitationId": "e1",
        }
        call.fail(LEGACY_URL_ELICITATION_REQUIRED, "URL required", {"elicitations": [elicitation]})
        reply = await first
        assert input_requests(reply) == {
            "url-1": {
                "method": ELICIT,
                "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/pay"},
            }
        }
        retry = bridge.start(bridge.retry_of(request, reply, {"url-1": {"action": "accept"}}))
        again = await bridge.upstream.next_call()
        assert again.params == call.params
        again.finish(text_result("paid"))
        assert result_text(await retry) == "paid"
        assert call.session.received == [("request", 1, "tools/call"), ("request", 2, "tools/call")]


async def test_the_held_call_cap_counts_only_calls_that_ask_for_input() -> None:
    """At the cap, the owner's plain calls still run; a call is refused when it asks for input,
    and its push is refused and its call cancelled upstream."""
    async with scripted_bridge(held={"max_per_principal": 1}) as bridge:
        await hold(bridge)
        plain = bridge.start(bridge.request("echo"))
        (await bridge.upstream.next_call()).finish(text_result("plain"))
        assert result_text(await plain) == "plain"
        over = bridge.start(bridge.request("again"))
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert error_of(await over)["data"] == {
            "source": "mrtr-bridge",
            "limit": "held.max_per_principal",
        }
        assert await push.answered() == {"result": {"action": "cancel"}}
        assert await call.cancellation() == "held call refused"
        # another principal's cap is its own (hold asserts the round)
        await hold(bridge, principal="bob")


async def test_shutdown_refuses_held_pushes_and_cancels_upstream() -> None:
    upstream = FakeUpstream()
    async with scripted_bridge(upstream) as bridge:
        held = await hold(bridge)
    assert await held.push.answered() == {"result": {"action": "cancel"}}
    assert await held.call.cancellation() == "bridge shutting down"
    assert upstream.sessions[0].received[-2:] == [
        ("cancel", 1, "bridge shutting down"),
        ("close", None, None),
    ]


@pytest.mark.parametrize(("get_stream", "tools"), [(True, {"listChanged": True}), (False, {})])
async def test_discover_reports_the_upstreams_initialize(
    get_stream: bool, tools: JsonObject
) -> None:
    """Capabilities come from the upstream's initialize; list changes only where a GET stream
    carries them."""
    upstream = FakeUpstream(
        protocol_version="2025-06-18",
        capabilities={"tools": {"listChanged": True}},
        get_stream=get_stream,
    )
    async with scripted_bridge(upstream) as bridge:
        reply = await bridge.send(bridge.request(method=DISCOVER))
        assert reply == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "complete",
                "supportedVersions": [MODERN_VERSION],
                # and the extension the bridge serves itself (long calls as tasks)
                "capabilities": {
                    "tools": tools,
                    "extensions": {"io.modelcontextprotocol/tasks": {}},
                },
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {
                    "io.modelcontextprotocol/serverInfo": {"name": "fake-legacy", "version": "1.0"}
                },
            },
        }
        # the first initialize declared 2025-11-25 shapes; that session is left unused (and closed a
        # moment later), and the one that serves is opened with the 2025-06-18 shape
        assert [session.received for session in upstream.sessions] == [[], []]
        assert upstream.sessions[-1].init_result["protocolVersion"] == "2025-06-18"
    assert upstream.sessions[0].received == [("close", None, None)]


async def test_answers_of_one_round_go_upstream_in_push_order() -> None:
    """One send queue per call: the answers of a round reach the server in the order it pushed."""
    async with scripted_bridge() as bridge:
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        one, two = (
            call.push(ELICIT, ELICIT_PARAMS, key="one"),
            call.push(ELICIT, {**ELICIT_PARAMS, "message": "2?"}, key="two"),
        )
        reply = await first
        retry = bridge.start(
            bridge.retry_of(request, reply, {"one": accepted("1"), "two": accepted("2")})
        )
        assert await one.answered() == {"result": accepted("1")}
        assert await two.answered() == {"result": accepted("2")}
        call.finish(text_result("ordered"))
        assert result_text(await retry) == "ordered"
        assert [push_id for push_id, _ in call.session.answers()] == [one.push_id, two.push_id]
