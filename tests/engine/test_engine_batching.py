"""Push batching without a fixed wait (docs/decisions.md, "Push batching by learned size"), and no
state-only round: every InputRequiredResult the bridge sends carries inputRequests."""

from __future__ import annotations

from engine_harness import (
    ELICIT_PARAMS,
    ScriptedBridge,
    accepted,
    input_requests,
    result_text,
    scripted_bridge,
    text_result,
)
from virtual_time import advance, on_virtual_time

from proxy.calls.call import Call
from translators.held.machine import HeldCallState
from translators.held.push_ledger import BatchSizes
from translators.protocol.eras import ELICIT, ROOTS, TOOLS_CALL

COLOUR = {"message": "Your colour?", "requestedSchema": ELICIT_PARAMS["requestedSchema"]}
CEILING_MS = 20  # held.batch_quiet_ms (and batch_max_ms) where a test wants the ceiling to act


def driver(bridge: ScriptedBridge) -> Call:
    (only,) = bridge.engine.registry._calls.values()
    return only


async def test_an_unknown_tool_closes_at_the_ceiling_and_is_answered_at_once_next_time() -> None:
    quiet = {"batch_quiet_ms": CEILING_MS, "batch_max_ms": CEILING_MS}
    async with scripted_bridge(held=quiet) as bridge:
        bridge.engine.registry.batch_sizes = sizes = BatchSizes()  # nothing learned yet
        request = bridge.request("new")
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert driver(bridge).machine.state is HeldCallState.COLLECTING  # the ceiling decides
        reply = await first
        assert list(input_requests(reply)) == ["name"]
        assert sizes.sizes((TOOLS_CALL, "new")) == {1: 1}
        retry = bridge.start(bridge.retry_of(request, reply, {"name": accepted("Ada")}))
        call.finish(text_result("hello"))
        assert result_text(await retry) == "hello"
        await bridge.settled()

        second = bridge.start(bridge.request("new"))
        call = await bridge.upstream.next_call()
        call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert driver(bridge).machine.state is HeldCallState.WAITING_CLIENT  # no wait at all
        assert list(input_requests(await second)) == ["name"]


async def test_a_push_after_its_round_was_asked_is_the_next_round_and_is_learned() -> None:
    async with scripted_bridge() as bridge:  # learned: one push per round; this tool sends two
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        name = call.push(ELICIT, ELICIT_PARAMS, key="name")
        roots = call.push(ROOTS, key="roots")
        reply = await first
        assert list(input_requests(reply)) == ["name"]
        assert bridge.engine.registry.batch_sizes.sizes((TOOLS_CALL, "ask"))[1] == 2
        again = await bridge.send(bridge.retry_of(request, reply, {"name": accepted("Ada")}))
        assert list(input_requests(again)) == ["roots"]  # the late push, asked at once
        last = bridge.start(bridge.retry_of(request, again, {"roots": {"roots": []}}))
        assert await name.answered() == {"result": accepted("Ada")}
        assert await roots.answered() == {"result": {"roots": []}}
        call.finish(text_result("both"))
        assert result_text(await last) == "both"

        next_call = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert driver(bridge).machine.state is HeldCallState.COLLECTING  # one of two
        call.push(ROOTS, key="roots")
        assert set(input_requests(await next_call)) == {"name", "roots"}


@on_virtual_time
async def test_a_resumed_call_is_held_open_until_the_upstream_pushes_again() -> None:
    """No state-only round: the retry that resumes the call gets nothing until the upstream asks
    its next question, even when that takes longer than the batching ceiling (the loop's clock is
    moved past it: every timer due meanwhile has run)."""
    quiet = {"batch_quiet_ms": CEILING_MS, "batch_max_ms": CEILING_MS}
    async with scripted_bridge(held=quiet) as bridge:
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        name = call.push(ELICIT, ELICIT_PARAMS, key="name")
        reply = await first
        retry = bridge.start(bridge.retry_of(request, reply, {"name": accepted("Ada")}))
        assert await name.answered() == {"result": accepted("Ada")}
        await advance(5 * CEILING_MS / 1000)  # the upstream thinks, past the ceiling
        assert not retry.done()
        assert driver(bridge).machine.state is HeldCallState.RUNNING
        colour = call.push(ELICIT, COLOUR, key="colour")
        second = await retry
        assert list(input_requests(second)) == ["colour"]
        last = bridge.start(bridge.retry_of(request, second, {"colour": accepted("red")}))
        assert await colour.answered() == {"result": accepted("red")}
        await advance(5 * CEILING_MS / 1000)  # again, now before the final result
        assert not last.done()
        call.finish(text_result("Ada likes red"))
        assert result_text(await last) == "Ada likes red"
        assert bridge.engine.registry.rounds_total == 2


async def test_a_withdrawn_batch_leaves_the_attempt_waiting_not_asked() -> None:
    """The only pending push withdrawn: the attempt stays attached (no empty round) and gets the
    next question or the result."""
    async with scripted_bridge() as bridge:
        bridge.learned(2)
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        withdrawn = call.push(ELICIT, ELICIT_PARAMS, key="name")
        call.notify("notifications/cancelled", {"requestId": withdrawn.push_id})
        assert driver(bridge).machine.state is HeldCallState.RUNNING
        assert not first.done()
        call.finish(text_result("no questions after all"))
        assert result_text(await first) == "no questions after all"
        assert bridge.engine.registry.rounds_total == 0
