"""Which path a request takes through the bridge: the one choice both fronts make, from what the
request and the upstream are (docs/architecture.md, "Paths").

| path | when | who serves it |
| --- | --- | --- |
| `MODERN` | a modern client, the upstream's legacy side | the engine translates it |
| `MODERN_RELAY` | a modern client, an upstream that speaks 2026-07-28 | relayed untranslated |
| `LEGACY_RELAY` | a legacy client, an upstream with a legacy side | relayed as a legacy session |
| `REVERSE` | a legacy client, an upstream that speaks 2026-07-28 | served by the bridge itself |
| `LEGACY_REFUSED` | a legacy client, a modern-only upstream, no reverse | refused, versions named |
| `SETTLE` | the upstream's era must be known first | probe, then choose again |

A legacy client is told apart by the dual-era rules (`is_legacy_client`): modern wins (a modern
`MCP-Protocol-Version` or modern `_meta`); a batch, `initialize`, an `Mcp-Session-Id` or a legacy
`MCP-Protocol-Version` are legacy. A legacy client's session stays on the side that opened it:
a session the reverse direction issued is served there, one the relay opened stays relayed.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from translators.protocol.era_detection import DUAL, MODERN, Era
from translators.protocol.eras import INITIALIZE, META_PROTOCOL_VERSION, MODERN_VERSIONS
from translators.protocol.revisions import SUPPORTED
from translators.wire.fast_json import as_object

SessionSide = Literal["reverse", "relay"]  # which side issued a legacy client's session id


class Path(enum.Enum):
    MODERN = "modern"
    MODERN_RELAY = "modern_relay"
    LEGACY_RELAY = "legacy_relay"
    REVERSE = "reverse"
    LEGACY_REFUSED = "legacy_refused"
    SETTLE = "settle"


def is_legacy_client(headers: dict[str, str], message: Any = None) -> bool:
    """Whether a client request is legacy by the dual-era rules (headers with lower-case names;
    `message` the decoded body, None for GET/DELETE). Modern wins: a modern `MCP-Protocol-Version`
    header or modern per-request `_meta` is served statelessly as modern. Otherwise legacy are a
    batch (JSON array), `initialize`, an `Mcp-Session-Id` (the modern front never issues one) and a
    legacy `MCP-Protocol-Version`."""
    version = headers.get("mcp-protocol-version")
    if version in MODERN_VERSIONS:
        return False
    if isinstance(message, list):
        return True
    if isinstance(message, dict):
        meta = as_object(as_object(message.get("params")).get("_meta"))
        if META_PROTOCOL_VERSION in meta:
            return False
        if message.get("method") == INITIALIZE:
            return True
    return "mcp-session-id" in headers or version in SUPPORTED


def is_legacy_client_message(message: Any) -> bool:
    """Whether a stdio client's first message opens a legacy session (`initialize` without modern
    `_meta`)."""
    return (
        isinstance(message, dict)
        and message.get("method") == INITIALIZE
        and is_legacy_client({}, message)
    )


def choose_path(
    *,
    legacy_client: bool,
    era: Era | None,
    probing: bool,
    relays_modern: bool,
    reverse: bool,
    session: SessionSide | None = None,
    may_settle: bool = True,
) -> Path:
    """The path of one request.

    `legacy_client`: `is_legacy_client` (False where legacy clients are not served at all);
    `era`: the upstream's era as known now (None: not known, or not tracked); `probing`: a probe of
    it is in flight; `relays_modern`: modern requests can go to it untranslated (it speaks
    2026-07-28 over a transport the relay has); `reverse`: the bridge can serve legacy sessions in
    front of it; `session`: which side issued the legacy session id the request names;
    `may_settle`: False once the era was waited for (the choice is then made with what is known).
    """
    if not legacy_client:
        if probing and may_settle:
            return Path.SETTLE
        return Path.MODERN_RELAY if relays_modern else Path.MODERN
    if session == "reverse":
        return Path.REVERSE
    if reverse and session is None:
        if era is None and may_settle:
            return Path.SETTLE  # not known yet (the upstream was down): find out
        if era in (MODERN, DUAL):
            return Path.REVERSE
    if era == MODERN:
        return Path.LEGACY_REFUSED
    return Path.LEGACY_RELAY


def relays_after_failure(before: Era | None, now: Era | None) -> bool:
    """Whether a request the engine failed goes to the upstream untranslated instead: the upstream
    became modern-only meanwhile (a legacy session would not open, so the call never reached it)."""
    return before != MODERN and now == MODERN


__all__ = [
    "Path",
    "SessionSide",
    "choose_path",
    "is_legacy_client",
    "is_legacy_client_message",
    "relays_after_failure",
]
