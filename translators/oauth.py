"""OAuth pass-through, the pure part: upstream challenges as errors and replies, and the bridge's
Protected Resource Metadata (RFC 9728) made from the upstream's documents.

Relayed metadata: the upstream's document with `resource` set to the bridge's public endpoint
(clients check it against the URL they connect to); `authorization_servers` and every other member
pass unchanged. A document naming a `resource` that is neither the upstream nor the bridge is
refused: it does not describe this server, and relaying it would vouch for someone else's
authorization servers.

A 2025-03-26 server has no such document: it is its own authorization server, with RFC 8414
metadata at its origin. For it the bridge states what that revision implied: a document whose
`authorization_servers` names the upstream's `issuer` (docs/security.md says why the bridge does
not relay the authorization server's own paths instead).
"""

from __future__ import annotations

import json
from typing import Any, Final

from translators.challenges import rewrite_challenge
from translators.errors import INVALID_REQUEST, UpstreamFault
from translators.jsonrpc import error_response
from translators.public_urls import PublicUrls, canonical_resource, origin_of

MAX_METADATA_BYTES: Final = 65_536
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
    if canonical_resource(resource) not in urls.own_resources:
        raise MetadataRefused("it names a foreign resource")
    return {**document, "resource": urls.endpoint}


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
