"""One source per fact in translators/wire/errors.py: HTTP statuses, rejection reasons, whose fault
a limit is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from proxy.common.faults import reported_error
from proxy.observe.metrics import BridgeMetrics
from translators.auth.oauth import UpstreamAuthChallenge
from translators.wire.errors import (
    EXPIRED_REQUEST_STATE_MESSAGE,
    HTTP_STATUS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST_STATE_MESSAGE,
    USED_REQUEST_STATE_MESSAGE,
    BridgeError,
    CapacityExceeded,
    ClientFault,
    ClientLimitExceeded,
    InvalidMeta,
    InvalidParams,
    InvalidRequestState,
    LimitExceeded,
    RejectionReason,
    http_status_for,
)

OPERATIONS = Path(__file__).resolve().parents[4] / "docs" / "operations.md"


def every_error_class(base: type[BridgeError] = BridgeError) -> list[type[BridgeError]]:
    found = [base]
    for sub in base.__subclasses__():
        found.extend(every_error_class(sub))
    return found


def test_the_status_table_is_derived_from_the_classes() -> None:
    """Every class gets the status of its code, but InvalidMeta (400, shares -32602 with
    InvalidParams) and an upstream auth challenge (answered with the upstream's own 401 or 403, per
    instance)."""
    classes = [cls for cls in every_error_class() if cls is not UpstreamAuthChallenge]
    assert UpstreamAuthChallenge in every_error_class()
    assert {cls.__name__ for cls in classes if cls.http_status != http_status_for(cls.code)} == {
        "InvalidMeta"
    }
    assert HTTP_STATUS == {
        cls.code: cls.http_status
        for cls in classes
        if cls.http_status != 200 and cls is not InvalidMeta
    }


def test_invalid_meta_is_invalid_params_with_400_as_the_spec_says() -> None:
    """A missing or malformed required `_meta` field: -32602 and HTTP 400; other invalid params keep
    200."""
    assert (InvalidMeta.code, InvalidMeta.http_status) == (INVALID_PARAMS, 400)
    assert (InvalidParams.code, InvalidParams.http_status) == (INVALID_PARAMS, 200)
    assert http_status_for(INVALID_PARAMS) == 200


def test_server_wide_capacity_is_the_bridges_fault_and_a_callers_own_limit_is_the_clients() -> None:
    full, own = (
        CapacityExceeded("full", "held.max_total"),
        ClientLimitExceeded("too many", "held.max_rounds"),
    )
    assert (isinstance(full, LimitExceeded), isinstance(full, ClientFault)) == (True, False)
    assert (isinstance(own, LimitExceeded), isinstance(own, ClientFault)) == (True, True)
    assert (full.code, full.limit, own.limit) == (
        INTERNAL_ERROR,
        "held.max_total",
        "held.max_rounds",
    )


@pytest.mark.parametrize("reason", list(RejectionReason))
def test_each_rejection_reason_is_its_own_metric_label(reason: RejectionReason) -> None:
    metrics = BridgeMetrics()
    metrics.upstream("alpha").observe_error(InvalidRequestState(reason))
    rejections = "mrtr_bridge_request_state_rejections_total"
    assert metrics.sample(rejections, upstream="alpha", reason=reason.value) == 1


_OWN_MESSAGES = {
    RejectionReason.EXPIRED: EXPIRED_REQUEST_STATE_MESSAGE,
    RejectionReason.ALREADY_USED: USED_REQUEST_STATE_MESSAGE,
    RejectionReason.STALE_ROUND: USED_REQUEST_STATE_MESSAGE,
    RejectionReason.NOT_WAITING: USED_REQUEST_STATE_MESSAGE,
}


@pytest.mark.parametrize("reason", list(RejectionReason))
def test_expired_and_already_used_have_their_own_message_and_every_other_reason_the_fixed_one(
    reason: RejectionReason,
) -> None:
    """The two refusals a caller can act on say which; the rest share one message, and no message
    names a reason label or holds anything but fixed text."""
    error = InvalidRequestState(reason).to_error()
    assert error == {
        "code": INVALID_PARAMS,
        "message": _OWN_MESSAGES.get(reason, INVALID_REQUEST_STATE_MESSAGE),
    }
    assert error["message"].endswith("start the request again without it")
    assert reason.value not in error["message"] or reason is RejectionReason.EXPIRED


def test_the_documented_rejection_reasons_are_the_enum() -> None:
    """docs/operations.md lists exactly the reasons the bridge raises."""
    row = next(
        line
        for line in OPERATIONS.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `mrtr_bridge_request_state_rejections_total`")
    )
    assert set(re.findall(r"`([a-z_]+)`", row.split("refused retries:")[1])) == {
        r.value for r in RejectionReason
    }


def test_capacity_is_logged_as_the_bridges_concern_and_a_clients_limit_as_information() -> None:
    with capture_logs() as logs:
        full = reported_error(CapacityExceeded("The bridge is full", "upstream.max_sessions"))
        own = reported_error(ClientLimitExceeded("Too many", "held.max_per_principal"))
    assert [(entry["log_level"], entry.get("kind")) for entry in logs] == [
        ("warning", "CapacityExceeded"),
        ("info", None),
    ]
    assert (full["data"]["limit"], own["data"]["limit"]) == (
        "upstream.max_sessions",
        "held.max_per_principal",
    )
