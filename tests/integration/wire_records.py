"""What passed on the wire, from the records of `tests/peers/recording_relay.py` (HTTP) and
`tests/peers/stdio_tee.py` (stdio), validated against the official schemas (`schema_check.py`).

- `upstream_problems(records, revision)`: every message the bridge **sent** to a legacy server of
  `revision` must be valid in that revision, closed (no member the revision does not define). An
  `initialize` is valid in the revision it offers (the server's answer picks the session's
  revision), and on every session the bridge then used (sent a request on) its capabilities are
  valid in `revision` too. A request or notification against the definition of its method (a method
  the revision lacks is a problem), a response against the result definition of the push it answers
  (paired by session and id with the server's request), an error against the revision's error
  envelope. Over HTTP, from 2025-06-18 on, every request after `initialize` carries
  `MCP-Protocol-Version: <revision>`, and no request ever carries another version. The one exception
  is the bridge's era probe (`is_era_probe`: `server/discover` at 2026-07-28, which the spec's
  backwards-compatibility rules send to servers of every era).
- `front_problems(records)`: every message the bridge **sent** to the modern client (the received
  side of a relay in front of it) must be valid at 2026-07-28: a result against its method's result
  definition (`InputRequiredResult` when `resultType` says so), an error against
  `JSONRPCErrorResponse`, a notification against its method's definition.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schema_check import SCHEMA_DIR, definition, errors, method_definitions

from translators.protocol.eras import MODERN_VERSION
from translators.wire.jsonrpc import JsonObject

PUSH_RESULTS = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
    "ping": "EmptyResult",
}
FRONT_RESULTS = {
    "server/discover": "DiscoverResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "completion/complete": "CompleteResult",
    "subscriptions/listen": "SubscriptionsListenResult",
}
HEADER_FROM = "2025-06-18"  # the first revision with the MCP-Protocol-Version header


@dataclass
class WireLog:
    """A record file that grows while peers run; `mark()` and `since()` slice it per test."""

    path: Path

    def records(self) -> list[JsonObject]:
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def mark(self) -> int:
        return len(self.records())

    def since(self, mark: int) -> list[JsonObject]:
        return self.records()[mark:]


def messages(record: JsonObject) -> Iterator[JsonObject]:
    """The JSON-RPC messages of one record (a batch is several); non-JSON payloads are skipped."""
    payload = record["message"]
    items = payload if isinstance(payload, list) else [payload]
    yield from (item for item in items if isinstance(item, dict) and "raw" not in item)


def _error_envelope(revision: str) -> str:
    return "JSONRPCError" if revision < "2025-11-25" else "JSONRPCErrorResponse"


def _where(record: JsonObject, message: JsonObject) -> str:
    what = message.get("method") or ("result" if "result" in message else "error")
    return (
        f"[{record.get('http') or 'stdio'} {record.get('path') or ''} session "
        f"{record.get('session')}] {what}"
    )


def upstream_problems(all_records: list[JsonObject], revision: str, *, since: int = 0) -> list[str]:
    """Problems in what the bridge sent upstream (records from index `since` on; pushes paired over
    all)."""
    pushes = {
        (record["session"], json.dumps(message["id"])): message["method"]
        for record in all_records
        if record["dir"] == "received"
        for message in messages(record)
        if "method" in message and "id" in message
    }
    requests = method_definitions("ClientRequest", revision)
    notifications = method_definitions("ClientNotification", revision)
    used = used_sessions(all_records)
    problems: list[str] = []
    for record in all_records[since:]:
        if record["dir"] != "sent":
            continue
        for message in messages(record):
            if is_era_probe(record, message):
                continue
            if message.get("method") == "initialize":
                found = _check_initialize(message, revision, used=record["session"] in used)
            else:
                found = _check_sent(
                    message,
                    revision,
                    requests,
                    notifications,
                    pushes.get((record["session"], json.dumps(message.get("id")))),
                )
            found += _check_version_header(record, message, revision)
            problems += [f"{_where(record, message)}: {problem}" for problem in found]
    return problems


def is_era_probe(record: JsonObject, message: JsonObject) -> bool:
    """The bridge's era probe: `server/discover` at the modern version, which the 2026-07-28
    backwards-compatibility rules send to a server of any era (a legacy one answers with an error).
    """
    return (
        record["dir"] == "sent"
        and message.get("method") == "server/discover"
        and record.get("version") == MODERN_VERSION
    )


def used_sessions(all_records: list[JsonObject]) -> set[str | None]:
    """Sessions the bridge sent a request on after `initialize` (a first session the bridge closes
    at once, because the server answered another revision than its capabilities were shaped for, is
    not one, nor is it when only pinged: once the second is open the bridge pings the first, to
    learn whether the server serves both, proxy/upstream/session_limit.py)."""
    return {
        record["session"]
        for record in all_records
        if record["dir"] == "sent"
        for message in messages(record)
        if "id" in message
        and message.get("method") not in (None, "initialize", "ping")
        and not is_era_probe(record, message)
    }


def _check_initialize(message: JsonObject, revision: str, *, used: bool) -> list[str]:
    """`initialize` is valid in the revision it offers; a session that went on to be used must also
    have declared its capabilities in the shape of the revision the server answered."""
    offered = message.get("params", {}).get("protocolVersion")
    if not isinstance(offered, str) or not (SCHEMA_DIR / f"schema-{offered}.json").exists():
        return [f"initialize offers {offered!r}, not a revision the tests know"]
    found = errors(message, "JSONRPCRequest", offered)
    found += errors(
        _body(message, "InitializeRequest", offered), "InitializeRequest", offered, closed=True
    )
    if used:
        capabilities = message["params"].get("capabilities")
        found += [
            f"{revision} capabilities: {problem}"
            for problem in errors(capabilities, "ClientCapabilities", revision, closed=True)
        ]
    return found


def _check_sent(
    message: JsonObject,
    revision: str,
    requests: dict[str, str],
    notifications: dict[str, str],
    push: str | None,
) -> list[str]:
    if "method" in message:
        table, envelope = (
            (requests, "JSONRPCRequest")
            if "id" in message
            else (notifications, "JSONRPCNotification")
        )
        name = table.get(message["method"])
        if name is None:
            return [f"{message['method']!r} is not a client message of {revision}"]
        return errors(message, envelope, revision) + errors(
            _body(message, name, revision), name, revision, closed=True
        )
    if "result" in message:
        if push is None:
            return ["a response to no request the server sent"]
        return errors(message, "JSONRPCResponse", revision) + errors(
            message["result"], PUSH_RESULTS[push], revision, closed=True
        )
    return errors(message, _error_envelope(revision), revision)


def _body(message: JsonObject, def_name: str, revision: str) -> JsonObject:
    """The message without the JSON-RPC envelope members its definition leaves out (before
    2025-11-25)."""
    declared = definition(def_name, revision).get("properties", {})
    return {
        key: value
        for key, value in message.items()
        if key in declared or key not in ("jsonrpc", "id")
    }


def _check_version_header(record: JsonObject, message: JsonObject, revision: str) -> list[str]:
    if record.get("http") is None or record.get("path", "").startswith("/messages"):
        return []  # stdio, and the HTTP+SSE transport, have no such header
    version = record.get("version")
    if version is not None and version != revision:
        return [f"MCP-Protocol-Version {version!r} on a {revision} session"]
    if version is None and revision >= HEADER_FROM and message.get("method") != "initialize":
        return ["no MCP-Protocol-Version header"]
    return []


def front_problems(all_records: list[JsonObject], *, since: int = 0) -> list[str]:
    """Problems in what the bridge answered the modern client (records from index `since` on)."""
    asked: dict[Any, str] = {}
    for record in all_records:
        for message in messages(record):
            if record["dir"] == "sent" and "method" in message and "id" in message:
                asked[record["xid"]] = message["method"]
    notifications = method_definitions("ServerNotification", MODERN_VERSION)
    problems: list[str] = []
    for record in all_records[since:]:
        if record["dir"] != "received":
            continue
        for message in messages(record):
            found = _check_answer(message, asked.get(record["xid"]), notifications)
            problems += [f"{_where(record, message)}: {problem}" for problem in found]
    return problems


def _check_answer(
    message: JsonObject, method: str | None, notifications: dict[str, str]
) -> list[str]:
    if "method" in message:
        definition = notifications.get(message["method"])
        if definition is None or "id" in message:
            return [f"{message['method']!r} is not a server notification of {MODERN_VERSION}"]
        return errors(message, definition, MODERN_VERSION)
    if "error" in message:
        return errors(message, "JSONRPCErrorResponse", MODERN_VERSION)
    if method not in FRONT_RESULTS:
        return [f"a result for {method!r}, which the bridge does not serve"]
    result = message.get("result")
    input_required = isinstance(result, dict) and result.get("resultType") == "input_required"
    definition = "InputRequiredResult" if input_required else FRONT_RESULTS[method]
    return errors(message, "JSONRPCResultResponse", MODERN_VERSION) + errors(
        result, definition, MODERN_VERSION
    )
