"""Hostile upstream pushes (docs/security.md § Limits): floods cost linear time and are capped per
round (`held.max_pushes_per_round`) and per call (`held.max_pushes_per_call`), with the limit named
to the client and the excess push refused upstream; a push reusing the id of a pending push is
refused upstream and the first one kept. A bystander's call is never disturbed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine_harness import (
    ELICIT_PARAMS,
    SAMPLING_PARAMS,
    ScriptedBridge,
    accepted,
    error_of,
    hold,
    input_requests,
    result_text,
    scripted_bridge,
    text_result,
)
from fake_upstream import WAIT_S, FakeCall

from translators.protocol.eras import ELICIT, SAMPLE
from translators.wire.errors import INTERNAL_ERROR, INVALID_REQUEST, LEGACY_SAMPLING_REJECTED
from translators.wire.jsonrpc import JsonObject

CANCEL = {"result": {"action": "cancel"}}


def limit_error(limit: str, message: str) -> JsonObject:
    return {
        "code": INTERNAL_ERROR,
        "message": message,
        "data": {"source": "mrtr-bridge", "limit": limit},
    }


def refused_over(limit: str, message: str) -> JsonObject:
    """What the upstream gets for the push past a cap."""
    return {"error": {"code": INTERNAL_ERROR, "message": f"{message} ({limit})"}}


async def bystander_completes(bridge: ScriptedBridge) -> None:
    """Another principal's call, started and answered while the flood's call is cut off."""
    held = await hold(bridge, principal="bob", tool="bystander")
    retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Bob")}))
    assert await held.push.answered() == {"result": accepted("Bob")}
    held.call.finish(text_result("hello Bob"))
    assert result_text(await retry) == "hello Bob"


async def flood_seconds(bridge: ScriptedBridge, call: FakeCall, count: int) -> float:
    """CPU seconds the bridge takes to receive `count` identical pushes on `call` (delivered
    synchronously, so the fake's loop is all the work there is)."""
    start = time.process_time()
    for _ in range(count):
        call.push(ELICIT, ELICIT_PARAMS)
    return time.process_time() - start


async def test_a_flood_of_identical_pushes_costs_linear_time() -> None:
    """N and 4N pushes into one held call: the work grows about 4 times (quadratic was 16)."""
    n = 1000
    async with scripted_bridge(
        held={"max_pushes_per_round": 4096, "max_pushes_per_call": 1_000_000}
    ) as bridge:
        best: dict[int, float] = {}
        for trial in range(3):
            for count in (n, 4 * n):
                # a tool of its own: the flood taught the bridge a huge batch for the last one
                held = await hold(bridge, tool=f"t{trial}-{count}")
                seconds = await flood_seconds(bridge, held.call, count)
                best[count] = min(best.get(count, seconds), seconds)
                held.call.finish(text_result("done"))
        assert best[4 * n] / max(best[n], 1e-6) < 8, best
        await bystander_completes(bridge)


async def test_a_push_past_the_round_cap_ends_the_attached_call_with_the_limit() -> None:
    async with scripted_bridge(held={"max_pushes_per_round": 3}) as bridge:
        bridge.learned(10)  # the batch stays open: the pushes pile up while the attempt waits
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        pushes = [call.push(ELICIT, {**ELICIT_PARAMS, "message": f"Q{n}?"}) for n in range(4)]
        message = "The upstream server asked for more than 3 inputs in one round"
        assert error_of(await first) == limit_error("held.max_pushes_per_round", message)
        assert [await push.answered() for push in pushes] == [CANCEL] * 3 + [
            refused_over("held.max_pushes_per_round", message)
        ]
        assert await call.cancellation() == "too many pushes"
        await bridge.settled()
        await bystander_completes(bridge)


async def test_a_push_past_the_round_cap_while_held_is_the_retry_s_error() -> None:
    async with scripted_bridge(held={"max_pushes_per_round": 3}) as bridge:
        held = await hold(bridge)
        late = [held.call.push(ELICIT, {**ELICIT_PARAMS, "message": f"L{n}?"}) for n in range(3)]
        assert await held.call.cancellation() == "too many pushes"
        message = "The upstream server asked for more than 3 inputs in one round"
        assert [await push.answered() for push in (held.push, *late)] == [CANCEL] * 3 + [
            refused_over("held.max_pushes_per_round", message)
        ]
        retry = bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        assert error_of(await bridge.send(retry)) == limit_error(
            "held.max_pushes_per_round", message
        )
        await bridge.settled()
        await bystander_completes(bridge)


async def test_pushes_past_the_call_cap_end_the_call_and_cost_nothing_more() -> None:
    """Refused pushes (sampling the client did not declare) count too; past the cap the call
    ends, and the rest of the flood is dropped."""
    async with scripted_bridge(held={"max_pushes_per_call": 5}) as bridge:
        first = bridge.start(bridge.request(capabilities={}))
        call = await bridge.upstream.next_call()
        pushes = [call.push(SAMPLE, SAMPLING_PARAMS) for _ in range(20)]
        message = "The upstream server sent more than 5 requests for input in one call"
        assert error_of(await first) == limit_error("held.max_pushes_per_call", message)
        answers = [await push.answered() for push in pushes[:6]]
        assert [answer["error"]["code"] for answer in answers[:5]] == [LEGACY_SAMPLING_REJECTED] * 5
        assert answers[5] == refused_over("held.max_pushes_per_call", message)
        assert await call.cancellation() == "too many pushes"
        await bridge.settled()
        assert not any(push.is_answered for push in pushes[6:])
        await bystander_completes(bridge)


async def test_a_flood_at_the_default_caps_is_cut_off_in_linear_time() -> None:
    counts = (5_000, 20_000)
    seconds: list[float] = []
    message = "The upstream server asked for more than 64 inputs in one round"
    async with scripted_bridge() as bridge:
        for count in counts:
            held = await hold(bridge, tool=f"flood-{count}")
            seconds.append(await flood_seconds(bridge, held.call, count))
            assert await held.call.cancellation() == "too many pushes"
            retry = bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
            assert error_of(await bridge.send(retry)) == limit_error(
                "held.max_pushes_per_round", message
            )
        assert seconds[1] / max(seconds[0], 1e-6) < 8, seconds
        await bridge.settled()
        await bystander_completes(bridge)


def raw_push(push_id: int, message: str) -> dict[str, Any]:
    params = {**ELICIT_PARAMS, "message": message}
    return {"jsonrpc": "2.0", "id": push_id, "method": ELICIT, "params": params}


async def test_a_push_reusing_a_pending_id_is_refused_and_the_first_kept() -> None:
    async with scripted_bridge() as bridge:  # one push per round: the first closes the batch
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        for message in ("First?", "Second?", "Third?"):
            call.deliver(raw_push(7, message))
        reply = await first
        ((key, asked),) = input_requests(reply).items()
        assert asked["params"]["message"] == "First?"
        retry = bridge.start(bridge.retry_of(request, reply, {key: accepted("Ada")}))
        session = bridge.upstream.sessions[0]
        async with asyncio.timeout(WAIT_S):
            while len(session.answers()) < 3:
                await asyncio.sleep(0.001)
        duplicate = {
            "error": {
                "code": INVALID_REQUEST,
                "message": "Invalid request: id 7 is already used by a pending request",
            }
        }
        assert session.answers() == [
            (7, duplicate),
            (7, duplicate),
            (7, {"result": accepted("Ada")}),
        ]
        call.finish(text_result("hello Ada"))
        assert result_text(await retry) == "hello Ada"
        # answered, the id may be used again (a new request)
        assert bridge.engine.registry.rounds_total == 1
