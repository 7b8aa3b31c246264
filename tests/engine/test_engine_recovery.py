"""Scripted recovery of lost held calls (proxy/calls/recovery.py): a restart (a second bridge with
the
same key), an expiry, the policies, the size cap and the refusals, against the in-memory upstream.

Pushes carry no key hint here: their input keys derive from their content, as with real servers, so
a re-executed call asking the same question gets the same key.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from engine_harness import (
    ScriptedBridge,
    error_of,
    input_requests,
    rejections,
    result_text,
    scripted_bridge,
    text_result,
)
from fake_upstream import WAIT_S, FakeCall, FakeUpstream, Push

from translators.held.request_state import MAX_PLAIN_TOKEN_LENGTH
from translators.protocol.eras import ELICIT, PROMPTS_GET
from translators.wire.errors import (
    EXPIRED_REQUEST_STATE_MESSAGE,
    INVALID_PARAMS,
    INVALID_REQUEST_STATE_MESSAGE,
    USED_REQUEST_STATE_MESSAGE,
)

KEY = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()
REFUSED_STATE = {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE}
USED_STATE = {"code": INVALID_PARAMS, "message": USED_REQUEST_STATE_MESSAGE}
EXPIRED_STATE = {"code": INVALID_PARAMS, "message": EXPIRED_REQUEST_STATE_MESSAGE}
SCHEMA = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}
NAME_Q = {"message": "Your name?", "requestedSchema": SCHEMA}
COLOR_Q = {"message": "Your color?", "requestedSchema": SCHEMA}
IDEMPOTENT = {
    "name": "survey",
    "inputSchema": {"type": "object"},
    "annotations": {"idempotentHint": True},
}
READ_ONLY = {
    "name": "peek",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True},
}
PLAIN = {
    "name": "order",
    "inputSchema": {"type": "object"},
    "annotations": {"idempotentHint": False},
}


def answer(value: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"v": value}}


def upstream() -> FakeUpstream:
    fake = FakeUpstream()
    fake.auto["tools/list"] = {"tools": [IDEMPOTENT, READ_ONLY, PLAIN]}
    return fake


@asynccontextmanager
async def bridge(fake: FakeUpstream, **sections: dict[str, Any]) -> AsyncIterator[ScriptedBridge]:
    """A bridge with the persistent key (a restart is a second one); `sections` override
    settings."""
    held = {"keys": {"k1": KEY}, **sections.pop("held", {})}
    async with scripted_bridge(fake, held=held, **sections) as scripted:
        yield scripted


async def round_of(
    scripted: ScriptedBridge,
    reply_task: asyncio.Task[dict[str, Any]],
    call: FakeCall,
    question: dict[str, Any],
) -> tuple[Push, dict[str, Any], str]:
    """`call` pushes `question`; the reply is its round: (push, reply, the one input key)."""
    push = call.push(ELICIT, question)
    reply = await reply_task
    (key,) = input_requests(reply)
    return push, reply, key


# A held call's ttl that expires it soon after its second round, yet long enough for both rounds
# to be reached first on a loaded machine (0.05 s was not, beside other pytest workers: the call
# expired in its first round).
EXPIRES_S = 0.5


async def held_at_second_round(
    scripted: ScriptedBridge, tool: str
) -> tuple[Any, dict[str, Any], str, str]:
    """A call answered once and waiting for its second answer: (request, reply, key 1, key 2)."""
    request = scripted.request(tool)
    first = scripted.start(request)
    call = await scripted.upstream.next_call()
    push1, reply1, key1 = await round_of(scripted, first, call, NAME_Q)
    retry = scripted.start(scripted.retry_of(request, reply1, {key1: answer("Ada")}))
    assert await push1.answered() == {"result": answer("Ada")}
    _, reply2, key2 = await round_of(scripted, retry, call, COLOR_Q)
    return request, reply2, key1, key2


def recovered(scripted: ScriptedBridge, cause: str) -> float:
    return scripted.engine.metrics.sample("mrtr_bridge_recovered_calls_total", cause=cause)


def refusals(scripted: ScriptedBridge, reason: str) -> float:
    return scripted.engine.metrics.sample("mrtr_bridge_recovery_refusals_total", reason=reason)


async def test_after_a_restart_an_idempotent_call_runs_again_with_the_earlier_answers() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "survey")
    async with bridge(fake) as after:
        retry = after.start(after.retry_of(request, reply2, {key2: answer("blue")}))
        again = await after.upstream.next_call()
        # from the sealed answers
        assert await again.push(ELICIT, NAME_Q).answered() == {"result": answer("Ada")}
        assert await again.push(ELICIT, COLOR_Q).answered() == {"result": answer("blue")}
        again.finish(text_result("Ada likes blue"))
        assert result_text(await retry) == "Ada likes blue"
        assert (recovered(after, "lost"), after.engine.registry.rounds_total) == (1, 0)


async def test_after_a_restart_an_unannotated_call_is_refused_and_not_run_again() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "order")
    async with bridge(fake) as after:
        assert (
            error_of(await after.send(after.retry_of(request, reply2, {key2: answer("blue")})))
            == REFUSED_STATE
        )
        assert fake.no_call_waiting()
        assert (
            refusals(after, "not_annotated_idempotent"),
            rejections(after, "unknown_held_call"),
        ) == (1, 1)
        assert recovered(after, "lost") == 0
    # ran once
    assert [entry[:2] for entry in fake.all_received() if entry[3] == "tools/call"] == [
        (1, "request")
    ]


async def test_an_expired_call_runs_again_and_a_changed_question_is_asked_again() -> None:
    fake = upstream()
    async with bridge(fake, held={"ttl_s": EXPIRES_S}) as scripted:
        request, reply2, key1, key2 = await held_at_second_round(scripted, "peek")
        await scripted.settled()  # the held call expired and was abandoned upstream
        retry = scripted.start(scripted.retry_of(request, reply2, {key2: answer("blue")}))
        again = await scripted.upstream.next_call()
        changed = {**NAME_Q, "message": "Your full name?"}
        push, reply3, key3 = await round_of(scripted, retry, again, changed)
        assert (
            key3 not in (key1, key2)
            and input_requests(reply3)[key3]["params"]["message"] == "Your full name?"
        )
        last = scripted.start(scripted.retry_of(request, reply3, {key3: answer("Ada L")}))
        assert await push.answered() == {"result": answer("Ada L")}
        assert await again.push(ELICIT, COLOR_Q).answered() == {"result": answer("blue")}
        again.finish(text_result("done"))
        assert result_text(await last) == "done"
        assert recovered(scripted, "expired") == 1


async def test_allowlist_recovers_only_what_it_lists() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        listed = await held_at_second_round(before, "order")
        unlisted = await held_at_second_round(before, "survey")
    async with bridge(fake, recovery={"reexecute": "allowlist", "tools": ["ord*"]}) as after:
        request, reply2, _, key2 = unlisted
        assert (
            error_of(await after.send(after.retry_of(request, reply2, {key2: answer("x")})))
            == REFUSED_STATE
        )
        assert refusals(after, "not_allowlisted") == 1 and fake.no_call_waiting()
        request, reply2, _, key2 = listed
        retry = after.start(after.retry_of(request, reply2, {key2: answer("red")}))
        again = await after.upstream.next_call()
        assert await again.push(ELICIT, NAME_Q).answered() == {"result": answer("Ada")}
        assert await again.push(ELICIT, COLOR_Q).answered() == {"result": answer("red")}
        again.finish(text_result("ok"))
        assert result_text(await retry) == "ok"


async def test_off_and_another_principal_and_a_spent_state_are_refused() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "survey")
    async with bridge(fake, recovery={"reexecute": "off"}) as off:
        assert (
            error_of(await off.send(off.retry_of(request, reply2, {key2: answer("x")})))
            == REFUSED_STATE
        )
        assert refusals(off, "off") == 1
    async with bridge(fake) as after:
        stolen = after.retry_of(request, reply2, {key2: answer("x")}, principal="mallory")
        assert error_of(await after.send(stolen)) == REFUSED_STATE
        assert rejections(after, "other_principal") == 1 and fake.no_call_waiting()
        retry = after.start(after.retry_of(request, reply2, {key2: answer("x")}))
        again = await after.upstream.next_call()
        again.push(ELICIT, NAME_Q)
        again.push(ELICIT, COLOR_Q)
        again.finish(text_result("once"))
        assert result_text(await retry) == "once"
        await after.settled()
        assert (
            error_of(await after.send(after.retry_of(request, reply2, {key2: answer("x")})))
            == USED_STATE
        )
        # spent before its (recovered) call ended: refused as already used, before any recovery
        assert (rejections(after, "already_used"), refusals(after, "already_used")) == (1, 0)
        assert fake.no_call_waiting()


async def test_answers_over_the_cap_are_not_carried_and_recovery_is_not_offered() -> None:
    fake = upstream()
    async with bridge(fake, recovery={"max_answers_bytes": 8}) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "survey")
    async with bridge(fake) as after:
        assert (
            error_of(await after.send(after.retry_of(request, reply2, {key2: answer("x")})))
            == REFUSED_STATE
        )
        assert refusals(after, "answers_not_carried") == 1 and fake.no_call_waiting()


async def test_a_first_round_state_is_as_long_with_recovery_as_without() -> None:
    lengths = []
    for mode in ("off", "annotated"):
        async with bridge(upstream(), recovery={"reexecute": mode}) as scripted:
            first = scripted.start(scripted.request("survey"))
            _, reply, _ = await round_of(
                scripted, first, await scripted.upstream.next_call(), NAME_Q
            )
            lengths.append(len(reply["result"]["requestState"]))
    assert lengths[0] == lengths[1] <= MAX_PLAIN_TOKEN_LENGTH


async def test_a_prompt_recovers_under_annotated_and_only_when_listed_under_allowlist() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        held = []
        for _ in range(2):
            request = before.request("greet", method=PROMPTS_GET)
            first = before.start(request)
            _, reply, key = await round_of(
                before, first, await before.upstream.next_call(PROMPTS_GET), NAME_Q
            )
            held.append((request, reply, key))
    prompt_result = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi Ada"}}]}
    async with bridge(fake) as after:
        request, reply, key = held[0]
        retry = after.start(after.retry_of(request, reply, {key: answer("Ada")}))
        again = await after.upstream.next_call(PROMPTS_GET)
        assert await again.push(ELICIT, NAME_Q).answered() == {"result": answer("Ada")}
        again.finish(prompt_result)
        assert (await retry)["result"]["messages"] == prompt_result["messages"]
        assert [
            e for e in fake.all_received() if e[3] == "tools/list"
        ] == []  # no annotations needed
    async with bridge(fake, recovery={"reexecute": "allowlist", "tools": ["greet"]}) as strict:
        request, reply, key = held[1]
        assert (
            error_of(await strict.send(strict.retry_of(request, reply, {key: answer("Ada")})))
            == REFUSED_STATE
        )
        assert refusals(strict, "not_allowlisted") == 1 and fake.no_call_waiting()


async def test_another_replicas_state_recovers_only_when_its_owner_is_unreachable() -> None:
    fake = upstream()
    async with bridge(fake, held={"replica_id": "r1"}) as owner:
        request, reply2, _, key2 = await held_at_second_round(owner, "survey")
    async with bridge(fake, held={"replica_id": "r2"}) as other:
        retry = other.retry_of(request, reply2, {key2: answer("blue")})
        # no forwarding: refused as before
        assert error_of(await other.send(retry)) == REFUSED_STATE
        assert rejections(other, "other_replica") == 1 and fake.no_call_waiting()
        result = other.start(dataclasses.replace(retry, owner_unreachable=True))
        again = await other.upstream.next_call()
        assert await again.push(ELICIT, NAME_Q).answered() == {"result": answer("Ada")}
        assert await again.push(ELICIT, COLOR_Q).answered() == {"result": answer("blue")}
        again.finish(text_result("Ada likes blue"))
        assert result_text(await result) == "Ada likes blue"
        assert recovered(other, "owner_unreachable") == 1


async def test_a_state_sealed_with_recovery_off_is_refused_naming_off() -> None:
    fake = upstream()
    async with bridge(fake, recovery={"reexecute": "off"}, held={"ttl_s": EXPIRES_S}) as scripted:
        request, reply2, _, key2 = await held_at_second_round(scripted, "survey")
        await scripted.settled()
        assert (
            error_of(await scripted.send(scripted.retry_of(request, reply2, {key2: answer("x")})))
            == EXPIRED_STATE
        )
        assert (refusals(scripted, "off"), rejections(scripted, "expired")) == (1, 1)
        assert fake.no_call_waiting()


async def test_concurrent_retries_of_one_lost_state_recover_exactly_once() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "survey")
    del fake.auto["tools/list"]  # the policy's look-up of annotations waits until answered below
    async with bridge(fake) as after:
        retries = [
            after.start(after.retry_of(request, reply2, {key2: answer("blue")})) for _ in range(20)
        ]
        listing = await after.upstream.next_call("tools/list")
        async with asyncio.timeout(WAIT_S):  # the 19 others are refused while the first waits
            while sum(retry.done() for retry in retries) < 19:
                await asyncio.sleep(0.001)
        listing.finish({"tools": [IDEMPOTENT, READ_ONLY, PLAIN]})
        again = await after.upstream.next_call()
        assert await again.push(ELICIT, NAME_Q).answered() == {"result": answer("Ada")}
        assert await again.push(ELICIT, COLOR_Q).answered() == {"result": answer("blue")}
        again.finish(text_result("Ada likes blue"))
        replies = await asyncio.gather(*retries)
        completed = [reply for reply in replies if "result" in reply]
        assert [result_text(reply) for reply in completed] == ["Ada likes blue"]
        assert [error_of(reply) for reply in replies if "error" in reply] == [USED_STATE] * 19
        # the first claimed the state before any await: the others find it spent
        assert (recovered(after, "lost"), rejections(after, "already_used")) == (1, 19)
        await after.settled()
        assert fake.no_call_waiting()
    # the first run and exactly one re-execution
    assert [entry[:2] for entry in fake.all_received() if entry[3] == "tools/call"] == [
        (1, "request"),
        (2, "request"),
    ]
    assert len([entry for entry in fake.all_received() if entry[3] == "tools/list"]) == 1


async def test_a_recovery_refused_before_it_ran_leaves_its_state_usable() -> None:
    fake = upstream()
    async with bridge(fake) as before:
        request, reply2, _, key2 = await held_at_second_round(before, "order")
    async with bridge(fake) as after:
        for _ in range(2):  # refused by the policy both times, never as already used
            assert (
                error_of(await after.send(after.retry_of(request, reply2, {key2: answer("x")})))
                == REFUSED_STATE
            )
        assert (refusals(after, "not_annotated_idempotent"), refusals(after, "already_used")) == (
            2,
            0,
        )
