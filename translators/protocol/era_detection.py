"""Which era a server speaks, from its answer to a `server/discover` probe (docs/architecture.md,
"Eras").

The 2026-07-28 backwards-compatibility rules: a client probes with `server/discover` carrying its
modern version in `_meta` (and, over HTTP, the modern headers).

- A `DiscoverResult` means the server is modern (it lists `supportedVersions`).
- A *recognized modern error* (header mismatch, missing client capability, unsupported protocol
  version: -32020 .. -32022) also means modern: the request was wrong, not the era.
- Anything else (another JSON-RPC error, an HTTP 4xx whose body is not a modern error, no answer in
  time) means legacy: fall back to `initialize`.

Whether a modern server also serves legacy clients (dual-era) is learned from `initialize`: a
negotiated legacy revision means dual, a refusal means modern-only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from translators.protocol.eras import (
    DISCOVER,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSION,
)
from translators.wire.errors import HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION
from translators.wire.fast_json import as_object

Era = Literal["legacy", "modern", "dual"]
LEGACY: Final[Era] = "legacy"
MODERN: Final[Era] = "modern"
DUAL: Final[Era] = "dual"
MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION}
)
PROBE_ID: Final = "mrtr-bridge-era-probe"


@dataclass(frozen=True)
class DiscoverVerdict:
    """What a `server/discover` probe showed: modern or not, and what a modern server said of
    itself."""

    modern: bool
    result: dict[str, Any] | None = None  # the DiscoverResult, when there was one
    reason: str = ""  # why the server counts as legacy, or the modern error it sent
    status: int | None = None  # the HTTP status of the answer (None: stdio, or no HTTP answer)

    @property
    def supported_versions(self) -> list[str]:
        versions = as_object(self.result).get("supportedVersions")
        return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else []

    @property
    def server_info(self) -> dict[str, Any]:
        return as_object(as_object(as_object(self.result).get("_meta")).get(META_SERVER_INFO))

    @property
    def capabilities(self) -> dict[str, Any]:
        return as_object(as_object(self.result).get("capabilities"))


def modern_request(
    method: str,
    client_info: dict[str, Any],
    params: dict[str, Any] | None = None,
    request_id: str = PROBE_ID,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A 2026-07-28 request at the bridge's modern version, declaring `capabilities` (none by
    default)."""
    meta = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: capabilities or {},
        META_CLIENT_INFO: client_info,
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


def discover_request(client_info: dict[str, Any]) -> dict[str, Any]:
    """The probe: `server/discover`."""
    return modern_request(DISCOVER, client_info)


def is_modern_error(message: Any) -> bool:
    """Whether a JSON-RPC message is an error only a modern server sends."""
    error = as_object(as_object(message).get("error"))
    return error.get("code") in MODERN_ERROR_CODES


def verdict_of_reply(message: Any) -> DiscoverVerdict:
    """The verdict from the probe's JSON-RPC reply (stdio, or an HTTP body)."""
    reply = as_object(message)
    if is_modern_error(reply):
        error = as_object(reply.get("error"))
        return DiscoverVerdict(
            True, reason=f"modern error {error.get('code')}: {str(error.get('message'))[:200]}"
        )
    result = reply.get("result")
    if isinstance(result, dict) and isinstance(result.get("supportedVersions"), list):
        return DiscoverVerdict(True, result=result)
    if "error" in reply:
        error = as_object(reply.get("error"))
        return DiscoverVerdict(
            False, reason=f"server/discover refused with error {error.get('code')}"
        )
    return DiscoverVerdict(False, reason="server/discover answered without a DiscoverResult")


def verdict_of_http(status: int, body: Any) -> DiscoverVerdict:
    """The verdict from an HTTP answer to the probe POST; `body` is its parsed JSON (None if not
    JSON)."""
    if is_modern_error(body) or (status == 200 and isinstance(body, dict)):
        return replace(verdict_of_reply(body), status=status)
    return DiscoverVerdict(
        False,
        reason=f"server/discover answered HTTP {status} without a modern error",
        status=status,
    )


SILENT: Final = DiscoverVerdict(False, reason="server/discover got no answer in time")


def era_of(discover: DiscoverVerdict, answers_initialize: bool) -> Era:
    """The server's era from the probe and whether it answered a legacy `initialize`."""
    if not discover.modern:
        return LEGACY
    return DUAL if answers_initialize else MODERN


__all__ = [
    "DUAL",
    "LEGACY",
    "MODERN",
    "MODERN_ERROR_CODES",
    "SILENT",
    "DiscoverVerdict",
    "Era",
    "discover_request",
    "era_of",
    "is_modern_error",
    "modern_request",
    "verdict_of_http",
    "verdict_of_reply",
]
