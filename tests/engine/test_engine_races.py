"""Scripted conversations for the races the integration suite found, each pinned by name.

The real engine, pool and held-call registry run against `FakeUpstream`; each test orders the
client's requests and the server's moves exactly, so a race that took load and luck to meet end to
end is met here every time. Both ends are asserted: the client's response and the server's inbox.
"""

from __future__ import annotations

import asyncio

from engine_harness import (
    ELICIT_PARAMS,
    accepted,
    error_of,
    fault_of,
    hold,
    input_requests,
    rejections,
    result_text,
    scripted_bridge,
    text_result,
)

from translators.protocol.eras import ELICIT, ROOTS
from translators.wire.errors import (
    EXPIRED_REQUEST_STATE_MESSAGE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    USED_REQUEST_STATE_MESSAGE,
)

USED_STATE = {"code": INVALID_PARAMS, "message": USED_REQUEST_STATE_MESSAGE}
EXPIRED_STATE = {"code": INVALID_PARAMS, "message": EXPIRED_REQUEST_STATE_MESSAGE}
CANCELLED_ELICITATION = {"result": {"action": "cancel"}}


async def test_doubled_retry_meeting_a_finishing_call_is_rejected_not_left_waiting() -> None:
    """The second copy of a retry claims the call after its upstream finished, before the registry
    dropped it: it is refused at once as already used (the bug left it waiting until the client gave
    up)."""
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        retry = bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        winner = bridge.start(retry)
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish(text_result("once"))
        # Scheduled now, the copy runs right after the driver learns of the result, before it leaves
        # the registry (asyncio runs ready callbacks in order).
        doubled = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert error_of(await doubled) == USED_STATE
        assert rejections(bridge, "already_used") == 1
        assert result_text(await winner) == "once"
        assert bridge.upstream.sessions[0].answers() == [
            (held.push.push_id, {"result": accepted("Ada")})
        ]


async def test_concurrent_identical_retries_exactly_one_proceeds() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        retries = [
            bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
            for _ in range(2)
        ]
        assert await held.push.answered() == {"result": accepted("Ada")}
        loser = await retries[1]
        assert error_of(loser) == USED_STATE
        assert rejections(bridge, "not_waiting") == 1
        held.call.finish(text_result("exactly once"))
        assert result_text(await retries[0]) == "exactly once"
        assert bridge.upstream.sessions[0].answers() == [
            (held.push.push_id, {"result": accepted("Ada")})
        ]


async def test_retry_after_the_call_finished_and_was_dropped_is_refused_as_already_used() -> None:
    """A retry with a state its call already took is told so, not given the fixed message."""
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        await held.push.answered()
        held.call.finish(text_result("gone"))
        assert result_text(await retry) == "gone"
        await bridge.settled()
        late = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert error_of(late) == USED_STATE
        assert rejections(bridge, "already_used") == 1


async def test_early_finish_while_waiting_for_the_client_answers_the_retry() -> None:
    """The server finished (e.g. timed its push out) while the call was held: the retry gets that
    outcome and its answers are not sent to a call that is over."""
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        held.call.notify("notifications/cancelled", {"requestId": held.push.push_id})
        held.call.finish(text_result("gave up waiting"))
        retry = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert result_text(retry) == "gave up waiting"
        session = bridge.upstream.sessions[0]
        assert session.received == [("request", 1, "tools/call")]
        assert session.is_alive


async def test_early_finish_while_collecting_answers_the_first_attempt() -> None:
    async with scripted_bridge() as bridge:
        bridge.learned(2)  # one push of two: the batch stays open
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        call.finish(text_result("never mind"))
        assert result_text(await first) == "never mind"
        assert not push.is_answered
        assert bridge.engine.registry.rounds_total == 0


async def test_cancel_during_collect_refuses_the_push_and_cancels_upstream() -> None:
    async with scripted_bridge() as bridge:
        bridge.learned(2)  # one push of two: the batch stays open
        first = bridge.start(bridge.request())
        call = await bridge.upstream.next_call()
        push = call.push(ELICIT, ELICIT_PARAMS, key="name")
        await asyncio.sleep(0)
        first.cancel()
        assert await push.answered() == CANCELLED_ELICITATION
        assert await call.cancellation() == "client disconnected"
        session = bridge.upstream.sessions[0]
        await session.wait_closed()  # a cancelled call's own session is discarded, never reused
        assert session.received == [
            ("request", 1, "tools/call"),
            ("answer", push.push_id, CANCELLED_ELICITATION),
            ("cancel", 1, "client disconnected"),
            ("close", None, None),
        ]
        assert (
            bridge.engine.metrics.sample(
                "mrtr_bridge_requests_total", method="tools/call", outcome="cancelled"
            )
            == 1
        )


async def test_client_disconnect_during_a_retry_round_cancels_upstream() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        retry.cancel()
        assert await held.call.cancellation() == "client disconnected"
        await bridge.upstream.sessions[0].wait_closed()
        await bridge.settled()


async def test_held_call_expiry_refuses_the_push_cancels_upstream_and_refuses_the_retry() -> None:
    async with scripted_bridge(held={"ttl_s": 0.05}) as bridge:
        held = await hold(bridge)
        assert await held.push.answered() == CANCELLED_ELICITATION
        assert await held.call.cancellation() == "held call expired"
        late = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert error_of(late) == EXPIRED_STATE
        assert rejections(bridge, "expired") == 1
        assert bridge.upstream.sessions[0].cancellations() == [(1, "held call expired")]


async def test_held_expiry_does_not_cut_a_retry_in_progress() -> None:
    """The held deadline stops once a retry attaches: only the attempt deadline counts from then."""
    async with scripted_bridge(held={"ttl_s": 1.0}) as bridge:
        held = await hold(bridge)
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish_after(1.5, text_result("in time"))  # a slow server, past the held deadline
        assert result_text(await retry) == "in time"
        assert not held.call.cancelled.is_set()


async def test_attempt_deadline_during_a_retry_times_out_and_cancels_upstream() -> None:
    async with scripted_bridge(front={"request_timeout_s": 0.05}) as bridge:
        held = await hold(bridge)
        reply = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert fault_of(reply) == {
            "code": INTERNAL_ERROR,
            "data": {"source": "mrtr-bridge"},
            "message": "The upstream call did not finish within 0.05 s",
        }
        assert await held.call.cancellation() == "request timed out"
        assert bridge.upstream.sessions[0].answers() == [
            (held.push.push_id, {"result": accepted("Ada")})
        ]


async def test_upstream_death_while_held_answers_the_retry_with_why() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        bridge.upstream.sessions[0].die("exited with code 3")
        retry = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert fault_of(retry) == {
            "code": INTERNAL_ERROR,
            "data": {"source": "mrtr-bridge"},
            "message": "The upstream session was lost: exited with code 3",
        }
        assert bridge.upstream.sessions[0].answers() == []
        after = bridge.start(bridge.request("echo"))
        call = await bridge.upstream.next_call()
        assert call.session.number == 2  # the dead session is never handed out again
        call.finish(text_result("fresh"))
        assert result_text(await after) == "fresh"


async def test_answer_that_fails_because_the_upstream_died_reports_why() -> None:
    async with scripted_bridge() as bridge:
        held = await hold(bridge)
        bridge.upstream.sessions[0].answers_fail = "exited with code 7"
        retry = await bridge.send(
            bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")})
        )
        assert fault_of(retry) == {
            "code": INTERNAL_ERROR,
            "data": {"source": "mrtr-bridge"},
            "message": "The upstream session was lost: exited with code 7",
        }
        await bridge.settled()


async def test_late_push_after_cancel_never_reaches_the_next_lease() -> None:
    """A cancelled call's own session is discarded, so what its server says late reaches no one."""
    async with scripted_bridge() as bridge:
        first = bridge.start(bridge.request())
        old = await bridge.upstream.next_call()
        first.cancel()
        assert await old.cancellation() == "client disconnected"
        await old.session.wait_closed()
        second = bridge.request(arguments={"n": 2})
        task = bridge.start(second)
        new = await bridge.upstream.next_call()
        late = old.push(ROOTS, key="late", on_get=True)  # the cancelled call's server speaks again
        new.push(ELICIT, ELICIT_PARAMS, key="new")
        assert list(input_requests(await task)) == ["new"]
        assert (old.session.number, new.session.number) == (1, 2)
        assert not late.is_answered
        assert old.session.received == [
            ("request", 1, "tools/call"),
            ("cancel", 1, "client disconnected"),
            ("close", None, None),
        ]
        assert new.session.received == [("request", 2, "tools/call")]


async def test_a_get_stream_push_as_a_plain_call_ends_is_answered_by_policy() -> None:
    """The server asks outside any call the moment a plain call's result arrives, before the
    call's lease is back in the pool (a roots-keeping server asking again between calls: met over
    stdio in CI, where it left the server waiting for good): the push is answered by policy, as
    on an idle session, not dropped with the ended call."""
    async with scripted_bridge(upstream={"unowned_roots": ["file:///srv"]}) as bridge:
        task = bridge.start(bridge.request("echo"))
        call = await bridge.upstream.next_call()
        call.finish(text_result("done"))
        roots = call.session.push_on_get(ROOTS)
        assert result_text(await task) == "done"
        assert await roots.answered() == {"result": {"roots": [{"uri": "file:///srv"}]}}


async def test_a_get_stream_push_as_a_held_call_ends_is_answered_by_policy() -> None:
    """The same for a held call: a push that comes once its upstream call ended (DONE) is no
    longer the call's, and gets the answer an idle session's push gets."""
    async with scripted_bridge(upstream={"unowned_roots": ["file:///srv"]}) as bridge:
        held = await hold(bridge)
        retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
        assert await held.push.answered() == {"result": accepted("Ada")}
        held.call.finish(text_result("booked"))
        roots = held.call.session.push_on_get(ROOTS)
        assert result_text(await retry) == "booked"
        assert await roots.answered() == {"result": {"roots": [{"uri": "file:///srv"}]}}
