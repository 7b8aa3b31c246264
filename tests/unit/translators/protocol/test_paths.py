"""The path a request takes (translators/protocol/paths.py): which client is legacy by the dual-era
rules, and the one choice both fronts make from the client and the upstream."""

from __future__ import annotations

from typing import Any

import pytest

from translators.protocol.era_detection import DUAL, LEGACY, MODERN, Era
from translators.protocol.paths import (
    Path,
    SessionSide,
    choose_path,
    is_legacy_client,
    is_legacy_client_message,
    relays_after_failure,
)

LEGACY_INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
}
MODERN_CALL: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, LEGACY_INIT),
        ({"mcp-session-id": "s1"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ({"mcp-session-id": "s1"}, None),  # GET / DELETE of a legacy session
        (
            {"mcp-protocol-version": "2025-06-18"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ),
        ({}, [LEGACY_INIT]),  # a 2025-03-26 batch
    ],
)
def test_legacy_client_requests(headers: dict[str, str], message: Any) -> None:
    assert is_legacy_client(headers, message) is True


# unknown: modern errors
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"mcp-protocol-version": "2026-07-28"}, MODERN_CALL),
        (
            {"mcp-protocol-version": "2026-07-28", "mcp-session-id": "ignored"},
            MODERN_CALL,
        ),  # modern wins
        ({}, MODERN_CALL),
        ({"mcp-session-id": "s1"}, MODERN_CALL),  # modern _meta: served statelessly
        (
            {},
            {
                **LEGACY_INIT,
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
            },
        ),
        (
            {"mcp-protocol-version": "v9"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        ),
        ({}, None),
    ],
)
def test_modern_or_unknown_requests_stay_on_the_modern_path(
    headers: dict[str, str], message: Any
) -> None:
    assert is_legacy_client(headers, message) is False


def test_stdio_first_line() -> None:
    assert is_legacy_client_message(LEGACY_INIT) is True
    assert is_legacy_client_message(MODERN_CALL) is False
    assert is_legacy_client_message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) is False


@pytest.mark.parametrize(
    ("era", "probing", "relays_modern", "may_settle", "path"),
    [
        (None, False, False, True, Path.MODERN),  # stdio, or not probed: the engine
        (LEGACY, False, False, True, Path.MODERN),
        (MODERN, False, True, True, Path.MODERN_RELAY),
        (DUAL, False, True, True, Path.MODERN_RELAY),
        (None, True, False, True, Path.SETTLE),  # a probe in flight: wait for it
        (None, True, False, False, Path.MODERN),  # waited: go with what is known
        (DUAL, True, True, False, Path.MODERN_RELAY),
    ],
)
def test_a_modern_client_goes_to_the_engine_or_the_modern_relay(
    era: Era | None, probing: bool, relays_modern: bool, may_settle: bool, path: Path
) -> None:
    chosen = choose_path(
        legacy_client=False,
        era=era,
        probing=probing,
        relays_modern=relays_modern,
        reverse=True,
        may_settle=may_settle,
    )
    assert chosen is path


@pytest.mark.parametrize(
    ("era", "reverse", "session", "may_settle", "path"),
    [
        (LEGACY, True, None, True, Path.LEGACY_RELAY),
        (DUAL, True, None, True, Path.REVERSE),
        (MODERN, True, None, True, Path.REVERSE),
        (None, True, None, True, Path.SETTLE),  # unknown (the upstream was down): find out
        (None, True, None, False, Path.LEGACY_RELAY),  # still unknown after the probe
        (MODERN, False, None, True, Path.LEGACY_REFUSED),
        (DUAL, False, None, True, Path.LEGACY_RELAY),
        (None, False, None, True, Path.LEGACY_RELAY),  # no era tracked (a stdio upstream)
        (LEGACY, True, "reverse", True, Path.REVERSE),  # a session stays where it was opened
        (DUAL, True, "relay", True, Path.LEGACY_RELAY),
        (MODERN, True, "relay", True, Path.LEGACY_REFUSED),  # its upstream lost its legacy side
    ],
)
def test_a_legacy_client_is_relayed_served_by_the_bridge_or_refused(
    era: Era | None, reverse: bool, session: SessionSide | None, may_settle: bool, path: Path
) -> None:
    chosen = choose_path(
        legacy_client=True,
        era=era,
        probing=False,
        relays_modern=era in (MODERN, DUAL),
        reverse=reverse,
        session=session,
        may_settle=may_settle,
    )
    assert chosen is path


def test_an_engine_failure_is_relayed_only_once_the_upstream_is_modern_only() -> None:
    assert relays_after_failure(LEGACY, MODERN) is True
    assert relays_after_failure(None, MODERN) is True
    assert relays_after_failure(MODERN, MODERN) is False  # it was relayed already, or failed there
    assert relays_after_failure(LEGACY, DUAL) is False  # it may have reached the upstream
    assert relays_after_failure(LEGACY, LEGACY) is False
