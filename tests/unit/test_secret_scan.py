"""The suite-wide secret scan recognizes real secrets and lets redacted ones pass."""

from __future__ import annotations

import os

from secret_scan import secrets_in

from translators.held.request_state import KeyRing, StateClaims, keys_digest, principal_digest, seal


def _token() -> str:
    ring = KeyRing({"k1": os.urandom(32)}, "k1")
    claims = StateClaims(
        os.urandom(16),
        1,
        "r0",
        principal_digest("p"),
        "tools/call",
        os.urandom(16),
        keys_digest(["a"]),
        10**13,
    )
    return seal(claims, ring, os.urandom(12))


def test_a_sealed_request_state_is_found() -> None:
    """A real requestState anywhere in a log line is reported, without repeating it."""
    token = _token()
    found = secrets_in(f'{{"event": "x", "state": "{token}"}}')
    assert found == ["a requestState at offset 25"] and token not in found[0]


def test_bearer_tokens_are_found_unless_redacted() -> None:
    """`Bearer <token>` is a leak; `Bearer [redacted]` (the redaction processor's mask) is not."""
    assert secrets_in("authorization=Bearer abc.DEF-123_xyz") == ["a bearer token at offset 14"]
    assert secrets_in("authorization=Bearer [redacted]") == []
    assert secrets_in("nothing secret here: v1.short") == []
