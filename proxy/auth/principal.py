"""Who is calling: a digest of the caller's credential, never the credential (docs/decisions.md §
8).

Upstream sessions, held calls and `requestState` are keyed by this principal, so one user's state
is never reachable from another's. Each source has its own prefix inside the digest, so a header
value can never collide with an Authorization value or with the anonymous principal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

from config.settings import IdentitySettings

LOCAL_PRINCIPAL: Final = "local"
DIGEST_HEX_CHARS: Final = 32


def _hash(material: str) -> str:
    return hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest()[
        :DIGEST_HEX_CHARS
    ]


def _digest(source: str, value: str | None) -> str:
    # ANONYMOUS_PRINCIPAL (below) is computed once, for every caller without a credential
    return ANONYMOUS_PRINCIPAL if value is None else _hash(f"{source}:{value}")


def principal_of(headers: Mapping[str, str], identity: IdentitySettings) -> str:
    """The caller's principal from its request headers (`headers` keyed by lower-case name).

    `authorization`: digest of the Authorization header; `header`: digest of the trusted header
    `identity.principal_header`; either one absent gives the one anonymous digest. `none`: the
    fixed local principal (a single-user sidecar)."""
    if identity.principal == "none":
        return LOCAL_PRINCIPAL
    if identity.principal == "header":
        name = identity.principal_header or ""
        return _digest("header", headers.get(name) or None)
    return _digest("authorization", headers.get("authorization") or None)


ANONYMOUS_PRINCIPAL: Final = _hash("anonymous:")

__all__ = ["ANONYMOUS_PRINCIPAL", "DIGEST_HEX_CHARS", "LOCAL_PRINCIPAL", "principal_of"]
