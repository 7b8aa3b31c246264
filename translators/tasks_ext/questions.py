"""A legacy task's questions (the server's pushes while the task runs) as the Tasks extension's
`inputRequests`, pure: which push is refused at once and why, and which is held under a key never
used before in the task's life (docs/tasks.md). `proxy/engine/legacy_tasks/running.py` does the
I/O."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import replace

from translators.held.push_ledger import Answer, Hold
from translators.protocol.eras import ELICIT
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    duplicate_id,
    input_key,
    legacy_push_to_input_request,
    pending_push,
    refusal,
)
from translators.protocol.revisions import Revision
from translators.tasks_ext.messages import related_task_id
from translators.wire.jsonrpc import JsonObject


def admit_question(
    push: JsonObject,
    *,
    legacy_id: str,
    ended: bool,
    pending: Mapping[str, PendingPush],
    used_keys: Container[str],
    client_capabilities: JsonObject,
    revision: Revision,
) -> Answer | Hold:
    """What becomes of one push on the task's session: refused when the task has `ended` or the
    push names another task; refused when it reuses the id of a question still unanswered (the
    first stays: the `mcp` 1.x SDK can mint one id for two concurrent questions); refused when the
    client did not declare the capability; else held, under a key not in `used_keys`."""
    tagged = related_task_id(push)
    if ended or (tagged is not None and tagged != legacy_id):
        return Answer(refusal(str(push.get("method"))), None)
    if any(question.push_id == push["id"] for question in pending.values()):
        return Answer(duplicate_id(push["id"]), "duplicate_id")
    translated = legacy_push_to_input_request(push, client_capabilities, revision)
    if isinstance(translated, PushAnswer):
        return Answer(translated, "capability")
    held = pending_push(push, input_key(push, used_keys), translated, revision)
    # a schema only ever checks an elicitation's answer
    return Hold(held if push.get("method") == ELICIT else replace(held, requested_schema=None))


__all__ = ["admit_question"]
