"""How an upstream failure reaches the client (proxy/common/faults.py, `reported_error`): the
bridge's public message, a correlation id into the log, and why as `data.reason` where the fault
(or the fault it was raised from) knows it, masked by the log's redaction patterns and cut to a
bound; nothing else of the fault's message."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from proxy.common.faults import MAX_REASON_CHARS, reported_error
from proxy.common.shown import REDACTED
from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    UpstreamProtocolError,
    UpstreamUnavailable,
)

URL = "http://10.1.2.3:8931/mcp"
STATE = "v1." + "A" * 40  # what a sealed requestState looks like


def test_the_reason_is_given_beside_the_public_message_and_the_log_has_the_rest() -> None:
    fault = UpstreamProtocolError(
        f"Upstream {URL} closed the stream of tools/call before answering",
        {"upstream": URL},
        reason="it closed the stream of tools/call before answering",
    )
    with capture_logs() as logged:
        error = reported_error(fault)
    correlation_id = error["data"]["correlationId"]
    assert error == {
        "code": INTERNAL_ERROR,
        "message": UpstreamProtocolError.PUBLIC,
        "data": {
            "source": BRIDGE_MARKER,
            "correlationId": correlation_id,
            "reason": "it closed the stream of tools/call before answering",
        },
    }
    (entry,) = logged
    assert entry["correlation_id"] == correlation_id and URL in entry["error"]


def test_the_reason_of_the_fault_it_was_raised_from_is_given() -> None:
    """A stdio server that exited before answering `initialize`: the fault the client gets wraps
    the one that knows why."""
    try:
        try:
            raise UpstreamUnavailable("lost", reason="exited with code 1; its stderr ended with: x")
        except UpstreamUnavailable as lost:
            raise UpstreamUnavailable("Legacy stdio server '/opt/x' stopped") from lost
    except UpstreamUnavailable as fault:
        error = reported_error(fault)
    assert error["data"]["reason"] == "exited with code 1; its stderr ended with: x"


def test_without_a_reason_there_is_none() -> None:
    error = reported_error(UpstreamUnavailable(f"Cannot start {URL}"))
    assert set(error["data"]) == {"source", "correlationId"}


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("token Bearer abc.def-123 refused", f"token Bearer {REDACTED} refused"),
        ("basic   dXNlcjpwYXNz=", f"basic   {REDACTED}"),
        (f"state {STATE} is bad", f"state v1.{REDACTED} is bad"),
    ],
)
def test_a_reason_is_masked_by_the_redaction_patterns(said: str, shown: str) -> None:
    """A stdio server's stderr is its own words: a credential or a sealed state in them is
    masked, as in the log."""
    error = reported_error(UpstreamUnavailable("exited", reason=said))
    assert error["data"]["reason"] == shown


def test_a_reason_is_cut_to_its_bound() -> None:
    said = "x" * (3 * MAX_REASON_CHARS)
    reason = reported_error(UpstreamUnavailable("exited", reason=said))["data"]["reason"]
    assert reason == "x" * MAX_REASON_CHARS + f"...[cut, {3 * MAX_REASON_CHARS} characters]"


def test_a_fault_that_is_its_own_cause_is_reported_at_once() -> None:
    """`raise fault from fault` makes a loop of causes: the walk for a reason ends anyway."""
    fault = UpstreamUnavailable("looped")
    fault.__cause__ = fault
    assert set(reported_error(fault)["data"]) == {"source", "correlationId"}
