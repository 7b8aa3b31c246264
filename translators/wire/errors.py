"""The bridge's one exception hierarchy and its mapping to JSON-RPC errors
(docs/decisions.md § 3)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, ClassVar, Final

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022
LEGACY_RESOURCE_NOT_FOUND: Final = -32002
LEGACY_URL_ELICITATION_REQUIRED: Final = -32042
LEGACY_SAMPLING_REJECTED: Final = -1
RESERVED_RANGE: Final = range(-32099, -32019)  # -32099 .. -32020 inclusive

BRIDGE_MARKER: Final = "mrtr-bridge"
INVALID_REQUEST_STATE_MESSAGE: Final = "Invalid requestState: start the request again without it"
EXPIRED_REQUEST_STATE_MESSAGE: Final = (
    "Invalid requestState: it has expired: start the request again without it"
)
USED_REQUEST_STATE_MESSAGE: Final = (
    "Invalid requestState: it was already used (a state is good for one retry): start the "
    "request again without it"
)


class RejectionReason(StrEnum):
    """Why a `requestState` was refused: for the log and the `reason` label of
    `mrtr_bridge_request_state_rejections_total`, never for the client (docs/operations.md)."""

    MALFORMED = "malformed"
    UNKNOWN_KEY = "unknown_key"
    AUTHENTICATION_FAILED = "authentication_failed"
    EXPIRED = "expired"
    OTHER_PRINCIPAL = "other_principal"
    OTHER_REQUEST = "other_request"
    OTHER_REPLICA = "other_replica"
    STALE_ROUND = "stale_round"
    UNKNOWN_HELD_CALL = "unknown_held_call"
    NOT_WAITING = "not_waiting"
    OWNER_UNREACHABLE = (
        "owner_unreachable"  # replicas: the owner did not accept the forwarded retry
    )
    OWNER_NOT_IN_PEER_SET = "owner_not_in_peer_set"  # replicas: no peer answers to the owner's id
    ALREADY_USED = "already_used"  # its held call ended after a retry with this very state


# The two refusals a state's own caller can act on get their own message (docs/security.md): they
# are checked only after the state authenticated and named this caller, so they tell nothing to
# anyone else. Every other reason shares the fixed message.
_OWN_STATE_MESSAGES: Final = {
    RejectionReason.EXPIRED: EXPIRED_REQUEST_STATE_MESSAGE,
    RejectionReason.ALREADY_USED: USED_REQUEST_STATE_MESSAGE,
    RejectionReason.STALE_ROUND: USED_REQUEST_STATE_MESSAGE,  # the call moved on past its round
    RejectionReason.NOT_WAITING: USED_REQUEST_STATE_MESSAGE,  # a doubled retry resumed it
}


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose. `http_status` is the one source of the HTTP
    status an error gets; `http_status_for()` derives the status of an error known only by its code.
    """

    code: ClassVar[int] = INTERNAL_ERROR
    http_status: ClassVar[int] = 200

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ClientFault(BridgeError):
    """The front request is wrong."""


class ParseError(ClientFault):
    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(ClientFault):
    code = INVALID_REQUEST
    http_status = 400


class InvalidParams(ClientFault):
    code = INVALID_PARAMS
    http_status = 200


class InvalidMeta(InvalidParams):
    """A required `_meta` field is missing or malformed: -32602 with HTTP 400 (modern
    `basic/index.mdx` § General fields, `_meta`). Raised only by the front's validation, which
    answers with the class's status; an engine error known only by its code -32602 is plain
    `InvalidParams`."""

    http_status = 400


class InvalidRequestState(InvalidParams):
    """A `requestState` failed a check. The public message says "expired" or "already used" for
    those reasons and is fixed for every other; `reason` itself is for the log only."""

    def __init__(self, reason: RejectionReason) -> None:
        super().__init__(_OWN_STATE_MESSAGES.get(reason, INVALID_REQUEST_STATE_MESSAGE))
        self.reason = reason


class MethodNotFound(ClientFault):
    code = METHOD_NOT_FOUND
    http_status = 404


class HeaderMismatch(ClientFault):
    code = HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(ClientFault):
    code = MISSING_CLIENT_CAPABILITY
    http_status = 400

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": required})


class UnsupportedVersion(ClientFault):
    code = UNSUPPORTED_VERSION
    http_status = 400

    def __init__(self, requested: Any, supported: Sequence[str]) -> None:
        super().__init__(
            f"Unsupported protocol version {requested!r}; this server supports "
            f"{', '.join(supported)}",
            {"supported": list(supported), "requested": requested},
        )


class LimitExceeded(BridgeError):
    """A configured limit was hit; `limit` names the setting. JSON-RPC -32603 with a precise
    message. Raise one of the two kinds below: whose fault it is decides how it is logged."""

    code = INTERNAL_ERROR

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message, {"source": BRIDGE_MARKER, "limit": limit})

    @property
    def limit(self) -> str:
        return str(self.data["limit"])


class ClientLimitExceeded(LimitExceeded, ClientFault):
    """The request or its caller went past a limit of its own (sizes, rounds, per-principal
    caps)."""


class OwnerStalled(BridgeError):
    """Replicas: the replica holding the retry's call did not answer in time. Not a refusal (it
    may be paused or overloaded, not gone): nothing ran again, and the same retry may be sent
    again; `data.retryable` says so."""

    def __init__(self) -> None:
        super().__init__(
            "The replica holding this call did not answer in time; send the same request again",
            {"source": BRIDGE_MARKER, "retryable": True},
        )


class UpstreamLimitExceeded(LimitExceeded):
    """The upstream server went past a limit on what it may send the bridge (pushes per call or
    per round): its fault, neither the client's nor the bridge's."""


class CapacityExceeded(LimitExceeded):
    """The bridge as a whole is full (`upstream.max_sessions`, `held.max_total`): the bridge's
    fault, not the client's; the same request succeeds later."""


class UpstreamFault(BridgeError):
    """The legacy server or the path to it failed; always marked as bridge-local in `data`.

    `message` and `data` are for the log: they may name the upstream URL, the stdio program or
    foreign error text. The client is told `public` (a bridge-authored message free of those, when
    the raising site has one) or the class's `PUBLIC` text, with a correlation id into the log, and
    `reason`: why, in words a client may see (no URL, address, program or secret: the raising site
    writes it so), given as `data.reason` (proxy/common/faults.py, `reported_error`)."""

    code = INTERNAL_ERROR
    PUBLIC: ClassVar[str] = "The upstream server failed"

    def __init__(
        self,
        message: str,
        data: Any = None,
        *,
        public: str | bool = False,
        reason: str | None = None,
    ) -> None:
        marked = {"source": BRIDGE_MARKER, **(data or {})}
        super().__init__(message, marked)
        # True: `message` is itself public
        self.public = message if public is True else public or None
        self.reason = reason

    def public_error(self, correlation_id: str) -> dict[str, Any]:
        """The client's error object: the failure named, no internals."""
        data = {key: value for key, value in self.data.items() if key != "upstream"}
        return {
            "code": self.code,
            "message": self.public or self.PUBLIC,
            "data": {**data, "correlationId": correlation_id},
        }


class UpstreamUnavailable(UpstreamFault):
    PUBLIC = "The upstream server is unavailable"


class UpstreamTimeout(UpstreamFault):
    PUBLIC = "The upstream server did not answer in time"


class UpstreamProtocolError(UpstreamFault):
    PUBLIC = "The upstream server sent a message the bridge cannot use"


class UpstreamSessionLost(UpstreamFault):
    PUBLIC = "The upstream session was lost"


MESSAGE_LIMIT: Final = "upstream.max_line_bytes"  # the one cap on a message from the upstream


class UpstreamMessageTooLarge(UpstreamProtocolError):
    """The upstream sent a message (a JSON body, an SSE event, a stdio line) past the cap on one
    message, `upstream.max_line_bytes`: what was read of it is dropped. The client is told the
    limit, and `data.limit` names the setting."""

    def __init__(self, limit_bytes: int, what: str = "a message") -> None:
        super().__init__(
            f"sent {what} larger than {limit_bytes} bytes ({MESSAGE_LIMIT})",
            {"limit": MESSAGE_LIMIT},
            public=f"The upstream server's answer is larger than the limit of {limit_bytes} bytes",
        )
        self.limit_bytes = limit_bytes


class UpstreamRedirected(UpstreamFault):
    """The upstream answered with a redirect the bridge does not follow (docs/security.md,
    "Upstream redirects"): to another origin, one that would turn the request into a GET, or one
    too many. `target` is where it pointed, without credentials or query, for the log and `check`;
    the client is told the reason only."""

    PUBLIC = (
        "The upstream server redirected the request to another origin, which the bridge does not"
        " follow"
    )

    def __init__(self, message: str, target: str | None, *, public: str | None = None) -> None:
        """`public`: the reason when it is not the other origin (`off_origin` is then False)."""
        super().__init__(message, public=public or self.PUBLIC)
        self.target = target
        self.off_origin = public is None


class ShuttingDown(BridgeError):
    """The bridge is stopping: new work is refused, and work still unfinished at the end of the
    shutdown grace is cut off with this error (never a dropped connection)."""

    code = INTERNAL_ERROR
    MESSAGE: ClassVar[str] = "The bridge is shutting down; send the request again"

    def __init__(self) -> None:
        super().__init__(self.MESSAGE, {"source": BRIDGE_MARKER, "reason": "shutting_down"})


class UpstreamReturnedError(BridgeError):
    """The legacy server answered with a JSON-RPC error; `results.py` decides what the front
    sees."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")), error.get("data"))
        self.error = error


class BridgeBug(BridgeError):
    """An invariant broke. The wire sees only a generic internal error."""

    def __init__(self, detail: str) -> None:
        super().__init__("Internal error")
        self.detail = detail


# The classes whose JSON-RPC code alone decides the HTTP status (InvalidMeta shares -32602 with
# InvalidParams, so its 400 comes from the class, never from the code).
_BY_CODE: Final = (
    ParseError,
    InvalidRequest,
    MethodNotFound,
    HeaderMismatch,
    MissingClientCapability,
    UnsupportedVersion,
)
HTTP_STATUS: Final[dict[int, int]] = {cls.code: cls.http_status for cls in _BY_CODE}


def http_status_for(code: int) -> int:
    """HTTP status of a front reply that carries JSON-RPC error `code` (engine replies)."""
    return HTTP_STATUS.get(code, 200)


__all__ = [
    "BRIDGE_MARKER",
    "EXPIRED_REQUEST_STATE_MESSAGE",
    "HEADER_MISMATCH",
    "HTTP_STATUS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "INVALID_REQUEST_STATE_MESSAGE",
    "LEGACY_RESOURCE_NOT_FOUND",
    "LEGACY_SAMPLING_REJECTED",
    "LEGACY_URL_ELICITATION_REQUIRED",
    "MESSAGE_LIMIT",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "RESERVED_RANGE",
    "UNSUPPORTED_VERSION",
    "USED_REQUEST_STATE_MESSAGE",
    "BridgeBug",
    "BridgeError",
    "CapacityExceeded",
    "ClientFault",
    "ClientLimitExceeded",
    "HeaderMismatch",
    "InvalidMeta",
    "InvalidParams",
    "InvalidRequest",
    "InvalidRequestState",
    "LimitExceeded",
    "MethodNotFound",
    "MissingClientCapability",
    "OwnerStalled",
    "ParseError",
    "RejectionReason",
    "ShuttingDown",
    "UnsupportedVersion",
    "UpstreamFault",
    "UpstreamLimitExceeded",
    "UpstreamMessageTooLarge",
    "UpstreamProtocolError",
    "UpstreamRedirected",
    "UpstreamReturnedError",
    "UpstreamSessionLost",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "http_status_for",
]
