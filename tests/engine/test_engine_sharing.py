"""Scripted conversations for who gets which upstream session, and where session-wide messages go.

Over HTTP a call whose client declared no push capability shares a warm session (a push it meets
is refused); over stdio nothing ties a message to its call, so every interactive call owns its
process. A push on an idle session's GET stream is answered by policy; a list change from any of
a caller's sessions reaches that caller's `subscriptions/listen` streams and no one else's.
"""

from __future__ import annotations

import asyncio

from engine_harness import (
    ELICIT_PARAMS,
    RecordingSink,
    hold,
    result_text,
    scripted_bridge,
    text_result,
)
from fake_upstream import FakeUpstream

from proxy.app.runtime import stdio_opener
from translators.protocol.eras import ELICIT, ROOTS, SUBSCRIPTIONS_LISTEN

STDIO = {"command": "fake-legacy-server", "url": None}


async def test_capability_less_calls_share_one_http_session() -> None:
    async with scripted_bridge() as bridge:
        tasks = [bridge.start(bridge.request("echo", {"n": n}, capabilities={})) for n in range(2)]
        calls = [await bridge.upstream.next_call() for _ in range(2)]
        assert calls[0].session is calls[1].session
        for call in calls:
            call.finish(text_result(str(call.arguments["n"])))
        assert [result_text(await task) for task in tasks] == ["0", "1"]
        assert len(bridge.upstream.sessions) == 1


async def test_stdio_upstream_gives_every_interactive_call_its_own_process() -> None:
    upstream = FakeUpstream()
    spares = upstream.spares()
    async with scripted_bridge(upstream, opener=stdio_opener(spares), upstream=STDIO) as bridge:  # type: ignore[arg-type]
        tasks = [bridge.start(bridge.request("echo", {"n": n}, capabilities={})) for n in range(2)]
        calls = [await upstream.next_call() for _ in range(2)]
        assert calls[0].session is not calls[1].session
        for call in calls:
            call.finish(text_result("own"))
        assert [result_text(await task) for task in tasks] == ["own", "own"]
        assert len(spares.taken) == 2


async def test_push_on_an_idle_sessions_get_stream_is_answered_by_policy() -> None:
    async with scripted_bridge(upstream={"unowned_roots": ["file:///srv"]}) as bridge:
        task = bridge.start(bridge.request("echo"))
        call = await bridge.upstream.next_call()
        call.finish(text_result("done"))
        assert result_text(await task) == "done"
        await bridge.settled()
        session = call.session
        roots, elicit = session.push_on_get(ROOTS), session.push_on_get(ELICIT, ELICIT_PARAMS)
        assert await roots.answered() == {"result": {"roots": [{"uri": "file:///srv"}]}}
        assert await elicit.answered() == {"result": {"action": "decline"}}


async def test_list_change_from_a_callers_session_reaches_only_that_callers_listen_stream() -> None:
    upstream = FakeUpstream(capabilities={"tools": {"listChanged": True}})
    async with scripted_bridge(upstream) as bridge:
        sinks = {who: RecordingSink() for who in ("alice", "bob")}
        listens = {
            who: bridge.start(
                bridge.request(
                    method=SUBSCRIPTIONS_LISTEN,
                    principal=who,
                    extra={"notifications": {"toolsListChanged": True}},
                ),
                sink,
            )
            for who, sink in sinks.items()
        }
        async with asyncio.timeout(5):
            while not all(sink.sent for sink in sinks.values()):
                await asyncio.sleep(0.001)
        acknowledged = {who: list(sink.sent) for who, sink in sinks.items()}
        held = await hold(bridge, principal="alice")
        held.call.notify("notifications/tools/list_changed", on_get=True)
        assert sinks["alice"].sent[1:] == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/subscriptionId": acknowledged["alice"][0][
                            "params"
                        ]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                    }
                },
            }
        ]
        assert sinks["bob"].sent == acknowledged["bob"]
        for task in listens.values():
            task.cancel()
        await asyncio.gather(*listens.values(), return_exceptions=True)
