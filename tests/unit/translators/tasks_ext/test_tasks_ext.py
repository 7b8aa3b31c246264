"""The Tasks extension's pure mapping (translators/tasks_ext/): legacy task shapes, the modern
task by status, and sealed task ids (docs/tasks.md)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from translators.held.request_state import (
    KeyRing,
    RequestBinding,
    StateClaims,
    check_binding,
    open_state,
    seal,
    seal_blob,
)
from translators.tasks_ext.messages import (
    EXTENSION,
    TaskView,
    create_task_result,
    declares_extension,
    get_task_result,
    legacy_task,
    missing_extension,
    related_task_id,
    server_runs_tool_tasks,
    task_not_found,
    task_result_payload,
    task_support,
    with_extension,
)
from translators.tasks_ext.task_ids import (
    MAX_HANDLE_BYTES,
    MAX_TOKEN_LENGTH,
    TaskClaims,
    UpstreamHandle,
    is_task_state,
    open_task_id,
    seal_task_id,
)
from translators.wire.errors import (
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    InvalidRequestState,
    RejectionReason,
)

RING = KeyRing({"k1": b"\1" * 32}, "k1")
OTHER_RING = KeyRing({"k1": b"\2" * 32}, "k1")
VIEW = TaskView(
    "t1.x", "working", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z", 60000, 500
)


def test_declaration_and_server_capability() -> None:
    assert declares_extension({"extensions": {EXTENSION: {}}})
    assert not declares_extension({"extensions": {EXTENSION: True}})
    assert not declares_extension({"elicitation": {}})
    assert server_runs_tool_tasks({"tasks": {"requests": {"tools": {"call": {}}}}})
    assert not server_runs_tool_tasks({"tasks": {"list": {}, "cancel": {}}})
    assert [task_support(t) for t in ({}, {"execution": {"taskSupport": "required"}})] == [
        "forbidden",
        "required",
    ]
    assert task_support({"execution": {"taskSupport": "sometimes"}}) == "forbidden"


def test_discover_gets_the_extension_as_exactly_an_empty_object() -> None:
    discover = {"resultType": "complete", "capabilities": {"tools": {}, "extensions": {"x/y": {}}}}
    shown = with_extension(discover)
    assert shown["capabilities"] == {"tools": {}, "extensions": {"x/y": {}, EXTENSION: {}}}
    assert discover["capabilities"]["extensions"] == {"x/y": {}}  # not modified in place


def test_errors_are_the_extensions_own() -> None:
    error = missing_extension("tasks/get").to_error()
    assert error["code"] == MISSING_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert task_not_found().to_error() == {"code": INVALID_PARAMS, "message": "Task not found"}


def test_legacy_task_shapes() -> None:
    created = {"task": {"taskId": "a", "status": "working", "ttl": 60000, "pollInterval": 250}}
    task = legacy_task(created)
    assert task is not None and (task.task_id, task.ttl_ms, task.poll_interval_ms) == (
        "a",
        60000,
        250,
    )
    flat = legacy_task({"taskId": "a", "status": "input_required", "statusMessage": "asking"})
    assert flat is not None and flat.status_message == "asking" and flat.ttl_ms is None
    assert legacy_task({"content": [], "isError": False}) is None  # the server ran it plainly
    assert legacy_task({"taskId": "a", "status": "sleeping"}) is None


def test_the_modern_task_by_status() -> None:
    created = create_task_result(VIEW)
    assert created == {
        "resultType": "task",
        "taskId": "t1.x",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "lastUpdatedAt": "2026-01-01T00:00:01.000Z",
        "ttlMs": 60000,
        "pollIntervalMs": 500,
    }
    asking = TaskView(**{**VIEW.__dict__, "status": "input_required", "input_requests": {"k": {}}})
    assert get_task_result(asking)["inputRequests"] == {"k": {}}
    assert get_task_result(asking)["resultType"] == "complete"
    done = TaskView(**{**VIEW.__dict__, "status": "completed", "result": {"content": []}})
    assert get_task_result(done)["result"] == {"content": []} and "error" not in get_task_result(
        done
    )
    failed = TaskView(**{**VIEW.__dict__, "status": "failed", "error": {"code": 1, "message": "m"}})
    assert get_task_result(failed)["error"] == {"code": 1, "message": "m"}
    assert "result" not in get_task_result(failed)
    cancelled = get_task_result(TaskView(**{**VIEW.__dict__, "status": "cancelled"}))
    assert not {"result", "error", "inputRequests"} & set(cancelled)


def test_the_related_task_meta_is_dropped_from_the_result() -> None:
    related = {"io.modelcontextprotocol/related-task": {"taskId": "a"}}
    assert task_result_payload({"content": [], "_meta": related}) == {"content": []}
    kept = task_result_payload({"content": [], "_meta": {**related, "x": 1}, "resultType": "z"})
    assert kept == {"content": [], "_meta": {"x": 1}}
    assert related_task_id({"params": {"_meta": related}}) == "a"
    assert related_task_id({"params": {}}) is None


def test_sealed_ids_open_only_with_the_ring_and_bind_their_claims() -> None:
    claims = TaskClaims(os.urandom(16), b"p" * 16, 2**40, "replica-a")
    token = seal_task_id(claims, RING, os.urandom(12))
    assert token.startswith("t1.") and is_task_state(token)
    assert open_task_id(token, RING) == claims
    assert open_task_id(token, OTHER_RING) is None
    assert open_task_id(token[:-2] + ("AA" if not token.endswith("AA") else "BB"), RING) is None
    assert open_task_id("t1.", RING) is None and open_task_id("v1.x", RING) is None
    assert not is_task_state("v1.abc") and not is_task_state(None)


HANDLE = UpstreamHandle(
    session_id="0b7e6c1a-5d0e-4c57-9a43-3f1c2d9e8b70",
    legacy_task_id="7f3c9a2e-1b4d-4e8f-a6c5-2d9b0e1f3a47",
    version="2025-11-25",
    result_request_id=3,
    resume_event_id="e4d2c1b0-aaaa-bbbb-cccc-0123456789ab",
    capabilities={"elicitation": {"form": {}}, "sampling": {}},
    created_at_ms=1_780_000_000_123,
)


def test_a_handle_is_sealed_in_the_id_and_never_readable_without_the_ring() -> None:
    claims = TaskClaims(os.urandom(16), b"p" * 16, 2**40, "r0", HANDLE)
    token = seal_task_id(claims, RING, os.urandom(12))
    assert open_task_id(token, RING) == claims
    assert open_task_id(token, OTHER_RING) is None
    assert len(token) <= MAX_TOKEN_LENGTH
    for clear in (HANDLE.session_id, HANDLE.legacy_task_id, HANDLE.resume_event_id, "2025-11-25"):
        assert clear is not None and clear not in token
    # an id without a handle (stdio, or one minted before handles existed) still opens, as None
    plain = TaskClaims(claims.record, b"p" * 16, 2**40, "r0")
    assert open_task_id(seal_task_id(plain, RING, os.urandom(12)), RING) == plain


def test_a_handle_too_big_to_seal_is_left_out() -> None:
    huge = UpstreamHandle("s" * (MAX_HANDLE_BYTES + 1), "t", "2025-11-25", 1, None)
    token = seal_task_id(TaskClaims(b"\0" * 16, b"p" * 16, 2**40, "r0", huge), RING, os.urandom(12))
    opened = open_task_id(token, RING)
    assert opened is not None and opened.handle is None and len(token) < 200


def test_a_handle_carries_its_sessions_cookies_sealed() -> None:
    """A load balancer's pin goes with the handle, unreadable in the id; an id sealed before
    handles carried cookies (seven fields) still opens, with none."""
    pinned = dataclasses.replace(
        HANDLE, cookies=(("SRV", "replica-b", "/", None), ("AWSALB", "x" * 120, "/", 2**41))
    )
    token = seal_task_id(TaskClaims(b"\0" * 16, b"p" * 16, 2**40, "r0", pinned), RING, b"n" * 12)
    opened = open_task_id(token, RING)
    assert opened is not None and opened.handle == pinned
    assert "replica-b" not in token and len(token) <= MAX_TOKEN_LENGTH
    assert len(json.loads(HANDLE.encode())) == 7  # without cookies: what older processes read
    assert UpstreamHandle.decode(HANDLE.encode()) == HANDLE


def test_cookies_too_big_to_seal_are_left_out_before_the_handle() -> None:
    """Cookies that would push the handle past `MAX_HANDLE_BYTES` are dropped, and the task can
    still be adopted where the balancer does not pin by cookie."""
    big = dataclasses.replace(HANDLE, cookies=(("app", "v" * MAX_HANDLE_BYTES, "/", None),))
    token = seal_task_id(TaskClaims(b"\0" * 16, b"p" * 16, 2**40, "r0", big), RING, b"n" * 12)
    opened = open_task_id(token, RING)
    assert opened is not None and opened.handle == HANDLE


@pytest.mark.parametrize(
    "raw",
    [
        b"[",
        b"{}",
        b'["s","t","v","1",null,{},0]',
        b'["s","t","v",1,null,[],0]',
        b'["s"]',
        b'["s","t","v",1,null,{},0,{}]',
        b'["s","t","v",1,null,{},0,[["n","v","/"]]]',
        b'["s","t","v",1,null,{},0,[["n","v","/","soon"]]]',
        b'["s","t","v",1,null,{},0,[["n",1,"/",null]]]',
        b'["s","t","v",1,null,{},0,[],9]',
    ],
)
def test_a_malformed_handle_is_refused_whole(raw: bytes) -> None:
    assert UpstreamHandle.decode(raw) is None
    assert UpstreamHandle.decode(HANDLE.encode()) == HANDLE


def test_a_task_id_and_a_request_state_never_open_as_each_other() -> None:
    token = seal_task_id(TaskClaims(b"\0" * 16, b"p" * 16, 2**40, "r"), RING, b"\0" * 12)
    state = seal(
        StateClaims(b"\0" * 16, 1, "r", b"p" * 16, "tools/call", b"\0" * 16, b"\0" * 8, 2**40),
        RING,
        b"\0" * 12,
    )
    assert open_task_id("t1." + state.removeprefix("v1."), RING) is None
    with pytest.raises(InvalidRequestState):
        open_state("v1." + token.removeprefix("t1."), RING)


OWLS = {"name": "research", "arguments": {"topic": "owls", "ambiguous": True}}


def test_a_task_id_seals_the_request_its_rounds_are_bound_to() -> None:
    """An in-bridge task's id binds its call as a `requestState` does (method, name, arguments),
    with or without a handle; an id without a binding (the extension's) still opens, with none."""
    binding = RequestBinding.of("tools/call", OWLS)
    for handle in (None, HANDLE):
        claims = TaskClaims(os.urandom(16), b"p" * 16, 2**40, "r0", handle, binding)
        token = seal_task_id(claims, RING, os.urandom(12))
        assert open_task_id(token, RING) == claims
        assert len(token) <= MAX_TOKEN_LENGTH
    unbound = TaskClaims(os.urandom(16), b"p" * 16, 2**40, "r0", HANDLE)
    opened = open_task_id(seal_task_id(unbound, RING, os.urandom(12)), RING)
    assert opened == unbound and opened.binding is None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "greet", "arguments": {"name": "Ada"}}),
        ("tools/call", {**OWLS, "arguments": {"topic": "cats", "ambiguous": True}}),
        ("tools/call", {"name": "research"}),
        ("prompts/get", OWLS),
        ("resources/read", {"uri": "research"}),
    ],
)
def test_a_binding_refuses_every_other_request(method: str, params: dict[str, object]) -> None:
    bound = RequestBinding.of("tools/call", OWLS)
    check_binding(bound, RequestBinding.of("tools/call", {**OWLS, "requestState": "x"}))
    for other in (RequestBinding.of(method, params), bound):
        with pytest.raises(InvalidRequestState) as refused:
            check_binding(None if other is bound else bound, other)
        assert refused.value.reason is RejectionReason.OTHER_REQUEST


@pytest.mark.parametrize("binding", [b"", b"\x09" + b"d" * 16, b"\x01" + b"d" * 15])
def test_an_id_with_a_malformed_binding_does_not_open(binding: bytes) -> None:
    """A well-sealed id whose binding is cut short or names no method is refused whole."""
    plaintext = b"r" * 16 + b"p" * 16 + (2**40).to_bytes(8, "big") + b"\x02r0\x01" + binding
    token = "t1." + seal_blob(plaintext, RING, os.urandom(12), b"mrtr-bridge/taskId/v1|")
    assert open_task_id(token, RING) is None
