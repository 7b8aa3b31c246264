"""OAuth pass-through, the pure part: upstream challenges as errors and replies, and the bridge's
Protected Resource Metadata (RFC 9728) made from the upstream's documents.

Relayed metadata: the upstream's document with `resource` set to the bridge's public endpoint
(clients check it against the URL they connect to). `authorization_servers` passes unchanged: the
client must reach the real authorization server, wherever it is. `signed_metadata` is left out (the
upstream signed claims the bridge changed, and they would win over the plain members, RFC 9728
§ 2.2). Every other member is treated as the challenge rewriter treats URLs: a URL on the upstream's
server is moved to the bridge's public origin, except `jwks_uri` (the upstream's keys are not served
there: left out), and a URL on another internal host is left out (in lists, nested objects and
prose too).
A document naming a `resource` that is neither the upstream nor the bridge is refused: it does not
describe this server, and relaying it would vouch for someone else's authorization servers.

A 2025-03-26 server has no such document: it is its own authorization server, with RFC 8414
metadata at its origin. For it the bridge states what that revision implied: a document whose
`authorization_servers` names the upstream's `issuer` (docs/security.md says why the bridge does
not relay the authorization server's own paths instead).
"""

from __future__ import annotations

import json
from typing import Any, Final

from translators.auth.challenges import rewrite_challenge
from translators.auth.public_urls import PublicUrls, origin_of
from translators.wire.errors import INVALID_REQUEST, UpstreamFault
from translators.wire.jsonrpc import error_response

MAX_METADATA_BYTES: Final = 65_536
UNCHANGED_MEMBERS: Final = frozenset({"authorization_servers"})
DROPPED_MEMBERS: Final = frozenset({"signed_metadata"})
UNMOVED_MEMBERS: Final = frozenset({"jwks_uri"})  # left out, not moved, when on the upstream
_LEFT_OUT: Final = object()
_REASONS: Final = {401: "Unauthorized", 403: "Forbidden"}


class UpstreamAuthChallenge(UpstreamFault):
    """The upstream answered `401`, or `403 insufficient_scope`: the client must (re-)authorize.

    `challenge` is the upstream's raw `WWW-Authenticate` (public data, never a credential)."""

    code = INVALID_REQUEST

    def __init__(self, status: int, challenge: str | None) -> None:
        reason = _REASONS.get(status, "Refused")
        super().__init__(
            f"{reason}: the server requires authorization (HTTP {status}); see WWW-Authenticate",
            {"httpStatus": status},
        )
        self.status = status
        self.challenge = challenge


class ChallengeReply(dict[str, Any]):
    """A JSON-RPC error response that the HTTP front sends with `status` and `WWW-Authenticate`.

    A distinct type, so nothing an upstream sends can make the front emit a challenge."""

    def __init__(self, response: dict[str, Any], status: int, www_authenticate: str) -> None:
        super().__init__(response)
        self.status = status
        self.www_authenticate = www_authenticate


def challenge_reply(
    exc: UpstreamAuthChallenge, request_id: Any, urls: PublicUrls
) -> ChallengeReply:
    """The front's answer to an upstream challenge: same status, rewritten challenge."""
    response = error_response(request_id, exc.to_error())
    return ChallengeReply(response, exc.status, rewrite_challenge(exc.challenge, urls))


class MetadataRefused(ValueError):
    """An upstream metadata document the bridge will not relay; the message is for the log."""


def _json_object(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_METADATA_BYTES:
        raise MetadataRefused(f"larger than {MAX_METADATA_BYTES} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise MetadataRefused("not JSON") from None
    if not isinstance(document, dict):
        raise MetadataRefused("not a JSON object")
    return document


def relay_metadata(body: bytes, urls: PublicUrls) -> dict[str, Any]:
    """The upstream's Protected Resource Metadata as the bridge serves it; raises
    `MetadataRefused`."""
    document = _json_object(body)
    resource = document.get("resource")
    if not isinstance(resource, str):
        raise MetadataRefused("no resource member")
    if not urls.is_own_resource(resource):
        raise MetadataRefused("it names a foreign resource")
    relayed: dict[str, Any] = {}
    for name, value in document.items():
        if name in DROPPED_MEMBERS:
            continue
        try:
            public = value if name in UNCHANGED_MEMBERS else _public_value(name, value, urls)
        except RecursionError:
            raise MetadataRefused("nested too deeply") from None
        if public is not _LEFT_OUT:
            relayed[name] = public
    relayed["resource"] = urls.endpoint
    return relayed


def _public_value(member: str, value: Any, urls: PublicUrls) -> Any:
    """`value` of `member` as clients may see it, or `_LEFT_OUT`."""
    if isinstance(value, str):
        public = urls.public_text(value, move=member not in UNMOVED_MEMBERS)
        return _LEFT_OUT if public is None else public
    if isinstance(value, list):
        items = (_public_value(member, item, urls) for item in value)
        return [item for item in items if item is not _LEFT_OUT]
    if isinstance(value, dict):
        pairs = ((key, _public_value(member, item, urls)) for key, item in value.items())
        return {key: item for key, item in pairs if item is not _LEFT_OUT}
    return value


def metadata_from_issuer(body: bytes, urls: PublicUrls) -> dict[str, Any]:
    """Protected Resource Metadata for a 2025-03-26 server from its RFC 8414 document (its issuer
    must be on the upstream's origin); raises `MetadataRefused`."""
    document = _json_object(body)
    issuer = document.get("issuer")
    if (
        not isinstance(issuer, str)
        or origin_of(issuer) is None
        or origin_of(issuer) != urls.upstream_origin
    ):
        raise MetadataRefused("its issuer is not on the upstream's origin")
    metadata: dict[str, Any] = {
        "resource": urls.endpoint,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
    }
    scopes = document.get("scopes_supported")
    if isinstance(scopes, list) and all(isinstance(scope, str) for scope in scopes):
        metadata["scopes_supported"] = scopes
    return metadata


__all__ = [
    "MAX_METADATA_BYTES",
    "ChallengeReply",
    "MetadataRefused",
    "UpstreamAuthChallenge",
    "challenge_reply",
    "metadata_from_issuer",
    "relay_metadata",
]
