"""The replica proof on forwarded retries (translators/auth/forward_proof.py)."""

from __future__ import annotations

import pytest

from translators.auth.forward_proof import ForwardedFrom, ProofKeys, ProofRejected, sign, verify

KEYS = ProofKeys({"k1": b"\x01" * 32, "k2": b"\x02" * 32}, "k1")
NOW = 1_800_000_000_000
BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}'


def _signed(keys: ProofKeys = KEYS, **changes: object) -> str:
    args: dict[str, object] = {
        "sender": "r2",
        "owner": "r1",
        "now_ms": NOW,
        "path": "/mcp",
        "body": BODY,
        "authorization": "Bearer alice",
    }
    args.update(changes)
    return sign(keys, **args)  # type: ignore[arg-type]


def _verify(value: str, **changes: object) -> ForwardedFrom:
    args: dict[str, object] = {
        "me": "r1",
        "now_ms": NOW + 1000,
        "max_age_ms": 30_000,
        "path": "/mcp",
        "body": BODY,
        "authorization": "Bearer alice",
    }
    args.update(changes)
    return verify(value, KEYS, **args)  # type: ignore[arg-type]


def test_a_proof_verifies_for_its_owner() -> None:
    assert _verify(_signed()) == ForwardedFrom("r2", "r1")


def test_a_retired_key_still_verifies() -> None:
    assert _verify(_signed(ProofKeys({"k2": b"\x02" * 32}, "k2"))) == ForwardedFrom("r2", "r1")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"body": b"{}"}, "bad_mac"),
        ({"authorization": "Bearer mallory"}, "bad_mac"),
        ({"authorization": None}, "bad_mac"),
        ({"path": "/other"}, "bad_mac"),
        ({"now_ms": NOW + 31_000}, "stale"),
        ({"now_ms": NOW - 31_000}, "stale"),
        ({"me": "r3"}, "other_replica"),
    ],
)
def test_a_proof_does_not_move_to_another_request(changes: dict[str, object], reason: str) -> None:
    with pytest.raises(ProofRejected) as caught:
        _verify(_signed(), **changes)
    assert caught.value.reason == reason


def test_a_proof_under_another_key_is_forged() -> None:
    outsider = ProofKeys({"k1": b"\x09" * 32}, "k1")
    with pytest.raises(ProofRejected) as caught:
        _verify(_signed(outsider))
    assert caught.value.reason == "bad_mac"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "v2 kid=k1",
        "v1 kid=k1 from=r2 to=r1 ts=1 mac=x extra=y",
        "v1 kid=k1 kid=k1 from=r2 to=r1 ts=1",
        "v1 kid=k1 from=r2 to=r1 ts=-5 mac=abc",
        "v1 kid=k1 from=r 2 to=r1 ts=1 mac=a",
        "v1 " + "x" * 300,
    ],
)
def test_malformed_headers_are_rejected(value: str) -> None:
    with pytest.raises(ProofRejected) as caught:
        _verify(value)
    assert caught.value.reason == "malformed"


def test_an_unknown_key_id_is_named() -> None:
    other = ProofKeys({"k9": b"\x01" * 32}, "k9")
    with pytest.raises(ProofRejected) as caught:
        _verify(_signed(other))
    assert caught.value.reason == "unknown_key"
