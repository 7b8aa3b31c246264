"""The one place JSON-RPC envelopes are built (translators/wire/jsonrpc.py)."""

from __future__ import annotations

import pytest

from translators.wire.errors import BridgeBug, MethodNotFound
from translators.wire.jsonrpc import (
    answer,
    error_response,
    notification,
    request,
    result_response,
    to_error_response,
)


def test_requests_and_notifications_carry_params_only_when_given() -> None:
    assert request(7, "tools/call", {"name": "a"}) == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "a"},
    }
    assert request("r", "ping", None) == {"jsonrpc": "2.0", "id": "r", "method": "ping"}
    assert notification("notifications/initialized") == {
        "jsonrpc": "2.0",
        "method": "notifications/initialized",
    }
    assert notification("n", {}) == {"jsonrpc": "2.0", "method": "n", "params": {}}


def test_an_unreadable_id_is_left_out_never_null() -> None:
    error = {"code": -32700, "message": "Parse error"}
    assert error_response(None, error) == {"jsonrpc": "2.0", "error": error}
    assert error_response(0, error) == {"jsonrpc": "2.0", "id": 0, "error": error}
    assert to_error_response(MethodNotFound("no such"), "x") == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32601, "message": "no such"},
    }


def test_an_answer_to_a_push_carries_exactly_one_outcome() -> None:
    assert (
        answer(3, result={}, error=None)
        == result_response(3, {})
        == {"jsonrpc": "2.0", "id": 3, "result": {}}
    )
    assert answer(3, result=None, error={"code": -1, "message": "no"}) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -1, "message": "no"},
    }
    for result, error in (({}, {"code": -1, "message": "no"}), (None, None)):
        with pytest.raises(BridgeBug):
            answer(3, result=result, error=error)
