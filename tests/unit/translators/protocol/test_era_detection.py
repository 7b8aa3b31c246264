"""Era detection from a `server/discover` probe's answer (the 2026-07-28 backwards-compatibility
rules)."""

from __future__ import annotations

from typing import Any

import pytest

from translators.protocol.era_detection import (
    DUAL,
    LEGACY,
    MODERN,
    PROBE_ID,
    SILENT,
    discover_request,
    era_of,
    verdict_of_http,
    verdict_of_reply,
)

DISCOVERED: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": PROBE_ID,
    "result": {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
    },
}


def _error(code: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": PROBE_ID, "error": {"code": code, "message": "m"}}


def test_probe_carries_the_modern_version_in_meta() -> None:
    request = discover_request({"name": "c", "version": "1"})
    assert request["method"] == "server/discover"
    assert request["params"]["_meta"] == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    }


def test_discover_result_is_modern_with_what_it_says() -> None:
    verdict = verdict_of_reply(DISCOVERED)
    assert verdict.modern is True
    assert verdict.supported_versions == ["2026-07-28"]
    assert verdict.capabilities == {"tools": {}}
    assert verdict.server_info == {"name": "s", "version": "1"}


@pytest.mark.parametrize("code", [-32020, -32021, -32022])
def test_recognized_modern_error_is_modern(code: int) -> None:
    assert verdict_of_reply(_error(code)).modern is True
    assert verdict_of_http(400, _error(code)).modern is True


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, 0])
def test_any_other_error_is_legacy(code: int) -> None:
    verdict = verdict_of_reply(_error(code))
    assert (verdict.modern, verdict.reason) == (False, f"server/discover refused with error {code}")


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, None),
        (404, None),
        (405, {"detail": "x"}),
        (400, _error(-32600)),
        (200, {"jsonrpc": "2.0", "id": PROBE_ID, "result": {}}),
    ],
)
def test_http_answers_without_a_modern_error_are_legacy(status: int, body: Any) -> None:
    assert verdict_of_http(status, body).modern is False


def test_http_discover_result_is_modern() -> None:
    assert verdict_of_http(200, DISCOVERED).supported_versions == ["2026-07-28"]


def test_silence_is_legacy() -> None:
    assert (SILENT.modern, SILENT.reason) == (False, "server/discover got no answer in time")


def test_era_from_probe_and_initialize() -> None:
    modern = verdict_of_reply(DISCOVERED)
    assert era_of(modern, answers_initialize=True) == DUAL
    assert era_of(modern, answers_initialize=False) == MODERN
    assert era_of(SILENT, answers_initialize=True) == LEGACY
