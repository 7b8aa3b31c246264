"""Bridge errors as the client sees them: the failure named, never internals (docs/security.md).

An `UpstreamFault` carries, for the log, what went wrong in full: the upstream URL (without
credentials), the stdio program, exit codes, aiohttp's or the legacy server's own error text. The
client gets only `UpstreamFault.public_error()`: a bridge-authored message and a `correlationId`,
and the full message is logged once under that id (`front_request_failed`), so an operator can find
it from what the client reports.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import structlog

from translators.wire.errors import BridgeError, CapacityExceeded, UpstreamFault

log = structlog.get_logger("proxy.common.faults")


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
    return exc.public_error(correlation_id)


# Hears of every error the bridge answers itself outside the engine (the metrics' `observe_error`).
Observe = Callable[[BridgeError], None]

__all__ = ["Observe", "new_correlation_id", "reported_error"]
