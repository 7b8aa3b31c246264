"""Scripted conversations for the rules of an input round (the real engine, an in-memory upstream).

Each test plays one conversation between a modern client (requests handed to `Engine.handle`) and
a scripted legacy server (`FakeUpstream`), and asserts both ends exactly: the JSON-RPC response the
client gets, and what the server received (answers to its pushes, cancellations, closes).
"""

from __future__ import annotations

from engine_harness import (
    ELICIT_PARAMS,
    SAMPLING_PARAMS,
    RecordingSink,
    accepted,
    error_of,
    hold,
    input_requests,
    rejections,
    result_text,
    scripted_bridge,
    text_result,
)

from translators.protocol.eras import ELICIT, ROOTS, SAMPLE
from translators.wire.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST_STATE_MESSAGE,
    LEGACY_SAMPLING_REJECTED,
    USED_REQUEST_STATE_MESSAGE,
)

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
ROOTS_ANSWER = {"roots": [{"uri": "file:///work"}]}
FORM = {"mode": "form", **ELICIT_PARAMS}


async def test_one_push_is_one_round_and_its_answer_goes_upstream() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        assert input_requests(held.reply) == {"name": {"method": ELICIT, "params": FORM}}
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish(text_result("hello Ada"))
        assert result_text(await retry) == "hello Ada"
        assert bridge.upstream.sessions[0].received == [
            ("request", 1, "tools/call"),
            ("answer", held.push.push_id, {"result": accepted("Ada")}),
        ]
        assert bridge.engine.registry.rounds_total == 1


async def test_pushes_arriving_together_are_batched_into_one_round() -> None:
    async with scripted_bridge() as bridge:
        bridge.learned(3)
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        pushes = [
            call.push(ELICIT, ELICIT_PARAMS, key="name"),
            call.push(SAMPLE, SAMPLING_PARAMS, key="sum"),
            call.push(ROOTS, key="roots"),
        ]
        reply = await first
        assert input_requests(reply) == {
            "name": {"method": ELICIT, "params": FORM},
            "sum": {"method": SAMPLE, "params": SAMPLING_PARAMS},
            "roots": {"method": ROOTS, "params": {}},
        }
        answers = {"name": accepted("Ada"), "sum": SAMPLED, "roots": ROOTS_ANSWER}
        retry = bridge.start(bridge.retry_of(request, reply, answers))
        assert [await push.answered() for push in pushes] == [
            {"result": answers[k]} for k in ("name", "sum", "roots")
        ]
        call.finish(text_result("done"))
        assert result_text(await retry) == "done"
        assert bridge.engine.registry.rounds_total == 1


async def test_missing_answers_are_asked_again_alone() -> None:
    async with scripted_bridge() as bridge:
        bridge.learned(2)
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        name, total = (
            call.push(ELICIT, ELICIT_PARAMS, key="name"),
            call.push(SAMPLE, SAMPLING_PARAMS, key="sum"),
        )
        reply = await first
        assert set(input_requests(reply)) == {"name", "sum"}
        again = await bridge.send(bridge.retry_of(request, reply, {"name": accepted("Ada")}))
        assert input_requests(again) == {"sum": {"method": SAMPLE, "params": SAMPLING_PARAMS}}
        assert await name.answered() == {"result": accepted("Ada")}
        assert not total.is_answered
        last = bridge.start(bridge.retry_of(request, again, {"sum": SAMPLED}))
        assert await total.answered() == {"result": SAMPLED}
        call.finish(text_result("both"))
        assert result_text(await last) == "both"
        assert bridge.engine.registry.rounds_total == 2


async def test_pre_answered_input_completes_without_a_round() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request(extra={"inputResponses": {"name": accepted("Pre")}}))
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert await push.answered() == {"result": accepted("Pre")}
        call.finish(text_result("pre-answered"))
        assert result_text(await first) == "pre-answered"
        assert bridge.engine.registry.rounds_total == 0


async def test_an_unusable_pre_answer_is_asked_normally() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(
            bridge.request(extra={"inputResponses": {"name": {"action": "maybe"}}})
        )
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        assert input_requests(await first) == {"name": {"method": ELICIT, "params": FORM}}
        assert not push.is_answered


async def test_push_arriving_while_held_is_asked_in_the_next_round() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        late = held.call.push(SAMPLE, SAMPLING_PARAMS, key="sum")
        again = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert input_requests(again) == {"sum": {"method": SAMPLE, "params": SAMPLING_PARAMS}}
        assert await held.push.answered() == {"result": accepted("Ada")}
        assert not late.is_answered


async def test_push_on_the_get_stream_belongs_to_the_call_holding_the_session() -> None:
    async with scripted_bridge() as bridge:
        request = bridge.request()
        first = bridge.start(request)
        call = await bridge.upstream.next_call()
        push = call.push(ROOTS, key="roots", on_get=True)
        reply = await first
        assert input_requests(reply) == {"roots": {"method": ROOTS, "params": {}}}
        retry = bridge.start(bridge.retry_of(request, reply, {"roots": ROOTS_ANSWER}))
        assert await push.answered() == {"result": ROOTS_ANSWER}
        call.finish(text_result("rooted"))
        assert result_text(await retry) == "rooted"


async def test_a_push_the_client_did_not_declare_is_refused_upstream_and_the_call_goes_on() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request(capabilities={"elicitation": {"form": {}}}))
        call = await bridge.upstream.next_call()
        push = call.push(SAMPLE, SAMPLING_PARAMS)
        assert await push.answered() == {
            "error": {
                "code": LEGACY_SAMPLING_REJECTED,
                "message": "Client does not support sampling",
            }
        }
        call.finish(text_result("without sampling"))
        assert result_text(await first) == "without sampling"
        assert bridge.engine.registry.rounds_total == 0


async def test_a_call_without_push_capabilities_shares_a_session_and_refuses_pushes() -> None:
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request(capabilities={}))
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS)
        assert await push.answered() == {
            "error": {
                "code": INVALID_PARAMS,
                "message": "Client does not support elicitation mode 'form'",
            }
        }
        call.finish(text_result("alone"))
        assert result_text(await first) == "alone"
        assert bridge.upstream.sessions[0].client_capabilities == {}


async def test_a_withdrawn_push_is_not_asked() -> None:
    async with scripted_bridge() as bridge:
        bridge.learned(2)
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        withdrawn = call.push(ELICIT, ELICIT_PARAMS, key="name")
        call.notify("notifications/cancelled", {"requestId": withdrawn.push_id})
        call.push(ROOTS, key="roots")
        call.push(SAMPLE, SAMPLING_PARAMS, key="sum")
        assert input_requests(await first) == {
            "roots": {"method": ROOTS, "params": {}},
            "sum": {"method": SAMPLE, "params": SAMPLING_PARAMS},
        }
        assert not withdrawn.is_answered


async def test_an_invalid_answer_is_an_error_and_the_held_call_stays_usable() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        bad = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": {"action": "maybe"}})
        )
        assert error_of(bad)["code"] == INVALID_PARAMS
        assert error_of(bad)["data"] == {"inputKey": "name"}
        assert not held.push.is_answered
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish(text_result("fixed"))
        assert result_text(await retry) == "fixed"


async def test_a_stale_round_is_refused_and_the_current_round_stays_usable() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        held.call.push(ROOTS, key="roots")
        round_two = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        stale = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Eve")})
        )
        assert error_of(stale) == {"code": INVALID_PARAMS, "message": USED_REQUEST_STATE_MESSAGE}
        assert rejections(bridge, "stale_round") == 1
        last = bridge.start(bridge.retry_of(held.request, round_two, {"roots": ROOTS_ANSWER}))
        held.call.finish(text_result("round two"))
        assert result_text(await last) == "round two"
        assert bridge.upstream.sessions[0].answers() == [
            (held.push.push_id, {"result": accepted("Ada")}),
            (held.push.push_id + 1, {"result": ROOTS_ANSWER}),
        ]


async def test_another_principal_cannot_resume_a_held_call() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        stolen = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Eve")}, principal="bob")
        )
        assert error_of(stolen) == {
            "code": INVALID_PARAMS,
            "message": INVALID_REQUEST_STATE_MESSAGE,
        }
        assert rejections(bridge, "other_principal") == 1
        assert not held.push.is_answered
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish(text_result("mine"))
        assert result_text(await retry) == "mine"


async def test_progress_reaches_the_attempt_under_the_clients_token() -> None:
    async with scripted_bridge() as bridge:
        sink = RecordingSink()
        request = bridge.request(
            extra={"_meta": {**bridge.request().params["_meta"], "progressToken": "p-7"}}
        )
        first = bridge.start(request, sink)
        call = await bridge.upstream.next_call()
        upstream_token = call.params["_meta"]["progressToken"]
        call.notify(
            "notifications/progress", {"progressToken": upstream_token, "progress": 1, "total": 2}
        )
        call.notify("notifications/progress", {"progressToken": "someone-else", "progress": 1})
        call.finish(text_result("progressed"))
        assert result_text(await first) == "progressed"
        assert sink.sent == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "p-7", "progress": 1, "total": 2},
            }
        ]


async def test_more_rounds_than_allowed_ends_the_call_and_refuses_the_push() -> None:
    async with scripted_bridge(held={"max_rounds": 1}) as bridge:
        held = await hold(bridge)
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        second = held.call.push(ELICIT, {**ELICIT_PARAMS, "message": "Again?"}, key="again")
        error = error_of(await retry)
        assert error["data"] == {"source": "mrtr-bridge", "limit": "held.max_rounds"}
        assert await second.answered() == {"result": {"action": "cancel"}}
        assert await held.call.cancellation() == "too many input rounds"
