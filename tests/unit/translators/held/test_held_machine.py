"""The held-call state machine as scripts: events in, exact actions out, state after
(docs/decisions.md § 4)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from schema_check import assert_valid

from translators.held import machine as held_call
from translators.held.events import (
    Action,
    AnswerPush,
    BatchWindowClosed,
    CancelTimer,
    CancelUpstreamCall,
    ClientDisconnected,
    ClientRetried,
    DeadlinePassed,
    Event,
    NoteBatchSize,
    ReissueUpstreamCall,
    ReleaseUpstream,
    ReplyError,
    ReplyInputRequired,
    ReplyResult,
    ReportBug,
    StartTimer,
    UpstreamErrorArrived,
    UpstreamPushArrived,
    UpstreamPushCancelled,
    UpstreamResultArrived,
)
from translators.held.machine import EVENT_TYPES, HeldCall, HeldCallState, Limits
from translators.protocol.eras import ELICIT, ROOTS, SAMPLE
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    input_key,
    legacy_push_to_input_request,
    refusal,
)
from translators.protocol.results import input_required_result, legacy_error_to_modern
from translators.wire.errors import (
    INTERNAL_ERROR,
    LEGACY_URL_ELICITATION_REQUIRED,
    ClientLimitExceeded,
    InvalidParams,
    InvalidRequestState,
    MissingClientCapability,
    RejectionReason,
    ShuttingDown,
    UpstreamFault,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject

S = HeldCallState
QUIET, BATCH_MAX, ATTEMPT, HELD = 0.25, 1.0, 30.0, 300.0
LIMITS = Limits(
    batch_quiet_s=QUIET,
    batch_max_s=BATCH_MAX,
    attempt_timeout_s=ATTEMPT,
    held_ttl_s=HELD,
    max_rounds=3,
)
CAPABILITIES: JsonObject = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
ACCEPT: JsonObject = {"action": "accept", "content": {"ok": True}}
SAMPLED: JsonObject = {
    "role": "assistant",
    "content": {"type": "text", "text": "done"},
    "model": "m",
}
RESULT: JsonObject = {"content": [{"type": "text", "text": "finished"}]}
UPSTREAM_ERROR: JsonObject = {"code": INTERNAL_ERROR, "message": "Tool crashed"}
URL = "https://legacy.example/connect"


# ---- the playbook -------------------------------------------------------------------------------


def _arrived(
    push_id: int, method: str = ELICIT, message: str = "Confirm?", taken: tuple[str, ...] = ()
) -> PendingPush:
    """A push as the driver builds it: translated for the request's capabilities, keyed by
    content."""
    params: JsonObject = (
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": message}}],
            "maxTokens": 5,
        }
        if method == SAMPLE
        else {}
    )
    if method == ELICIT:
        params = {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {}},
        }
    push = {"jsonrpc": "2.0", "id": push_id, "method": method, "params": params}
    request = legacy_push_to_input_request(push, CAPABILITIES)
    assert isinstance(request, dict)
    return PendingPush(input_key(push, set(taken)), push_id, method, request)


def _comparable(action: Action) -> Any:
    """Exceptions compare by identity: compare a fault by its class, code, data and log reason
    instead."""
    if isinstance(action, ReplyError) and action.fault is not None:
        fault = action.fault
        return (
            ReplyError,
            action.attempt,
            action.error,
            type(fault),
            fault.code,
            fault.data,
            getattr(fault, "reason", None),
        )
    return action


def _validate_on_the_wire(actions: list[Action]) -> None:
    for action in actions:
        if isinstance(action, ReplyInputRequired):
            assert action.input_requests
            assert_valid(
                input_required_result(action.input_requests, "v1.state", server_info=None),
                "InputRequiredResult",
                "modern",
            )
        elif isinstance(action, AnswerPush):
            answer = action.answer
            body = {"result": answer.result} if answer.error is None else {"error": answer.error}
            envelope = "JSONRPCResultResponse" if answer.error is None else "JSONRPCErrorResponse"
            assert_valid({"jsonrpc": "2.0", "id": action.push_id, **body}, envelope, "legacy")
        elif isinstance(action, ReplyError):
            error = (
                action.fault.to_error()
                if action.fault is not None
                else legacy_error_to_modern(action.error or {})
            )
            assert_valid(
                {"jsonrpc": "2.0", "id": "c-1", "error": error}, "JSONRPCErrorResponse", "modern"
            )


def play(
    call: HeldCall, at: float, event: Event, expected: list[Action], state: HeldCallState
) -> list[Action]:
    """Feed one event at time `at`; assert the exact actions and the state after."""
    actions = call.handle(event, at)
    assert [_comparable(a) for a in actions] == [_comparable(a) for a in expected]
    assert call.state is state
    _validate_on_the_wire(actions)
    return actions


def _finished(discard: bool = False) -> list[Action]:
    return [
        CancelTimer("batch"),
        CancelTimer("deadline"),
        ReleaseUpstream(discard=discard, final=True),
    ]


def _asked(attempt: int, round_: int, pushes: list[PendingPush], token: int) -> list[Action]:
    requests = {push.key: push.input_request for push in pushes}
    return [
        CancelTimer("batch"),
        ReplyInputRequired(attempt, round_, requests),
        StartTimer("deadline", HELD, token),
    ]


def _answered(push: PendingPush, value: JsonObject) -> AnswerPush:
    assert push.push_id is not None
    return AnswerPush(push.push_id, PushAnswer(result=value))


def _waiting(*pushes: PendingPush, limits: Limits = LIMITS) -> HeldCall:
    """A call that batched `pushes` into round 1 and waits for the client; its held deadline is
    token 2."""
    call = HeldCall(limits, attempt=1)
    assert call.start(0.0) == [StartTimer("deadline", ATTEMPT, 1)]
    for n, push in enumerate(pushes):
        play(
            call, 0.0, UpstreamPushArrived(push), [StartTimer("batch", QUIET, 1 + n)], S.COLLECTING
        )
    asked = [NoteBatchSize(1, len(pushes)), *_asked(1, 1, list(pushes), 2)]
    play(call, QUIET, BatchWindowClosed(len(pushes)), asked, S.WAITING_CLIENT)
    return call


P101 = _arrived(101)
P102 = _arrived(102, SAMPLE, "Summarize")
P103 = _arrived(103, ROOTS)


# ---- every (state, event) pair -------------------------------------------------------------------

NEXT_STATE: dict[tuple[HeldCallState, type], HeldCallState] = {
    **{
        (S.RUNNING, e): n
        for e, n in zip(
            EVENT_TYPES,
            [S.COLLECTING, S.RUNNING, S.DONE, S.DONE, S.RUNNING, S.RUNNING, S.DONE, S.DONE],
            strict=True,
        )
    },
    **{
        (S.COLLECTING, e): n
        for e, n in zip(
            EVENT_TYPES,
            [
                S.COLLECTING,
                S.RUNNING,
                S.DONE,
                S.DONE,
                S.WAITING_CLIENT,
                S.COLLECTING,
                S.DONE,
                S.DONE,
            ],
            strict=True,
        )
    },
    **{
        (S.WAITING_CLIENT, e): n
        for e, n in zip(
            EVENT_TYPES, [S.WAITING_CLIENT] * 5 + [S.RUNNING, S.WAITING_CLIENT, S.DONE], strict=True
        )
    },
    **{(S.DONE, e): S.DONE for e in EVENT_TYPES},
}


def _in_state(state: HeldCallState) -> tuple[HeldCall, dict[str, int]]:
    """A call brought into `state` by real events, and the token of each timer's latest start."""
    if state is S.WAITING_CLIENT:
        return _waiting(P101), {"batch": 1, "deadline": 2}
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    if state is S.COLLECTING:
        call.handle(UpstreamPushArrived(P101), 0.0)
        return call, {"batch": 1, "deadline": 1}
    if state is S.DONE:
        call.handle(UpstreamResultArrived(RESULT), 1.0)
    return call, {"batch": 1, "deadline": 1}


def _sample_event(event_type: type, call: HeldCall, tokens: dict[str, int]) -> Event:
    samples: dict[type, Event] = {
        UpstreamPushArrived: UpstreamPushArrived(_arrived(104, message="Another?")),
        UpstreamPushCancelled: UpstreamPushCancelled(101),
        UpstreamResultArrived: UpstreamResultArrived(RESULT),
        UpstreamErrorArrived: UpstreamErrorArrived(error=UPSTREAM_ERROR),
        BatchWindowClosed: BatchWindowClosed(tokens["batch"]),
        ClientRetried: ClientRetried(9, call.round, {P101.key: ACCEPT}),
        ClientDisconnected: ClientDisconnected(call.attempt if call.attempt is not None else 1),
        DeadlinePassed: DeadlinePassed(tokens["deadline"]),
    }
    return samples[event_type]


def test_transition_table_holds_every_pair() -> None:
    """Every (state, event type) pair is in the table, a retry reaching a finished call included."""
    assert set(EVENT_TYPES) == set(Event.__args__)
    assert (
        set(held_call.TRANSITIONS)
        == set(NEXT_STATE)
        == set(itertools.product(HeldCallState, EVENT_TYPES))
    )


def test_a_retry_reaching_a_finished_call_is_answered_not_dropped() -> None:
    """A retry that found the call just before the driver dropped it gets the unknown-call
    rejection."""
    call, _ = _in_state(S.DONE)
    actions = call.handle(ClientRetried(9, call.round, {}), 2.0)
    expected = ReplyError(9, fault=InvalidRequestState(RejectionReason.UNKNOWN_HELD_CALL))
    assert [_comparable(a) for a in actions] == [_comparable(expected)]
    assert call.state is S.DONE


def test_a_pair_missing_from_the_table_reports_a_bug_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table is the whole machine: an event without a transition is a BridgeBug, state
    untouched."""
    table = dict(held_call.TRANSITIONS)
    del table[(S.WAITING_CLIENT, ClientRetried)]
    monkeypatch.setattr(held_call, "TRANSITIONS", table)
    call = _waiting(P101)
    before = (call.state, call.round, call.attempt, dict(call.pending))
    assert call.handle(ClientRetried(2, 1, {}), 3.0) == [
        ReportBug("no transition for ClientRetried in WAITING_CLIENT")
    ]
    assert (call.state, call.round, call.attempt, dict(call.pending)) == before


def test_a_target_the_table_does_not_name_reports_a_bug_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table names where each transition may lead; a handler deciding otherwise is a
    BridgeBug."""
    table = dict(held_call.TRANSITIONS)
    table[(S.WAITING_CLIENT, ClientRetried)] = held_call.Transition(
        table[(S.WAITING_CLIENT, ClientRetried)].handler, frozenset({S.WAITING_CLIENT, S.DONE})
    )
    monkeypatch.setattr(held_call, "TRANSITIONS", table)
    call = _waiting(P101)
    assert call.handle(ClientRetried(2, 1, {P101.key: ACCEPT}), 3.0) == [
        ReportBug("ClientRetried in WAITING_CLIENT led to RUNNING")
    ]
    assert call.state is S.WAITING_CLIENT


def test_the_finished_state_leads_nowhere_else() -> None:
    """Every transition out of DONE names DONE alone; every state is some transition's target."""
    table = held_call.TRANSITIONS
    assert {
        pair for pair, row in table.items() if pair[0] is S.DONE and row.targets != {S.DONE}
    } == set()
    assert set().union(*(row.targets for row in table.values())) == set(HeldCallState)


@pytest.mark.parametrize(
    ("state", "round_", "reason"),
    [
        (S.WAITING_CLIENT, 1, None),
        (S.WAITING_CLIENT, 0, RejectionReason.STALE_ROUND),
        (S.RUNNING, 0, RejectionReason.NOT_WAITING),
        (S.RUNNING, 1, RejectionReason.STALE_ROUND),
        (S.DONE, 0, RejectionReason.UNKNOWN_HELD_CALL),
    ],
)
def test_retry_refusal_is_the_one_check_of_a_retry(
    state: HeldCallState, round_: int, reason: RejectionReason | None
) -> None:
    """The continuation check and the machine ask the same question; the machine answers it."""
    call = _waiting(P101) if state is S.WAITING_CLIENT else _in_state(state)[0]
    assert call.retry_refusal(round_) is reason


@pytest.mark.parametrize(
    ("state", "event_type"),
    list(itertools.product(HeldCallState, EVENT_TYPES)),
    ids=lambda value: getattr(value, "name", getattr(value, "__name__", "")),
)
def test_every_state_event_pair(state: HeldCallState, event_type: type) -> None:
    """Pairs in the table move to the expected state; missing pairs report a bug and change
    nothing."""
    call, tokens = _in_state(state)
    assert call.state is state
    before = (
        call.state,
        call.round,
        call.attempt,
        dict(call.pending),
        call.outcome,
        call.upstream_done,
    )
    actions = call.handle(_sample_event(event_type, call, tokens), 2.0)
    if (state, event_type) in NEXT_STATE:
        assert not any(isinstance(action, ReportBug) for action in actions)
        assert call.state is NEXT_STATE[(state, event_type)]
        assert call.state in held_call.TRANSITIONS[(state, event_type)].targets
        _validate_on_the_wire(actions)
    else:
        assert actions == [ReportBug(f"no transition for {event_type.__name__} in {state.name}")]
        assert (
            call.state,
            call.round,
            call.attempt,
            dict(call.pending),
            call.outcome,
            call.upstream_done,
        ) == before


# ---- scripts: the main path ----------------------------------------------------------------------


def test_single_push_round_trip() -> None:
    """Push -> batch window -> InputRequired -> retry with the answer -> upstream result."""
    call = _waiting(P101)
    assert (call.attempt, call.round) == (None, 1)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT, "unasked": ACCEPT}),
        [_answered(P101, ACCEPT), CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 3)],
        S.RUNNING,
    )
    assert call.attempt == 2 and call.pending == {}
    play(call, 6.0, UpstreamResultArrived(RESULT), [ReplyResult(2, RESULT), *_finished()], S.DONE)
    assert call.attempt is None


def test_two_pushes_are_batched_and_the_quiet_timer_restarts() -> None:
    """A second push inside the window restarts the quiet timer; the stale timer is ignored."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(call, 0.125, UpstreamPushArrived(P102), [StartTimer("batch", QUIET, 2)], S.COLLECTING)
    play(call, 0.25, BatchWindowClosed(1), [], S.COLLECTING)
    asked = [NoteBatchSize(1, 2), *_asked(1, 1, [P101, P102], 2)]
    play(call, 0.375, BatchWindowClosed(2), asked, S.WAITING_CLIENT)


def test_batch_window_is_capped_by_batch_max() -> None:
    """Pushes keep the window open at most `batch_max_s` after the first one."""
    call = HeldCall(dataclasses.replace(LIMITS, batch_max_s=0.5), attempt=1)
    call.start(0.0)
    pushes = [_arrived(200 + n, message=f"Question {n}?") for n in range(5)]
    script = [(0.0, QUIET), (0.125, QUIET), (0.3125, 0.1875), (0.46875, 0.03125), (0.5, 0.0)]
    for n, ((at, delay), push) in enumerate(zip(script, pushes, strict=True)):
        play(call, at, UpstreamPushArrived(push), [StartTimer("batch", delay, 1 + n)], S.COLLECTING)
    asked = [NoteBatchSize(1, 5), *_asked(1, 1, pushes, 2)]
    play(call, 0.5, BatchWindowClosed(5), asked, S.WAITING_CLIENT)


def test_pre_answered_push_is_answered_on_the_spot() -> None:
    """A first attempt that already carries the answer for a push's key answers it with no round
    trip."""
    call = HeldCall(LIMITS, attempt=1, pre_answers={P101.key: ACCEPT})
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [_answered(P101, ACCEPT)], S.RUNNING)
    assert call.pre_answers == {} and call.pending == {}
    again = dataclasses.replace(P101, push_id=111)
    play(call, 0.5, UpstreamPushArrived(again), [StartTimer("batch", QUIET, 1)], S.COLLECTING)


def test_invalid_pre_answer_falls_back_to_asking() -> None:
    """An unusable pre-answer is discarded and the push is asked for normally."""
    call = HeldCall(LIMITS, attempt=1, pre_answers={P101.key: 12345, "other": ACCEPT})
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    assert call.pre_answers == {"other": ACCEPT}
    asked = [NoteBatchSize(1, 1), *_asked(1, 1, [P101], 2)]
    play(call, QUIET, BatchWindowClosed(1), asked, S.WAITING_CLIENT)


def test_missing_answers_start_a_new_round_asking_only_for_them() -> None:
    """Answered pushes go upstream; the rest are asked again in round 2, then the call resumes."""
    call = _waiting(P101, P102)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT}),
        [_answered(P101, ACCEPT), *_asked(2, 2, [P102], 3)],
        S.WAITING_CLIENT,
    )
    play(
        call,
        6.0,
        ClientRetried(3, 1, {P102.key: SAMPLED}),
        [ReplyError(3, fault=InvalidRequestState(RejectionReason.STALE_ROUND))],
        S.WAITING_CLIENT,
    )
    play(
        call,
        7.0,
        ClientRetried(4, 2, {P102.key: SAMPLED}),
        [_answered(P102, SAMPLED), CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 4)],
        S.RUNNING,
    )


def test_push_arriving_while_waiting_is_asked_in_the_next_round() -> None:
    """A push that arrives while no attempt is attached joins the next round, and the round's
    batch is noted as larger."""
    call = _waiting(P101)
    play(call, 1.0, UpstreamPushArrived(P102), [NoteBatchSize(1, 2)], S.WAITING_CLIENT)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT}),
        [_answered(P101, ACCEPT), *_asked(2, 2, [P102], 3)],
        S.WAITING_CLIENT,
    )


@pytest.mark.parametrize("stale_round", [0, 2, -1])
def test_stale_round_is_rejected_without_state_change(stale_round: int) -> None:
    """A retry naming another round is rejected and the call keeps waiting for the right one."""
    call = _waiting(P101)
    play(
        call,
        5.0,
        ClientRetried(2, stale_round, {P101.key: ACCEPT}),
        [ReplyError(2, fault=InvalidRequestState(RejectionReason.STALE_ROUND))],
        S.WAITING_CLIENT,
    )
    assert (call.round, call.attempt, list(call.pending)) == (1, None, [P101.key])


def test_retry_while_running_is_rejected_without_state_change() -> None:
    """A retry reaching a call that has an attempt attached is rejected; the attached attempt is
    kept."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(
        call,
        1.0,
        ClientRetried(2, 0, {}),
        [ReplyError(2, fault=InvalidRequestState(RejectionReason.NOT_WAITING))],
        S.RUNNING,
    )
    play(call, 1.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(
        call,
        1.1,
        ClientRetried(3, 0, {P101.key: ACCEPT}),
        [ReplyError(3, fault=InvalidRequestState(RejectionReason.NOT_WAITING))],
        S.COLLECTING,
    )
    assert call.attempt == 1 and list(call.pending) == [P101.key]


def test_invalid_answer_is_rejected_and_nothing_is_consumed() -> None:
    """One invalid answer rejects the whole retry; a corrected retry of the same round then
    succeeds."""
    call = _waiting(P101, P102)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT, P102.key: 12345}),
        [ReplyError(2, fault=InvalidParams("", {"inputKey": P102.key}))],
        S.WAITING_CLIENT,
    )
    assert (call.round, list(call.pending)) == (1, [P101.key, P102.key])
    play(
        call,
        6.0,
        ClientRetried(3, 1, {P101.key: ACCEPT, P102.key: SAMPLED}),
        [
            _answered(P101, ACCEPT),
            _answered(P102, SAMPLED),
            CancelTimer("deadline"),
            StartTimer("deadline", ATTEMPT, 3),
        ],
        S.RUNNING,
    )


def test_upstream_error_while_running_is_the_final_reply() -> None:
    """An upstream JSON-RPC error or a bridge-side fault ends the call with that error."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(
        call,
        1.0,
        UpstreamErrorArrived(error=UPSTREAM_ERROR),
        [ReplyError(1, error=UPSTREAM_ERROR), *_finished()],
        S.DONE,
    )
    call = HeldCall(LIMITS, attempt=1)
    fault = UpstreamUnavailable("Lost the upstream session")
    play(
        call,
        1.0,
        UpstreamErrorArrived(fault=fault),
        [ReplyError(1, fault=fault), *_finished()],
        S.DONE,
    )


def test_upstream_result_while_waiting_is_handed_to_the_next_retry() -> None:
    """The lease is returned as soon as the call ends; the next retry gets the result.

    The final ReleaseUpstream repeats the release: it is the driver's signal that the call is over
    (`Lease.release()` is idempotent)."""
    call = _waiting(P101)
    play(call, 2.0, UpstreamResultArrived(RESULT), [ReleaseUpstream()], S.WAITING_CLIENT)
    play(call, 5.0, ClientRetried(2, 1, {}), [ReplyResult(2, RESULT), *_finished()], S.DONE)


def test_upstream_error_while_waiting_is_handed_to_the_next_retry() -> None:
    """An upstream error that ends a held call reaches the next retry of the right round."""
    call = _waiting(P101)
    play(
        call, 2.0, UpstreamErrorArrived(error=UPSTREAM_ERROR), [ReleaseUpstream()], S.WAITING_CLIENT
    )
    play(
        call,
        5.0,
        ClientRetried(2, 0, {}),
        [ReplyError(2, fault=InvalidRequestState(RejectionReason.STALE_ROUND))],
        S.WAITING_CLIENT,
    )
    play(
        call,
        5.0,
        ClientRetried(3, 1, {}),
        [ReplyError(3, error=UPSTREAM_ERROR), *_finished()],
        S.DONE,
    )


# ---- scripts: cancellation, expiry, disconnects, limits ------------------------------------------


def test_push_cancelled_while_collecting() -> None:
    """A cancelled push leaves the batch; the last one cancelled closes the window and the call runs
    on."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(call, 0.0, UpstreamPushArrived(P102), [StartTimer("batch", QUIET, 2)], S.COLLECTING)
    play(call, 0.1, UpstreamPushCancelled(101), [], S.COLLECTING)
    play(call, 0.1, UpstreamPushCancelled(999), [], S.COLLECTING)
    play(call, 0.2, UpstreamPushCancelled(102), [CancelTimer("batch")], S.RUNNING)
    assert call.pending == {} and call.attempt == 1


def test_push_cancelled_while_waiting_is_no_longer_needed() -> None:
    """A push the server withdrew is not asked for any more; a retry without it resumes the call."""
    call = _waiting(P101, P102)
    play(call, 1.0, UpstreamPushCancelled(101), [], S.WAITING_CLIENT)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT, P102.key: SAMPLED}),
        [_answered(P102, SAMPLED), CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 3)],
        S.RUNNING,
    )


def test_attempt_deadline_still_fires_after_a_cancelled_push() -> None:
    """Cancelling the only collected push must not disarm the attempt's timeout."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(call, 0.1, UpstreamPushCancelled(101), [CancelTimer("batch")], S.RUNNING)
    play(
        call,
        ATTEMPT,
        DeadlinePassed(1),
        [
            ReplyError(1, fault=UpstreamTimeout("")),
            CancelUpstreamCall("request timed out"),
            *_finished(True),
        ],
        S.DONE,
    )


def test_deadline_while_waiting_refuses_cancels_and_discards() -> None:
    """When the held TTL passes, every held push is refused, the call cancelled and the session
    discarded."""
    call = _waiting(P101, P102, P103)
    play(call, 100.0, DeadlinePassed(1), [], S.WAITING_CLIENT)
    play(
        call,
        QUIET + HELD,
        DeadlinePassed(2),
        [
            AnswerPush(101, refusal(ELICIT)),
            AnswerPush(102, refusal(SAMPLE)),
            AnswerPush(103, refusal(ROOTS)),
            CancelUpstreamCall("held call expired"),
            *_finished(True),
        ],
        S.DONE,
    )
    assert call.pending == {}


def test_client_disconnect_while_running_cancels_the_call() -> None:
    """The attached attempt's disconnect cancels the upstream call and discards the session."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 1.0, ClientDisconnected(7), [], S.RUNNING)
    play(
        call,
        1.0,
        ClientDisconnected(1),
        [CancelUpstreamCall("client disconnected"), *_finished(True)],
        S.DONE,
    )


def test_client_disconnect_while_collecting_refuses_the_held_pushes() -> None:
    """Pushes collected for a vanished attempt are refused before the call is cancelled."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P102), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(
        call,
        0.1,
        ClientDisconnected(1),
        [
            AnswerPush(102, refusal(SAMPLE)),
            CancelUpstreamCall("client disconnected"),
            *_finished(True),
        ],
        S.DONE,
    )


def test_client_disconnect_while_waiting_changes_nothing() -> None:
    """The attempt that got the InputRequiredResult is already detached; its disconnect is not a
    cancel."""
    call = _waiting(P101)
    play(call, 1.0, ClientDisconnected(1), [], S.WAITING_CLIENT)


def test_attempt_timeout() -> None:
    """An attempt whose upstream call does not finish in time gets a timeout and the call is
    cancelled."""
    call = _waiting(P101)
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT}),
        [_answered(P101, ACCEPT), CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 3)],
        S.RUNNING,
    )
    play(call, 6.0, DeadlinePassed(2), [], S.RUNNING)
    play(
        call,
        5.0 + ATTEMPT,
        DeadlinePassed(3),
        [
            ReplyError(2, fault=UpstreamTimeout("")),
            CancelUpstreamCall("request timed out"),
            *_finished(True),
        ],
        S.DONE,
    )


def test_max_rounds_ends_the_call() -> None:
    """A call that needs more rounds than allowed is answered with a limit error and abandoned."""
    call = _waiting(P101, limits=dataclasses.replace(LIMITS, max_rounds=1))
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT}),
        [_answered(P101, ACCEPT), CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 3)],
        S.RUNNING,
    )
    play(call, 6.0, UpstreamPushArrived(P102), [StartTimer("batch", QUIET, 2)], S.COLLECTING)
    play(
        call,
        6.25,
        BatchWindowClosed(2),
        [
            NoteBatchSize(2, 1),
            ReplyError(2, fault=ClientLimitExceeded("", "held.max_rounds")),
            AnswerPush(102, refusal(SAMPLE)),
            CancelUpstreamCall("too many input rounds"),
            *_finished(True),
        ],
        S.DONE,
    )


def test_max_rounds_applies_to_re_asking_missing_answers() -> None:
    """Re-asking for missing answers is a round too and is capped the same way."""
    call = _waiting(P101, P102, limits=dataclasses.replace(LIMITS, max_rounds=1))
    play(
        call,
        5.0,
        ClientRetried(2, 1, {P101.key: ACCEPT}),
        [
            _answered(P101, ACCEPT),
            ReplyError(2, fault=ClientLimitExceeded("", "held.max_rounds")),
            AnswerPush(102, refusal(SAMPLE)),
            CancelUpstreamCall("too many input rounds"),
            *_finished(True),
        ],
        S.DONE,
    )


# ---- scripts: URL elicitation required (-32042) --------------------------------------------------


def _url_required(*urls: str) -> JsonObject:
    elicitations = [
        {"mode": "url", "elicitationId": f"e-{n}", "url": url, "message": f"Step {n}"}
        for n, url in enumerate(urls, start=1)
    ]
    error = {
        "code": LEGACY_URL_ELICITATION_REQUIRED,
        "message": "Authorization required",
        "data": {"elicitations": elicitations},
    }
    assert_valid(
        {"jsonrpc": "2.0", "id": 2, "error": error}, "URLElicitationRequiredError", "legacy"
    )
    return error


def _url_request(n: int, url: str) -> JsonObject:
    return {"method": ELICIT, "params": {"mode": "url", "message": f"Step {n}", "url": url}}


def _lifted(call: HeldCall, *urls: str) -> None:
    call.start(0.0)
    requests = {f"url-{n}": _url_request(n, url) for n, url in enumerate(urls, start=1)}
    play(
        call,
        1.0,
        UpstreamErrorArrived(error=_url_required(*urls)),
        [CancelTimer("batch"), ReplyInputRequired(1, 1, requests), StartTimer("deadline", HELD, 2)],
        S.WAITING_CLIENT,
    )
    assert [(push.push_id, push.elicitation_id) for push in call.pending.values()] == [
        (None, f"e-{n}") for n in range(1, len(urls) + 1)
    ]


def test_url_required_is_lifted_and_the_call_reissued_on_accept() -> None:
    """-32042 becomes URL-mode input requests; once accepted the original call is sent again."""
    call = HeldCall(LIMITS, attempt=1)
    _lifted(call, URL)
    play(
        call,
        9.0,
        ClientRetried(2, 1, {"url-1": {"action": "accept"}}),
        [CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 3), ReissueUpstreamCall()],
        S.RUNNING,
    )
    assert call.attempt == 2 and not call.upstream_done
    play(call, 10.0, UpstreamResultArrived(RESULT), [ReplyResult(2, RESULT), *_finished()], S.DONE)


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_url_required_ends_with_an_error_when_not_accepted(action: str) -> None:
    """A declined or cancelled URL interaction ends the call with an error, nothing reissued."""
    call = HeldCall(LIMITS, attempt=1)
    _lifted(call, URL)
    play(
        call,
        9.0,
        ClientRetried(2, 1, {"url-1": {"action": action}}),
        [
            ReplyError(
                2, fault=UpstreamFault("", {"upstreamCode": LEGACY_URL_ELICITATION_REQUIRED})
            ),
            *_finished(),
        ],
        S.DONE,
    )


def test_url_required_with_two_elicitations_asks_again_for_the_missing_one() -> None:
    """Each listed URL elicitation is its own key; the call is reissued once all are accepted."""
    call = HeldCall(LIMITS, attempt=1)
    _lifted(call, URL, URL + "/2")
    play(
        call,
        9.0,
        ClientRetried(2, 1, {"url-1": {"action": "accept"}}),
        [
            CancelTimer("batch"),
            ReplyInputRequired(2, 2, {"url-2": _url_request(2, URL + "/2")}),
            StartTimer("deadline", HELD, 3),
        ],
        S.WAITING_CLIENT,
    )
    play(
        call,
        12.0,
        ClientRetried(3, 2, {"url-2": {"action": "accept"}}),
        [CancelTimer("deadline"), StartTimer("deadline", ATTEMPT, 4), ReissueUpstreamCall()],
        S.RUNNING,
    )


def test_url_required_without_the_url_capability_is_missing_capability() -> None:
    """A -32042 for a request that did not declare elicitation.url ends with -32021, never a URL
    request."""
    call = HeldCall(LIMITS, attempt=1, url_elicitation=False)
    call.start(0.0)
    fault = MissingClientCapability("", {"elicitation": {"url": {}}})
    play(
        call,
        1.0,
        UpstreamErrorArrived(error=_url_required(URL)),
        [ReplyError(1, fault=fault), *_finished()],
        S.DONE,
    )
    assert call.pending == {}


@pytest.mark.parametrize(
    "data", [None, {}, {"elicitations": "x"}, {"elicitations": [{"mode": "url"}, 7]}]
)
def test_url_required_without_usable_elicitations_is_a_plain_error(data: Any) -> None:
    """A -32042 that lists no usable URL elicitation is passed on as the final error."""
    error = {
        "code": LEGACY_URL_ELICITATION_REQUIRED,
        "message": "Authorization required",
        "data": data,
    }
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(
        call,
        1.0,
        UpstreamErrorArrived(error=error),
        [ReplyError(1, error=error), *_finished()],
        S.DONE,
    )


# ---- shutdown and finished calls -----------------------------------------------------------------


def test_abort_while_running_answers_the_attempt_and_cancels() -> None:
    """Shutdown answers the attached attempt with the shutting-down error and cancels the call."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    actions = call.abort("bridge shutting down", 1.0)
    expected = [
        ReplyError(1, fault=ShuttingDown()),
        CancelUpstreamCall("bridge shutting down"),
        *_finished(True),
    ]
    assert [_comparable(a) for a in actions] == [_comparable(a) for a in expected]
    assert call.state is S.DONE
    _validate_on_the_wire(actions)


def test_abort_while_waiting_refuses_the_held_pushes() -> None:
    """Shutdown refuses held pushes, cancels the call, and answers no one (no attempt is
    attached)."""
    call = _waiting(P101)
    expected = [
        AnswerPush(101, refusal(ELICIT)),
        CancelUpstreamCall("bridge shutting down"),
        *_finished(True),
    ]
    assert call.abort("bridge shutting down", 1.0) == expected
    assert call.state is S.DONE


def test_abort_after_the_upstream_finished_does_not_cancel_it() -> None:
    """A call whose upstream already ended (URL round pending) is not cancelled again on
    shutdown."""
    call = HeldCall(LIMITS, attempt=1)
    _lifted(call, URL)
    assert call.abort("bridge shutting down", 3.0) == _finished(False)


def test_abort_of_a_finished_call_does_nothing() -> None:
    """A finished call has nothing left to abort."""
    call = HeldCall(LIMITS, attempt=1)
    call.handle(UpstreamResultArrived(RESULT), 1.0)
    assert call.abort("bridge shutting down", 2.0) == []


@pytest.mark.parametrize(
    "event",
    [
        UpstreamPushArrived(P101),
        UpstreamPushCancelled(101),
        UpstreamResultArrived(RESULT),
        UpstreamErrorArrived(error=UPSTREAM_ERROR),
        BatchWindowClosed(1),
        DeadlinePassed(1),
    ],
    ids=lambda event: type(event).__name__,
)
def test_late_traffic_on_a_finished_call_is_ignored(event: Event) -> None:
    """Late upstream messages and stale timers reaching a finished call produce no action."""
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    play(call, 1.0, UpstreamResultArrived(RESULT), [ReplyResult(1, RESULT), *_finished()], S.DONE)
    play(call, 2.0, event, [], S.DONE)


def test_a_call_that_ran_plain_starts_with_what_is_left_of_its_deadline() -> None:
    """The plain path's time counts: adopted 10 s into its 30 s timeout, the deadline is 20 s."""
    call = HeldCall(LIMITS, attempt=None)
    assert call.start(10.0, attempt=3, deadline_s=ATTEMPT - 10.0) == [
        StartTimer("deadline", 20.0, 1)
    ]
    assert call.attempt == 3


# ---- a call that becomes a task lives under the task's limits (docs/tasks.md) -------------------

TASK_LIFE = 600.0
TASK_LIMITS = dataclasses.replace(LIMITS, attempt_timeout_s=TASK_LIFE, held_ttl_s=TASK_LIFE)


def test_relimit_while_running_restarts_the_attempt_deadline_and_the_old_one_is_stale() -> None:
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    assert call.relimit(TASK_LIMITS) == [StartTimer("deadline", TASK_LIFE, 2)]
    play(call, ATTEMPT, DeadlinePassed(1), [], S.RUNNING)  # the front request's deadline
    fault = UpstreamTimeout(f"The upstream call did not finish within {TASK_LIFE:g} s")
    expected = [
        ReplyError(1, fault=fault),
        CancelUpstreamCall("request timed out"),
        *_finished(True),
    ]
    play(call, TASK_LIFE, DeadlinePassed(2), expected, S.DONE)


def test_relimit_while_waiting_restarts_the_held_deadline_and_later_rounds_use_it() -> None:
    call = _waiting(P101)
    assert call.relimit(TASK_LIMITS) == [StartTimer("deadline", TASK_LIFE, 3)]
    play(call, HELD, DeadlinePassed(2), [], S.WAITING_CLIENT)  # the old held deadline
    answered = [
        _answered(P101, ACCEPT),
        CancelTimer("deadline"),
        StartTimer("deadline", TASK_LIFE, 4),
    ]
    play(call, 1.0, ClientRetried(2, 1, {P101.key: ACCEPT}), answered, S.RUNNING)


def test_relimit_after_the_end_does_nothing() -> None:
    call = HeldCall(LIMITS, attempt=1)
    call.start(0.0)
    call.handle(UpstreamResultArrived(RESULT), 1.0)
    assert call.relimit(TASK_LIMITS) == []
    assert call.limits == TASK_LIMITS
