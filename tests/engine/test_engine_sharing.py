"""Scripted conversations for who gets which upstream session, and where session-wide messages go.

Over HTTP a call whose client declared no push capability shares a warm session (a push it meets
is refused); over stdio nothing ties a message to its call, so every interactive call owns its
process. Held calls of a tool whose pushes came on its own POST stream share a session (decisions.md
§ 28). A push on an idle session's GET stream is answered by policy; a list change from any of
a caller's sessions reaches that caller's `subscriptions/listen` streams and no one else's.
"""

from __future__ import annotations

import asyncio

from engine_harness import (
    ELICIT_PARAMS,
    RecordingSink,
    ScriptedBridge,
    accepted,
    hold,
    result_text,
    scripted_bridge,
    text_result,
)
from fake_upstream import FakeUpstream

from proxy.app.compose import stdio_opener
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


async def _learn_ask(bridge: ScriptedBridge) -> None:
    """One `ask` on a session of its own, its push on its POST stream: the label qualifies."""
    held = await hold(bridge)
    retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
    assert await held.push.answered() == {"result": accepted("Ada")}
    held.call.finish(text_result("learned"))
    assert result_text(await retry) == "learned"
    await bridge.settled()


async def test_held_calls_of_a_learned_tool_share_a_session_and_keep_their_own_answers() -> None:
    async with scripted_bridge() as bridge:
        await _learn_ask(bridge)
        first, second = await hold(bridge, "name"), await hold(bridge, "name")
        assert first.call.session is second.call.session
        retries = [
            bridge.start(bridge.retry_of(h.request, h.reply, {"name": accepted(n)}))
            for h, n in ((second, "Bea"), (first, "Al"))
        ]
        assert await first.push.answered() == {"result": accepted("Al")}
        assert await second.push.answered() == {"result": accepted("Bea")}
        first.call.finish(text_result("for Al"))
        second.call.finish(text_result("for Bea"))
        assert [result_text(await task) for task in retries] == ["for Bea", "for Al"]
        assert len(bridge.upstream.sessions) == 1


async def test_a_cancelled_sharing_call_retires_its_session_after_the_others() -> None:
    """A client gone during its retry: its call is cancelled upstream and the session it shared
    serves no new call (a late GET-stream push of the cancelled tool must reach no one); the other
    held call finishes there, then the session closes."""
    async with scripted_bridge() as bridge:
        await _learn_ask(bridge)
        gone, staying = await hold(bridge, "name"), await hold(bridge, "name")
        shared = gone.call.session
        assert staying.call.session is shared
        retry = bridge.start(bridge.retry_of(gone.request, gone.reply, {"name": accepted("X")}))
        assert await gone.push.answered() == {"result": accepted("X")}
        retry.cancel()
        assert await gone.call.cancellation() == "client disconnected"
        later = await hold(bridge, "name")
        assert later.call.session is not shared
        assert not shared.closed.is_set()
        done = bridge.start(
            bridge.retry_of(staying.request, staying.reply, {"name": accepted("Y")})
        )
        assert await staying.push.answered() == {"result": accepted("Y")}
        staying.call.finish(text_result("stayed"))
        assert result_text(await done) == "stayed"
        await shared.wait_closed()


async def test_a_sharing_call_cancelled_before_any_push_retires_its_session() -> None:
    """A plain (not yet held) call on a shared session whose client goes away: cancelled upstream,
    and the session serves no new call."""
    async with scripted_bridge() as bridge:
        await _learn_ask(bridge)
        staying = await hold(bridge, "name")
        shared = staying.call.session
        gone = bridge.start(bridge.request("ask"))
        call = await bridge.upstream.next_call()
        assert call.session is shared
        gone.cancel()
        assert await call.cancellation() == "client disconnected"
        later = await hold(bridge, "name")
        assert later.call.session is not shared
        assert not shared.closed.is_set()
