"""Upstream notifications -> the front attempt they belong to (translators.protocol.notifications;
docs/decisions.md § 12)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from schema_check import assert_valid

from translators.protocol.eras import LOG_LEVELS, META_SUBSCRIPTION_ID, PROGRESS
from translators.protocol.eras import LOG_MESSAGE as MESSAGE
from translators.protocol.notifications import log_level_admits, route_notification
from translators.wire.jsonrpc import JsonObject


def _progress(token: Any, **extra: Any) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": PROGRESS,
        "params": {"progressToken": token, "progress": 3, **extra},
    }


def _log(level: Any, **extra: Any) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": MESSAGE,
        "params": {"level": level, "data": {"line": "x"}, **extra},
    }


@pytest.mark.parametrize(("upstream_token", "front_token"), [(17, "front-a"), ("up-1", 5), (0, 0)])
def test_progress_is_remapped_to_the_front_token(
    upstream_token: str | int, front_token: str | int
) -> None:
    """Progress carrying the bridge's upstream token is re-sent under the attempt's own token."""
    assert_valid(_progress(upstream_token), "ProgressNotification", "legacy")
    routed = route_notification(
        _progress(upstream_token, total=10, message="step 3"), upstream_token, front_token, None
    )
    assert routed == {
        "jsonrpc": "2.0",
        "method": PROGRESS,
        "params": {"progressToken": front_token, "progress": 3, "total": 10, "message": "step 3"},
    }
    assert_valid(routed, "ProgressNotification", "modern")


@pytest.mark.parametrize(
    ("message_token", "upstream_token", "front_token"),
    [
        (18, 17, "front-a"),
        ("17", 17, "front-a"),
        (17, 17, None),
        (17, None, "front-a"),
        (None, None, "front-a"),
    ],
)
def test_progress_without_a_matching_token_is_dropped(
    message_token: Any, upstream_token: str | int | None, front_token: str | int | None
) -> None:
    """Progress is forwarded only when it names this call's upstream token and the attempt asked for
    progress."""
    assert (
        route_notification(_progress(message_token), upstream_token, front_token, "debug") is None
    )


def test_progress_does_not_mutate_the_upstream_message() -> None:
    """The upstream notification keeps its own token after remapping."""
    message = _progress(17)
    route_notification(message, 17, "front", None)
    assert message["params"]["progressToken"] == 17


@pytest.mark.parametrize(("requested", "level"), list(itertools.product(LOG_LEVELS, LOG_LEVELS)))
def test_log_levels_follow_syslog_order(requested: str, level: str) -> None:
    """A level is admitted exactly when it is at or above the requested one."""
    assert log_level_admits(requested, level) is (
        LOG_LEVELS.index(level) >= LOG_LEVELS.index(requested)
    )


@pytest.mark.parametrize(
    ("requested", "level"),
    [
        (None, LOG_LEVELS[-1]),
        ("verbose", LOG_LEVELS[-1]),
        (LOG_LEVELS[0], "verbose"),
        (LOG_LEVELS[0], None),
        (LOG_LEVELS[0], 3),
        (LOG_LEVELS[0], [LOG_LEVELS[0]]),
    ],
)
def test_log_levels_unknown_or_unrequested_are_refused(requested: Any, level: Any) -> None:
    """Without a requested level, or with an unknown level on either side, nothing is admitted."""
    assert log_level_admits(requested, level) is False


def test_log_levels_are_the_eight_syslog_levels_in_order() -> None:
    """The order the filter relies on is debug < info < ... < emergency, as in the modern schema."""
    assert LOG_LEVELS[0] == "debug" and LOG_LEVELS[-1] == "emergency" and len(LOG_LEVELS) == 8
    for level in LOG_LEVELS:
        assert_valid(level, "LoggingLevel", "modern")


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_log_message_at_or_above_the_level_is_forwarded(level: str) -> None:
    """A log message the attempt asked for is forwarded unchanged and valid for the modern era."""
    message = _log(level, logger="db")
    assert_valid(message, "LoggingMessageNotification", "legacy")
    routed = route_notification(message, 17, "front", LOG_LEVELS[0])
    assert routed == message
    assert_valid(routed, "LoggingMessageNotification", "modern")


@pytest.mark.parametrize(
    ("requested", "level"), [(LOG_LEVELS[3], LOG_LEVELS[2]), (LOG_LEVELS[-1], LOG_LEVELS[0])]
)
def test_log_message_below_the_level_is_dropped(requested: str, level: str) -> None:
    """A log message below the attempt's requested level is dropped."""
    assert route_notification(_log(level), None, None, requested) is None


def test_log_message_without_a_requested_level_is_dropped() -> None:
    """An attempt that set no `logLevel` gets no log messages at all."""
    assert route_notification(_log(LOG_LEVELS[-1]), 17, "front", None) is None


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "file:///a"},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": "e"},
        },
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t"}},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": "not an object"},
        {"jsonrpc": "2.0", "method": PROGRESS},
        {"jsonrpc": "2.0", "method": PROGRESS, "params": {"_meta": {META_SUBSCRIPTION_ID: 1}}},
        {"jsonrpc": "2.0"},
    ],
)
def test_other_notifications_are_not_request_scoped(message: JsonObject) -> None:
    """List changes, updates, completions and cancellations never go on a request's stream."""
    assert route_notification(message, 17, "front", LOG_LEVELS[0]) is None
