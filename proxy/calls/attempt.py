"""What one front request brings to a call (`Attempt`), what the call sends upstream
(`UpstreamRequest`), and the replies a held call gives back (`Reply`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from proxy.common.front_request import NotificationSink
from translators.held.events import ReplyError, ReplyInputRequired, ReplyResult
from translators.wire.jsonrpc import JsonObject

ROUND_ATTRIBUTE = "mrtr_bridge.round"  # a span attribute: the input round
Reply = ReplyInputRequired | ReplyResult | ReplyError


class Attempt(NamedTuple):
    """One front request attached to a held call: where its notifications go. (This and
    `UpstreamRequest` are named tuples, not frozen dataclasses: every call builds both, and a
    frozen dataclass sets each field through `object.__setattr__`.)"""

    attempt_id: int
    sink: NotificationSink
    progress_token: str | int | None
    log_level: str | None


class UpstreamRequest(NamedTuple):
    method: str
    params: JsonObject
    headers: Mapping[str, str]
    progress_token: str  # the bridge's upstream progress token for this call


__all__ = ["ROUND_ATTRIBUTE", "Attempt", "Reply", "UpstreamRequest"]
