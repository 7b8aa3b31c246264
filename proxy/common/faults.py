"""Bridge errors as the client sees them: the failure named, never internals (docs/security.md).

An `UpstreamFault` carries, for the log, what went wrong in full: the upstream URL (without
credentials), the stdio program, exit codes, aiohttp's or the legacy server's own error text. The
client gets only `UpstreamFault.public_error()`: a bridge-authored message and a `correlationId`,
and the full message is logged once under that id (`front_request_failed`), so an operator can find
it from what the client reports. It also gets why, as `data.reason`, where the fault (or the fault
it was raised from) knows it in words a client may see (`UpstreamFault.reason`: "it closed the
stream of tools/call before answering", "cannot connect: connection refused", a stdio server's last
stderr lines when it exited before answering `initialize`): masked by the log's redaction patterns
and cut to `MAX_REASON_CHARS` (proxy/common/shown.py), so a desktop user who never sees the
bridge's stderr still learns what to fix. Every path answers through here: the modern engine, the
legacy and modern relays, the reverse direction, the stdio front.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Final

import structlog

from proxy.common.shown import bounded, masked
from translators.wire.errors import BridgeError, CapacityExceeded, UpstreamFault

log = structlog.get_logger("proxy.common.faults")
MAX_REASON_CHARS: Final = 600  # of `data.reason` (a few lines of a stdio server's stderr)


def new_correlation_id() -> str:
    return secrets.token_hex(8)


def reported_error(exc: BridgeError) -> dict[str, Any]:
    """Log `exc` and return the JSON-RPC error object the client receives for it."""
    # the bridge is full: an operator's concern, not the client's
    if isinstance(exc, CapacityExceeded):
        log.warning(
            "front_request_failed", code=exc.code, error=exc.message, kind="CapacityExceeded"
        )
        return exc.to_error()
    if not isinstance(exc, UpstreamFault):
        log.info("front_request_failed", code=exc.code, error=exc.message)
        return exc.to_error()
    correlation_id = new_correlation_id()
    log.warning(
        "front_request_failed",
        code=exc.code,
        error=exc.message,
        kind=type(exc).__name__,
        correlation_id=correlation_id,
    )
    error = exc.public_error(correlation_id)
    reason = shown_reason(exc)
    if reason is not None:
        error["data"]["reason"] = reason
    return error


def shown_reason(exc: UpstreamFault) -> str | None:
    """The first `reason` of `exc` and the faults it was raised from, masked and cut."""
    cause: BaseException | None = exc
    seen: set[int] = set()  # a chain of causes may loop (`raise exc from exc`)
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, UpstreamFault) and cause.reason:
            return bounded(masked(cause.reason), MAX_REASON_CHARS)
        seen.add(id(cause))
        cause = cause.__cause__
    return None


# Hears of every error the bridge answers itself outside the engine (the metrics' `observe_error`).
Observe = Callable[[BridgeError], None]

__all__ = ["MAX_REASON_CHARS", "Observe", "new_correlation_id", "reported_error", "shown_reason"]
