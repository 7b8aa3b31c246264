"""Per-revision mapping, table-driven from the revision matrix (translators.protocol.revisions,
.pushes, .requests).

Every answer the bridge would send upstream is validated against the session revision's own JSON
schema (tests/schemas/schema-<revision>.json); every input request the client would see against
the modern schema."""

from __future__ import annotations

import dataclasses
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator  # type: ignore[import-untyped]
from schema_check import assert_valid

from translators.held.events import ReplyError, UpstreamErrorArrived
from translators.held.machine import HeldCall, Limits
from translators.protocol.capabilities import (
    capabilities_for_revision,
    legacy_server_capabilities_to_modern,
)
from translators.protocol.eras import COMPLETION_COMPLETE, ELICIT, ROOTS, SAMPLE, TOOLS_CALL
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    input_response_to_legacy,
    legacy_push_to_input_request,
    unowned_push_answer,
)
from translators.protocol.requests import modern_params_to_legacy, require_upstream_capability
from translators.protocol.revisions import REVISIONS, SUPPORTED, Revision
from translators.wire.errors import INVALID_PARAMS, METHOD_NOT_FOUND, InvalidParams, MethodNotFound
from translators.wire.jsonrpc import JsonObject
from translators.wire.jsonrpc_batches import batch_elements
from translators.wire.stdio_framing import FramingError, LineDecoder, decode_messages

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
EVERYTHING: JsonObject = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}
R = REVISIONS


@cache
def _validator(def_name: str, version: str) -> Any:
    schema = json.loads((SCHEMAS / f"schema-{version}.json").read_text(encoding="utf-8"))
    key = "$defs" if "$defs" in schema else "definitions"
    root = {"$schema": schema["$schema"], key: schema[key], "$ref": f"#/{key}/{def_name}"}
    cls = Draft202012Validator if key == "$defs" else Draft7Validator
    return cls(root)


def _valid_in(instance: Any, def_name: str, version: str) -> bool:
    return bool(_validator(def_name, version).is_valid(instance))


# ---- capabilities declared at initialize --------------------------------------------------------

CAPABILITY_CASES: list[tuple[JsonObject, dict[str, JsonObject]]] = [
    (
        EVERYTHING,
        {
            "2025-11-25": EVERYTHING,
            "2025-06-18": {"elicitation": {}, "sampling": {}, "roots": {}},
            "2025-03-26": {"sampling": {}, "roots": {}},
            "2024-11-05": {"sampling": {}, "roots": {}},
        },
    ),
    (
        {"elicitation": {"form": {}}},
        {
            "2025-11-25": {"elicitation": {"form": {}}},
            "2025-06-18": {"elicitation": {}},
            "2025-03-26": {},
            "2024-11-05": {},
        },
    ),
    (
        {"elicitation": {"url": {}}, "experimental": {"x": {}}},
        {
            "2025-11-25": {"elicitation": {"url": {}}, "experimental": {"x": {}}},
            "2025-06-18": {"experimental": {"x": {}}},
            "2025-03-26": {"experimental": {"x": {}}},
            "2024-11-05": {"experimental": {"x": {}}},
        },
    ),
    ({}, {version: {} for version in SUPPORTED}),
]


@pytest.mark.parametrize(("legacy", "expected"), CAPABILITY_CASES)
@pytest.mark.parametrize("version", SUPPORTED)
def test_capabilities_in_each_revision(
    version: str, legacy: JsonObject, expected: dict[str, JsonObject]
) -> None:
    """`elicitation: {}` at 2025-06-18, none below; URL mode and sampling tools/context only at
    2025-11-25."""
    shaped = capabilities_for_revision(R[version], legacy)
    assert shaped == expected[version]
    assert _valid_in(shaped, "ClientCapabilities", version)


# ---- elicitation: what the client sees, what the server gets ------------------------------------

ENUM_NAMES: JsonObject = {
    "type": "object",
    "properties": {
        "size": {
            "type": "string",
            "title": "Size",
            "enum": ["s", "l"],
            "enumNames": ["Small", "Large"],
        },
        "odd": {"type": "string", "enum": ["a", "b"], "enumNames": ["Only one"]},
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "ok": {"type": "boolean", "default": False},
    },
    "required": ["size"],
}
TITLED: JsonObject = {
    "type": "object",
    "properties": {
        "size": {
            "type": "string",
            "title": "Size",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "odd": {"type": "string", "enum": ["a", "b"]},
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "ok": {"type": "boolean", "default": False},
    },
    "required": ["size"],
}


def _elicit(schema: JsonObject, **extra: Any) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": ELICIT,
        "params": {"message": "Pick", "requestedSchema": schema, **extra},
    }


# the legacy titled form is still valid there: left as the server sent it
@pytest.mark.parametrize(
    ("version", "shown"),
    [
        (
            "2025-11-25",
            ENUM_NAMES,
        ),
        ("2025-06-18", TITLED),
    ],
)
def test_enum_names_become_titled_single_select(version: str, shown: JsonObject) -> None:
    """A 2025-06-18 schema's `enum` + `enumNames` reaches the client as `oneOf` of `const`/`title`;
    titles that do not line up are dropped; other properties are kept exactly."""
    assert _valid_in(_elicit(ENUM_NAMES), "ElicitRequest", version)
    request = legacy_push_to_input_request(_elicit(ENUM_NAMES), EVERYTHING, R[version])
    assert request == {
        "method": ELICIT,
        "params": {"mode": "form", "message": "Pick", "requestedSchema": shown},
    }
    assert_valid(request, "ElicitRequest", "modern")


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
def test_elicitation_does_not_exist_below_2025_06_18(version: str) -> None:
    """Such a server cannot elicit: a push is refused with -32601, never shown to the client."""
    expected = PushAnswer(
        error={
            "code": METHOD_NOT_FOUND,
            "message": f"Method not found: elicitation/create does not exist in MCP {version}",
        }
    )
    assert legacy_push_to_input_request(_elicit(ENUM_NAMES), EVERYTHING, R[version]) == expected
    assert unowned_push_answer(_elicit(ENUM_NAMES), (), R[version]) == PushAnswer(
        error={"code": METHOD_NOT_FOUND, "message": "Method not found: elicitation/create"}
    )


def test_url_mode_does_not_exist_at_2025_06_18() -> None:
    """A URL-mode push from a 2025-06-18 server is refused even when the client declared URL
    mode."""
    push = _elicit({}, mode="url", url="https://x.example", elicitationId="e")
    assert legacy_push_to_input_request(push, EVERYTHING, R["2025-06-18"]) == PushAnswer(
        error={
            "code": INVALID_PARAMS,
            "message": "Elicitation mode 'url' does not exist in MCP 2025-06-18",
        }
    )


def _pending(method: str, version: str, schema: JsonObject | None = None) -> PendingPush:
    return PendingPush("k", 7, method, {"method": method, "params": {}}, None, R[version], schema)


ACCEPT_CASES: list[tuple[JsonObject, str | None]] = [
    ({"size": "s", "name": "Ann", "age": 3, "ok": True}, None),
    ({"size": "l", "age": 4.0}, None),
    ({"size": ["s", "l"]}, "content['size'] is a list; this revision takes single values only"),
    ({"size": "m"}, "content['size'] is not one of 's', 'l'"),
    ({"size": "s", "age": "3"}, "content['age'] is not of type integer"),
    ({"size": "s", "age": True}, "content['age'] is not of type integer"),
    (
        {"size": "s", "age": 2.5},
        "content['age'] is a fractional number; this revision takes integers only",
    ),
    ({"size": "s", "ok": "yes"}, "content['ok'] is not of type boolean"),
    ({"size": "s", "extra": "x"}, "content['extra'] was not asked for"),
    ({"name": "Ann"}, "content lacks required 'size'"),
]


@pytest.mark.parametrize(("content", "problem"), ACCEPT_CASES)
def test_elicit_answers_a_2025_06_18_server_can_take(
    content: JsonObject, problem: str | None
) -> None:
    """Only answers valid for the requested schema go to a 2025-06-18 server; the rest are refused
    with the reason, and nothing is sent."""
    answer = {"action": "accept", "content": content}
    pending = _pending(ELICIT, "2025-06-18", ENUM_NAMES)
    if problem is None:
        sent = input_response_to_legacy("k", pending, answer)
        assert sent == PushAnswer(result=answer)
        assert _valid_in(sent.result, "ElicitResult", "2025-06-18")
        return
    with pytest.raises(InvalidParams) as raised:
        input_response_to_legacy("k", pending, answer)
    assert raised.value.message == (
        f"inputResponses['k'] cannot be sent to the server: {problem} (the server speaks MCP "
        "2025-06-18)"
    )
    assert raised.value.data == {"inputKey": "k"}


def test_multi_select_still_reaches_a_2025_11_25_server() -> None:
    """The checks are the older revision's: at 2025-11-25 a multi-select answer is valid and
    sent."""
    answer = {"action": "accept", "content": {"size": ["s", "l"]}}
    sent = input_response_to_legacy("k", _pending(ELICIT, "2025-11-25", ENUM_NAMES), answer)
    assert sent == PushAnswer(result=answer)
    assert _valid_in(sent.result, "ElicitResult", "2025-11-25")


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declines_are_sent_as_they_are(action: str) -> None:
    sent = input_response_to_legacy(
        "k", _pending(ELICIT, "2025-06-18", ENUM_NAMES), {"action": action}
    )
    assert sent == PushAnswer(result={"action": action})


# ---- sampling answers ----------------------------------------------------------------------------

TEXT = {"type": "text", "text": "hi"}
AUDIO = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
TOOL_USE = {"type": "tool_use", "id": "t1", "name": "search", "input": {}}
SAMPLING_CASES: list[tuple[Any, dict[str, Any]]] = [
    # content, per revision: the content sent, or the reason it is refused
    (TEXT, {v: TEXT for v in SUPPORTED}),
    ([TEXT], {"2025-11-25": [TEXT], "2025-06-18": TEXT, "2025-03-26": TEXT, "2024-11-05": TEXT}),
    (
        AUDIO,
        {
            "2025-11-25": AUDIO,
            "2025-06-18": AUDIO,
            "2025-03-26": AUDIO,
            "2024-11-05": "content of type 'audio' does not exist in MCP 2024-11-05 sampling "
            "results",
        },
    ),
    (
        TOOL_USE,
        {
            "2025-11-25": TOOL_USE,
            **{
                v: f"content of type 'tool_use' does not exist in MCP {v} sampling results"
                for v in SUPPORTED[1:]
            },
        },
    ),
    (
        [TEXT, TEXT],
        {
            "2025-11-25": [TEXT, TEXT],
            **{v: f"content holds 2 blocks; MCP {v} takes exactly one" for v in SUPPORTED[1:]},
        },
    ),
]


@pytest.mark.parametrize(("content", "by_revision"), SAMPLING_CASES)
@pytest.mark.parametrize("version", SUPPORTED)
def test_sampling_answers_in_each_revision(
    version: str, content: Any, by_revision: dict[str, Any]
) -> None:
    """Tool use and block lists reach only 2025-11-25; one block in a list is sent as that block;
    audio does not exist at 2024-11-05. What is sent is valid in the revision's schema."""
    answer = {"role": "assistant", "content": content, "model": "m"}
    expected = by_revision[version]
    if isinstance(expected, str):
        with pytest.raises(InvalidParams, match=f"cannot be sent to the server: {expected}"):
            input_response_to_legacy("k", _pending(SAMPLE, version), answer)
        return
    sent = input_response_to_legacy("k", _pending(SAMPLE, version), answer)
    assert sent == PushAnswer(result={**answer, "content": expected})
    assert _valid_in(sent.result, "CreateMessageResult", version)


@pytest.mark.parametrize("version", SUPPORTED)
def test_roots_answers_are_the_same_everywhere(version: str) -> None:
    answer = {"roots": [{"uri": "file:///w", "name": "w"}]}
    sent = input_response_to_legacy("k", _pending(ROOTS, version), answer)
    assert sent == PushAnswer(result=answer)
    assert _valid_in(sent.result, "ListRootsResult", version)


# ---- requests and capabilities of the server --------------------------------------------------

COMPLETE = {
    "ref": {"type": "ref/prompt", "name": "p"},
    "argument": {"name": "a", "value": "x"},
    "context": {"arguments": {"b": "y"}},
}


@pytest.mark.parametrize("version", SUPPORTED)
def test_completion_context_only_where_it_exists(version: str) -> None:
    """`context` (earlier arguments) came with 2025-06-18; older servers never see it."""
    params = modern_params_to_legacy(
        COMPLETE, upstream_progress_token=None, method=COMPLETION_COMPLETE, revision=R[version]
    )
    expected = (
        COMPLETE if R[version].completion_context else {k: COMPLETE[k] for k in ("ref", "argument")}
    )
    assert params == expected
    assert _valid_in(
        {"jsonrpc": "2.0", "id": 1, "method": COMPLETION_COMPLETE, "params": params},
        "CompleteRequest",
        version,
    )


def test_tool_call_params_are_the_same_everywhere() -> None:
    params = {"name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": "p"}}
    for version in SUPPORTED:
        sent = modern_params_to_legacy(
            params, upstream_progress_token="up", method=TOOLS_CALL, revision=R[version]
        )
        assert sent == {"name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": "up"}}
        assert _valid_in(
            {"jsonrpc": "2.0", "id": 1, "method": TOOLS_CALL, "params": sent},
            "CallToolRequest",
            version,
        )


@pytest.mark.parametrize(("version", "gated"), [(v, R[v].completions_flag) for v in SUPPORTED])
def test_completion_gate_follows_the_revision(version: str, gated: bool) -> None:
    """Without a `completions` flag in the revision, completion is forwarded and the server
    decides."""
    if gated:
        with pytest.raises(MethodNotFound, match="does not offer completions"):
            require_upstream_capability(COMPLETION_COMPLETE, {"tools": {}}, R[version])
    else:
        require_upstream_capability(COMPLETION_COMPLETE, {"tools": {}}, R[version])


def test_discover_claims_only_what_a_2024_11_05_server_declared() -> None:
    """Nothing is invented: a 2024-11-05 server's capabilities reach discover as they are."""
    declared = {"tools": {"listChanged": True}, "prompts": {}, "logging": {}}
    assert legacy_server_capabilities_to_modern(declared, listen_supported=True) == declared
    assert "completions" not in legacy_server_capabilities_to_modern(
        declared, listen_supported=False
    )


@pytest.mark.parametrize("version", SUPPORTED)
def test_url_elicitation_error_is_lifted_only_where_it_exists(version: str) -> None:
    """-32042 means "URL elicitation required" only at 2025-11-25; elsewhere it is the server's own
    error."""
    limits = Limits(
        batch_quiet_s=1, batch_max_s=1, attempt_timeout_s=5, held_ttl_s=60, max_rounds=3
    )
    call = HeldCall(
        limits, attempt=1, url_elicitation=False, lift_url_errors=R[version].elicitation_modes
    )
    error = {"code": -32042, "message": "needs a URL", "data": {"elicitations": []}}
    [reply, *_] = call.handle(UpstreamErrorArrived(error=error), 0.0)
    assert isinstance(reply, ReplyError)
    if version == "2025-11-25":
        assert reply.error is None and reply.fault is not None and reply.fault.code == -32021
    else:
        assert reply.error == error and reply.fault is None


def test_each_revision_is_a_frozen_record() -> None:
    """The table is keyed by version and every row names its own version."""
    assert all(isinstance(rev, Revision) and key == rev.version for key, rev in REVISIONS.items())


# ---- batches -----------------------------------------------------------------------------------

LOG = {
    "jsonrpc": "2.0",
    "method": "notifications/message",
    "params": {"level": "info", "data": "x"},
}
ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {}}
NOT_AN_OBJECT = FramingError("line is JSON but not an object", 0)


@pytest.mark.parametrize(
    ("line", "split"),
    [
        ([LOG, ANSWER], [LOG, ANSWER]),
        ([ANSWER], [ANSWER]),
        ([LOG, 3, ANSWER], [LOG, NOT_AN_OBJECT, ANSWER]),
        ([], [NOT_AN_OBJECT]),
        (LOG, [LOG]),
    ],
)
@pytest.mark.parametrize("version", SUPPORTED)
def test_batch_lines_split_only_where_the_revision_has_batches(
    version: str, line: Any, split: list[Any]
) -> None:
    """A batch line becomes its elements, in order, each checked as if alone (2025-03-26 only)."""
    raw = json.dumps(line).encode()
    sized = [FramingError(m.reason, len(raw)) if isinstance(m, FramingError) else m for m in split]
    expected = (
        sized
        if R[version].batches or isinstance(line, dict)
        else [FramingError(NOT_AN_OBJECT.reason, len(raw))]
    )
    assert decode_messages(raw, batches=R[version].batches) == expected
    decoder = LineDecoder(1 << 16)
    decoder.batches = R[version].batches
    assert decoder.feed(raw + b"\n" + json.dumps(LOG).encode() + b"\n") == [*expected, LOG]
    assert batch_elements(line, batches=R[version].batches) == (
        line if R[version].batches and isinstance(line, list) and line else [line]
    )


def test_only_2025_03_26_has_batches() -> None:
    assert [v for v in SUPPORTED if R[v].batches] == ["2025-03-26"]


def test_docs_table_matches_the_revision_table() -> None:
    """docs/revisions.md lists every feature of the table with each revision's value."""
    text = (Path(__file__).resolve().parents[4] / "docs" / "revisions.md").read_text(
        encoding="utf-8"
    )
    documented: dict[str, list[bool]] = {}
    for line in text.splitlines():
        found = re.match(r"^\| [^|]*\(`([a-z_]+)`\) \|(.*)\|$", line)
        if found:
            cells = [cell.strip() for cell in found.group(2).split("|")]
            documented[found.group(1)] = [cell.startswith("yes") for cell in cells]
    features = [f.name for f in dataclasses.fields(Revision) if f.name != "version"]
    assert sorted(documented) == sorted(features)
    for name in features:
        assert documented[name] == [getattr(R[v], name) for v in SUPPORTED], name
