"""The plain path (proxy/calls/call.py): no held-call state until a call's first push.

A first attempt is forwarded plain; the held parts (`HeldRun`: the machine, its tasks and timers)
and the registry entry exist only once the upstream asks something. These conversations pin both
halves: a call that never receives a push leaves nothing behind at any moment, and a push arriving
mid-call (on the call's stream or the session's GET stream, after progress was already forwarded)
still becomes the same `InputRequiredResult` and the same held call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from engine_harness import (
    ELICIT_PARAMS,
    RecordingSink,
    ScriptedBridge,
    accepted,
    error_of,
    fault_of,
    input_requests,
    result_text,
    scripted_bridge,
    text_result,
)
from virtual_time import advance, on_virtual_time

import proxy.calls.call as call_module
from proxy.calls.held_run import HeldRun
from translators.held.machine import HeldCallState
from translators.protocol.eras import ELICIT
from translators.wire.errors import INTERNAL_ERROR, LEGACY_URL_ELICITATION_REQUIRED

HELD_CALL_TASKS = {"held-call-sends"}
FORM = {"mode": "form", **ELICIT_PARAMS}


@contextmanager
def counted_held_parts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[HeldRun]]:
    """Every `HeldRun` (the held parts of a call) built, in order."""
    built: list[HeldRun] = []

    def counting(*args: Any, **kwargs: Any) -> HeldRun:
        held = HeldRun(*args, **kwargs)
        built.append(held)
        return held

    monkeypatch.setattr(call_module, "HeldRun", counting)
    yield built


def held_call_tasks() -> set[str]:
    return {task.get_name() for task in asyncio.all_tasks()} & HELD_CALL_TASKS


def progress_request(bridge: ScriptedBridge, token: str) -> Any:
    meta = {**bridge.request().params["_meta"], "progressToken": token}
    return bridge.request(extra={"_meta": meta})


def assert_no_held_state(bridge: ScriptedBridge) -> None:
    registry = bridge.engine.registry
    assert len(registry) == 0
    assert registry.calls() == []
    assert registry.held_now() == 0
    assert held_call_tasks() == set()


async def test_a_call_without_a_push_builds_no_held_call_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with counted_held_parts(monkeypatch) as built:
        async with scripted_bridge() as bridge:
            sink = RecordingSink()
            first = bridge.start(progress_request(bridge, "p-1"), sink)
            call = await bridge.upstream.next_call()
            token = call.params["_meta"]["progressToken"]
            call.notify("notifications/progress", {"progressToken": token, "progress": 1})
            # in flight: counted as an interactive call in progress, but nothing is held
            assert_no_held_state(bridge)
            assert bridge.engine.registry.in_progress() == 1
            call.finish(text_result("plain"))
            assert result_text(await first) == "plain"
            assert_no_held_state(bridge)
            assert bridge.engine.registry.in_progress() == 0
            assert sink.sent == [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": "p-1", "progress": 1},
                }
            ]
            assert call.session.received == [("request", 1, "tools/call")]
            # the session went back to the pool, warm: the next call reuses it
            second = bridge.start(bridge.request(arguments={"n": 2}))
            again = await bridge.upstream.next_call()
            again.finish(text_result("again"))
            assert result_text(await second) == "again"
            assert again.session is call.session
    assert built == []


async def test_a_push_mid_call_becomes_the_same_input_round_and_held_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with counted_held_parts(monkeypatch) as built:
        async with scripted_bridge() as bridge:
            sink = RecordingSink()
            request = progress_request(bridge, "p-2")
            first = bridge.start(request, sink)
            call = await bridge.upstream.next_call()
            token = call.params["_meta"]["progressToken"]
            call.notify("notifications/progress", {"progressToken": token, "progress": 1})
            assert built == []
            push = call.push(ELICIT, ELICIT_PARAMS, key="name")
            reply = await first
            assert input_requests(reply) == {"name": {"method": ELICIT, "params": FORM}}
            assert "requestState" in reply["result"]
            # now, and only now, the held call exists: one, registered, waiting
            assert len(built) == 1
            assert [held.machine for held in bridge.engine.registry.calls()] == [built[0].machine]
            assert built[0].machine.state is HeldCallState.WAITING_CLIENT
            assert built[0].machine.round == 1
            assert bridge.engine.registry.held_now() == 1
            # waiting for its client, it owns no task: its sends run only while it sends
            assert held_call_tasks() == set()
            retry = bridge.start(bridge.retry_of(request, reply, {"name": accepted("Ada")}))
            assert await push.answered() == {"result": accepted("Ada")}
            call.finish(text_result("Ada booked"))
            assert result_text(await retry) == "Ada booked"
            await bridge.settled()
            assert_no_held_state(bridge)
            assert bridge.engine.registry.in_progress() == 0
            assert sink.sent == [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": "p-2", "progress": 1},
                }
            ]
            assert call.session.received == [
                ("request", 1, "tools/call"),
                ("answer", push.push_id, {"result": accepted("Ada")}),
            ]


async def test_a_push_on_the_sessions_get_stream_also_starts_the_held_call() -> None:
    """An exclusive session's GET-stream pushes are the call's (docs/decisions.md § 7) while it
    runs plain too."""
    async with scripted_bridge() as bridge:
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name", on_get=True)
        reply = await first
        assert list(input_requests(reply)) == ["name"]
        retry = bridge.start(bridge.retry_of(request, reply, {"name": accepted("Bo")}))
        assert await push.answered() == {"result": accepted("Bo")}
        call.finish(text_result("Bo"))
        assert result_text(await retry) == "Bo"


@on_virtual_time
async def test_a_held_call_keeps_what_is_left_of_the_attempts_deadline() -> None:
    """The plain path's time counts: a push arriving halfway leaves the held call only the rest of
    `front.request_timeout_s` (a new whole timeout would end it 50% later), and the batch waiting
    for a second push is cut by it. On the loop's virtual clock the deadline is exact."""
    timeout_s = 2.0
    async with scripted_bridge(front={"request_timeout_s": timeout_s}) as bridge:
        bridge.learned(2)  # the batch waits for a second push that never comes
        loop = asyncio.get_running_loop()
        began = loop.time()
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        await advance(timeout_s / 2)
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        error = fault_of(await first)
        waited = loop.time() - began
        assert error["code"] == INTERNAL_ERROR
        assert error["message"] == f"The upstream call did not finish within {timeout_s:g} s"
        assert await push.answered() == {"result": {"action": "cancel"}}
        assert await call.cancellation() == "request timed out"
        assert waited == pytest.approx(timeout_s)


async def test_a_plain_call_past_its_deadline_is_cancelled_and_its_session_discarded() -> None:
    async with scripted_bridge(front={"request_timeout_s": 0.2}) as bridge:
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        error = fault_of(await first)
        assert error["message"] == "The upstream call did not finish within 0.2 s"
        assert await call.cancellation() == "request timed out"
        await call.session.wait_closed()
        assert call.session.received == [
            ("request", 1, "tools/call"),
            ("cancel", 1, "request timed out"),
            ("close", None, None),
        ]
        assert_no_held_state(bridge)
        assert bridge.engine.registry.in_progress() == 0


async def test_a_url_elicitation_error_ending_a_plain_call_becomes_a_held_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """-32042 ends the upstream call but asks for input: the call becomes held around the finished
    upstream call, so the round and the call sent again are the held call's, counted once."""
    with counted_held_parts(monkeypatch) as built:
        async with scripted_bridge() as bridge:
            request = bridge.request("pay")
            first = bridge.start(request)
            call = await bridge.upstream.next_call()
            url = {"mode": "url", "message": "Sign in", "url": "https://example.com/pay"}
            data = {"elicitations": [{**url, "elicitationId": "e1"}]}
            call.fail(LEGACY_URL_ELICITATION_REQUIRED, "URL required", data)
            reply = await first
            assert input_requests(reply) == {"url-1": {"method": ELICIT, "params": url}}
            assert len(built) == 1
            assert bridge.engine.registry.in_progress() == 1
            retry = bridge.start(bridge.retry_of(request, reply, {"url-1": {"action": "accept"}}))
            again = await bridge.upstream.next_call()
            again.finish(text_result("paid"))
            assert result_text(await retry) == "paid"
            await bridge.settled()
            assert bridge.engine.registry.in_progress() == 0
            assert len(built) == 1


async def test_the_shutdown_cut_off_cancels_a_plain_call_as_the_bridge_shutting_down() -> None:
    """A plain call has no held parts for `abort_all` to reach: the cut-off's cancellation of its
    request tells the server the same reason a held call's abort does, and the client gets the
    shutting-down error."""
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request("slow"))
        call = await bridge.upstream.next_call()
        loop = asyncio.get_running_loop()
        await bridge.engine.drain(loop.time() + 0.05, cut_wait_s=1.0)
        assert error_of(await first)["data"] == {"source": "mrtr-bridge", "reason": "shutting_down"}
        assert await call.cancellation() == "bridge shutting down"
        await call.session.wait_closed()
        assert call.session.received == [
            ("request", 1, "tools/call"),
            ("cancel", 1, "bridge shutting down"),
            ("close", None, None),
        ]
