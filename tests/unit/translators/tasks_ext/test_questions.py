"""A legacy task's questions admitted or refused (translators/tasks_ext/questions.py), one rule
per test, in the order the function checks them."""

from __future__ import annotations

from typing import Any

from translators.held.push_ledger import Answer, Hold
from translators.protocol.eras import ELICIT, META_RELATED_TASK, SAMPLE
from translators.protocol.pushes import PendingPush, refusal
from translators.protocol.revisions import NEWEST
from translators.tasks_ext.questions import admit_question
from translators.wire.errors import INVALID_REQUEST
from translators.wire.jsonrpc import JsonObject

SCHEMA: JsonObject = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
ELICITING: JsonObject = {"elicitation": {"form": {}}, "sampling": {}}


def push(push_id: int, method: str = ELICIT, task: str | None = "t-1", **params: Any) -> JsonObject:
    meta = {"_meta": {META_RELATED_TASK: {"taskId": task}}} if task is not None else {}
    body = {"message": "Sure?", "requestedSchema": SCHEMA, **params, **meta}
    return {"jsonrpc": "2.0", "id": push_id, "method": method, "params": body}


def admit(
    message: JsonObject,
    *,
    ended: bool = False,
    pending: dict[str, PendingPush] | None = None,
    used: set[str] | None = None,
    capabilities: JsonObject = ELICITING,
) -> Answer | Hold:
    return admit_question(
        message,
        legacy_id="t-1",
        ended=ended,
        pending=pending or {},
        used_keys=used or set(),
        client_capabilities=capabilities,
        revision=NEWEST,
    )


def test_a_question_is_held_with_its_schema() -> None:
    held = admit(push(7))
    assert isinstance(held, Hold)
    assert (held.pending.push_id, held.pending.method) == (7, ELICIT)
    assert held.pending.requested_schema == SCHEMA
    assert held.pending.input_request["method"] == ELICIT


def test_a_key_used_before_in_the_tasks_life_is_never_given_again() -> None:
    first = admit(push(7))
    assert isinstance(first, Hold)
    again = admit(push(8), used={first.pending.key})
    assert isinstance(again, Hold)
    assert again.pending.key != first.pending.key


def test_an_ended_task_refuses_every_question_without_a_logged_reason() -> None:
    refused = admit(push(7), ended=True)
    assert isinstance(refused, Answer)
    assert refused == Answer(refusal(ELICIT), None)  # an elicitation refused is a cancel


def test_a_question_tagged_with_another_task_is_refused() -> None:
    refused = admit(push(7, task="t-2"))
    assert refused == Answer(refusal(ELICIT), None)


def test_an_untagged_question_on_the_tasks_session_is_the_tasks() -> None:
    assert isinstance(admit(push(7, task=None)), Hold)


def test_an_id_still_unanswered_is_refused_and_the_first_stays() -> None:
    first = admit(push(7))
    assert isinstance(first, Hold)
    refused = admit(push(7), pending={first.pending.key: first.pending})
    assert isinstance(refused, Answer) and refused.reason == "duplicate_id"
    assert refused.answer.error is not None and refused.answer.error["code"] == INVALID_REQUEST


def test_a_capability_the_client_did_not_declare_is_refused() -> None:
    refused = admit(push(7), capabilities={})
    assert isinstance(refused, Answer) and refused.reason == "capability"


def test_only_an_elicitation_keeps_a_schema() -> None:
    sampling = push(7, method=SAMPLE, messages=[], maxTokens=5)
    held = admit(sampling)
    assert isinstance(held, Hold)
    assert held.pending.requested_schema is None
