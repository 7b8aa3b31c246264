"""The proof that a forwarded retry comes from a replica (docs/security.md § Forwarding between
replicas).

A replica that forwards a retry to its owner adds one header, `Mrtr-Bridge-Forwarded`:

    v1 kid=<key id> from=<sender replica> to=<owner replica> ts=<unix ms> mac=<base64url>

The MAC is HMAC-SHA256 under a key derived from the `requestState` key `kid` (every replica already
shares those keys: it must, to open another replica's `requestState`), with a label that keeps the
derived key apart from the AEAD key. It covers the version, key id, both replica ids, the time, the
request path, a digest of the body and a digest of the `Authorization` header: the proof cannot be
moved to another request or another caller, and it goes stale after `cluster.proof_max_age_s`.

Pure: the clock reading and the keys are parameters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Final

HEADER: Final = "Mrtr-Bridge-Forwarded"
VERSION: Final = "v1"
_DERIVE_LABEL: Final = b"mrtr-bridge/forward-proof/v1"
_FIELD: Final = re.compile(r"([a-z]+)=([A-Za-z0-9_\-.]{1,64})")
MAX_HEADER_LENGTH: Final = 256


class ProofRejected(ValueError):
    """A forwarded request's proof is missing a field, stale, for another replica, or forged."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ForwardedFrom:
    """What a valid proof says: which replica sent the request, to which."""

    sender: str
    owner: str


class ProofKeys:
    """MAC keys derived from the requestState keys, by key id; the active one signs."""

    def __init__(self, keys: dict[str, bytes], active: str) -> None:
        if active not in keys:
            raise ValueError(f"active key id {active!r} is not among the keys")
        self._keys = {
            kid: hmac.new(key, _DERIVE_LABEL, hashlib.sha256).digest() for kid, key in keys.items()
        }
        self.active = active

    def key(self, kid: str) -> bytes | None:
        return self._keys.get(kid)


def _mac(
    key: bytes,
    kid: str,
    sender: str,
    owner: str,
    ts_ms: int,
    path: str,
    body: bytes,
    authorization: str | None,
) -> str:
    message = "\n".join(
        (
            VERSION,
            kid,
            sender,
            owner,
            str(ts_ms),
            path,
            hashlib.sha256(body).hexdigest(),
            hashlib.sha256((authorization or "").encode("utf-8", "surrogateescape")).hexdigest(),
        )
    ).encode("utf-8", "surrogateescape")
    return (
        base64.urlsafe_b64encode(hmac.new(key, message, hashlib.sha256).digest())
        .rstrip(b"=")
        .decode()
    )


def sign(
    keys: ProofKeys,
    *,
    sender: str,
    owner: str,
    now_ms: int,
    path: str,
    body: bytes,
    authorization: str | None,
) -> str:
    """The header value proving that replica `sender` forwards this request to `owner`."""
    key = keys.key(keys.active)
    assert key is not None
    mac = _mac(key, keys.active, sender, owner, now_ms, path, body, authorization)
    return f"{VERSION} kid={keys.active} from={sender} to={owner} ts={now_ms} mac={mac}"


def _fields(value: str) -> dict[str, str]:
    if len(value) > MAX_HEADER_LENGTH or not value.startswith(VERSION + " "):
        raise ProofRejected("malformed")
    fields: dict[str, str] = {}
    for part in value[len(VERSION) + 1 :].split(" "):
        match = _FIELD.fullmatch(part)
        if match is None or match[1] in fields:
            raise ProofRejected("malformed")
        fields[match[1]] = match[2]
    if set(fields) != {"kid", "from", "to", "ts", "mac"} or not fields["ts"].isdigit():
        raise ProofRejected("malformed")
    return fields


def verify(
    value: str,
    keys: ProofKeys,
    *,
    me: str,
    now_ms: int,
    max_age_ms: int,
    path: str,
    body: bytes,
    authorization: str | None,
) -> ForwardedFrom:
    """Check a proof header; raises `ProofRejected(reason)` (for the log and a metric) unless it
    holds."""
    fields = _fields(value)
    key = keys.key(fields["kid"])
    if key is None:
        raise ProofRejected("unknown_key")
    expected = _mac(
        key,
        fields["kid"],
        fields["from"],
        fields["to"],
        int(fields["ts"]),
        path,
        body,
        authorization,
    )
    try:
        genuine = hmac.compare_digest(expected.encode(), fields["mac"].encode())
    except (TypeError, binascii.Error):
        genuine = False
    if not genuine:
        raise ProofRejected("bad_mac")
    if abs(now_ms - int(fields["ts"])) > max_age_ms:
        raise ProofRejected("stale")
    if fields["to"] != me:
        raise ProofRejected("other_replica")
    return ForwardedFrom(fields["from"], fields["to"])


__all__ = ["HEADER", "ForwardedFrom", "ProofKeys", "ProofRejected", "sign", "verify"]
