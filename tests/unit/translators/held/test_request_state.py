"""Sealing and opening `requestState` (translators.held.request_state; docs/decisions.md § 9)."""

from __future__ import annotations

import base64
import dataclasses
import json
import string
import zlib
from typing import Any

import pytest

from translators.held.request_state import (
    KEY_SIZE,
    MAX_ANSWERS_BYTES,
    MAX_PLAIN_TOKEN_LENGTH,
    MAX_TOKEN_LENGTH,
    NONCE_SIZE,
    PREFIX,
    KeyRing,
    StateClaims,
    check_claims,
    keys_digest,
    open_state,
    pack_answers,
    principal_digest,
    seal,
    unpack_answers,
)
from translators.protocol.eras import MRTR_METHODS, PROMPTS_GET, RESOURCES_READ, TOOLS_CALL
from translators.wire.errors import (
    EXPIRED_REQUEST_STATE_MESSAGE,
    INVALID_PARAMS,
    INVALID_REQUEST_STATE_MESSAGE,
    InvalidRequestState,
)

MAX_KID_LENGTH = 16  # KeyRing's limit on key ids
MAX_REPLICA_ID_LENGTH = 16  # config.settings: replica_id max_length
KEY_OLD = bytes(range(KEY_SIZE))
KEY_NEW = bytes(range(100, 100 + KEY_SIZE))
NONCE = bytes(range(7, 7 + NONCE_SIZE))
NOW_MS = 1_800_000_000_000
PRINCIPAL = "sha256:alice"
PARAMS_DIGEST = bytes(range(16))
REPLICA = "r1"
URLSAFE_ALPHABET = string.ascii_letters + string.digits + "-_"

CLAIMS = StateClaims(
    continuation_id=bytes(range(200, 216)),
    round=3,
    replica_id=REPLICA,
    principal_digest=principal_digest(PRINCIPAL),
    method=TOOLS_CALL,
    params_digest=PARAMS_DIGEST,
    keys_digest=keys_digest(["confirm", "draft"]),
    expires_at_ms=NOW_MS + 60_000,
)


def _ring(active: str = "k1", aead: Any = "aes-256-gcm", **keys: bytes) -> KeyRing:
    return KeyRing(keys or {"k1": KEY_OLD}, active, aead)


def _reason(token: object, ring: KeyRing) -> str:
    with pytest.raises(InvalidRequestState) as caught:
        open_state(token, ring)
    assert caught.value.message == INVALID_REQUEST_STATE_MESSAGE
    assert caught.value.code == INVALID_PARAMS
    return caught.value.reason


def _decode(token: str) -> bytes:
    body = token[len(PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def _encode(blob: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(blob).rstrip(b"=").decode()


def _check(claims: StateClaims = CLAIMS, **overrides: Any) -> None:
    arguments: dict[str, Any] = {
        "now_ms": NOW_MS,
        "principal": PRINCIPAL,
        "method": TOOLS_CALL,
        "params_digest": PARAMS_DIGEST,
        "replica_id": REPLICA,
    }
    check_claims(claims, **(arguments | overrides))


# ---- seal / open ------------------------------------------------------------------------------


@pytest.mark.parametrize("aead", ["aes-256-gcm", "chacha20-poly1305"])
@pytest.mark.parametrize("method", sorted(MRTR_METHODS))
def test_seal_open_round_trip(aead: str, method: str) -> None:
    """Opening a sealed token gives back exactly the sealed claims, for each AEAD and MRTR
    method."""
    ring = _ring(aead=aead)
    claims = dataclasses.replace(CLAIMS, method=method)
    assert open_state(seal(claims, ring, NONCE), ring) == claims


def test_round_trip_with_a_non_ascii_replica_id() -> None:
    """Replica ids are UTF-8 in the token and come back intact."""
    claims = dataclasses.replace(CLAIMS, replica_id="réplica-東京")
    assert open_state(seal(claims, _ring(), NONCE), _ring()) == claims


def test_token_shape() -> None:
    """A token is `v1.` plus unpadded base64url, and a fresh nonce gives a different token."""
    token = seal(CLAIMS, _ring(), NONCE)
    assert token.startswith(PREFIX)
    assert set(token[len(PREFIX) :]) <= set(URLSAFE_ALPHABET)
    other = seal(CLAIMS, _ring(), bytes(NONCE_SIZE))
    assert other != token
    assert open_state(other, _ring()) == CLAIMS


@pytest.mark.parametrize("aead", ["aes-256-gcm", "chacha20-poly1305"])
def test_token_length_stays_within_the_limit(aead: str) -> None:
    """With the longest key id and replica id a token without earlier answers fits in 300
    characters."""
    kid = "k" * MAX_KID_LENGTH
    ring = KeyRing({kid: KEY_OLD}, kid, aead)  # type: ignore[arg-type]
    claims = dataclasses.replace(
        CLAIMS, replica_id="é" * MAX_REPLICA_ID_LENGTH, round=65535, expires_at_ms=2**64 - 1
    )
    token = seal(claims, ring, NONCE)
    assert len(token) <= MAX_PLAIN_TOKEN_LENGTH == 300
    assert open_state(token, ring) == claims


def test_every_single_character_substitution_fails() -> None:
    """Replacing any one character of a real token by any other base64 character never opens it."""
    ring = _ring()
    token = seal(CLAIMS, ring, NONCE)
    opened: list[tuple[int, str, str]] = []
    for position, original in enumerate(token):
        for replacement in URLSAFE_ALPHABET + "+/=.":
            if replacement == original:
                continue
            try:
                open_state(token[:position] + replacement + token[position + 1 :], ring)
            except InvalidRequestState:
                continue
            opened.append((position, original, replacement))
    assert opened == []


def test_every_bit_flip_fails() -> None:
    """Flipping any bit of any decoded byte (re-encoded canonically) never opens the token."""
    ring = _ring()
    token = seal(CLAIMS, ring, NONCE)
    blob = bytearray(_decode(token))
    for index in range(len(blob)):
        for bit in range(8):
            blob[index] ^= 1 << bit
            forged = _encode(bytes(blob))
            blob[index] ^= 1 << bit
            _reason(forged, ring)


def test_truncated_tokens_fail() -> None:
    """Every proper prefix of a token is rejected."""
    ring = _ring()
    token = seal(CLAIMS, ring, NONCE)
    for length in range(len(token)):
        _reason(token[:length], ring)


def test_extended_tokens_fail() -> None:
    """Appending data to a token is rejected."""
    ring = _ring()
    token = seal(CLAIMS, ring, NONCE)
    for suffix in ("A", "AA", "AAAA", "="):
        _reason(token + suffix, ring)


@pytest.mark.parametrize(
    "token",
    [
        None,
        12345,
        ["v1.x"],
        {"v": 1},
        "",
        "v1",
        "v1.",
        "v2.AAAA",
        "V1.AAAA",
        "AAAA",
        "v1.é",
        "v1.!!!!",
        PREFIX + "A" * MAX_TOKEN_LENGTH,
    ],
)
def test_malformed_tokens_fail(token: object) -> None:
    """Non-strings, wrong prefixes, non-base64 and over-long tokens are malformed."""
    assert _reason(token, _ring()) == "malformed"


def test_wrong_prefix_on_a_real_token_fails() -> None:
    """A genuine body under another version prefix is rejected before any decryption."""
    token = seal(CLAIMS, _ring(), NONCE)
    assert _reason("v2." + token[len(PREFIX) :], _ring()) == "malformed"


def test_unknown_key_id_fails() -> None:
    """A token sealed under a key id the ring does not hold is rejected as unknown_key."""
    token = seal(CLAIMS, _ring("gone", gone=KEY_OLD), NONCE)
    assert _reason(token, _ring("k2", k2=KEY_NEW)) == "unknown_key"


def test_same_key_id_with_another_key_fails() -> None:
    """A token opened with a different key under the same id fails authentication."""
    token = seal(CLAIMS, _ring(k1=KEY_OLD), NONCE)
    assert _reason(token, _ring(k1=KEY_NEW)) == "authentication_failed"


def test_other_aead_fails() -> None:
    """A token sealed with AES-GCM does not open with ChaCha20-Poly1305 under the same key."""
    token = seal(CLAIMS, _ring(aead="aes-256-gcm"), NONCE)
    assert _reason(token, _ring(aead="chacha20-poly1305")) == "authentication_failed"


def test_rotation_keeps_old_tokens_open() -> None:
    """A token sealed by the old key opens with a ring whose active key is the new one."""
    old_token = seal(CLAIMS, _ring("k1", k1=KEY_OLD), NONCE)
    rotated = _ring("k2", k1=KEY_OLD, k2=KEY_NEW)
    assert open_state(old_token, rotated) == CLAIMS
    new_token = seal(CLAIMS, rotated, NONCE)
    assert open_state(new_token, _ring("k2", k2=KEY_NEW)) == CLAIMS
    assert _reason(new_token, _ring("k1", k1=KEY_OLD)) == "unknown_key"


def test_key_id_is_authenticated() -> None:
    """Relabelling a token with another key id of the ring (same key bytes) fails authentication."""
    ring = _ring("ka", ka=KEY_OLD, kb=KEY_OLD)
    token = seal(CLAIMS, ring, NONCE)
    blob = bytearray(_decode(token))
    blob[1:3] = b"kb"
    forged = _encode(bytes(blob))
    assert _reason(forged, ring) == "authentication_failed"


# ---- key ring ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "active"),
    [
        ({"k1": KEY_OLD}, "k2"),
        ({"": KEY_OLD}, ""),
        ({"a.b": KEY_OLD}, "a.b"),
        ({"k" * (MAX_KID_LENGTH + 1): KEY_OLD}, "k" * (MAX_KID_LENGTH + 1)),
        ({"k1": KEY_OLD[:-1]}, "k1"),
        ({"k1": KEY_OLD + b"x"}, "k1"),
    ],
)
def test_key_ring_rejects_bad_configuration(keys: dict[str, bytes], active: str) -> None:
    """An unknown active id, a malformed key id or a key of the wrong size is a
    configuration error."""
    with pytest.raises(ValueError):
        KeyRing(keys, active)


def test_key_ring_lists_its_ids() -> None:
    """The ring names its active key and every key it can open with."""
    ring = _ring("k2", k1=KEY_OLD, k2=KEY_NEW)
    assert ring.active == "k2"
    assert set(ring.key_ids) == {"k1", "k2"}
    assert ring.cipher("k3") is None


# ---- digests and claims -----------------------------------------------------------------------


def test_digests() -> None:
    """The principal digest is 16 bytes; the keys digest ignores the order of the keys."""
    assert len(principal_digest(PRINCIPAL)) == 16
    assert principal_digest(PRINCIPAL) != principal_digest("sha256:bob")
    assert keys_digest(["a", "b"]) == keys_digest(["b", "a"])
    assert keys_digest(["a", "b"]) != keys_digest(["a"])
    assert len(keys_digest([])) == 8


def test_keys_digest_accepts_any_input_key() -> None:
    """Input keys can be server hints holding any JSON string, lone surrogates included; they still
    digest."""
    hinted = json.loads('"key-\\udc80"')
    assert len(keys_digest([hinted, "elicit-abc123"])) == 8


def test_check_claims_accepts_the_matching_request() -> None:
    """Claims from this principal, for this request and replica, before expiry, pass."""
    _check()
    _check(now_ms=CLAIMS.expires_at_ms - 1)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"now_ms": CLAIMS.expires_at_ms}, "expired"),
        ({"now_ms": CLAIMS.expires_at_ms + 1}, "expired"),
        ({"principal": "sha256:mallory"}, "other_principal"),
        ({"method": PROMPTS_GET}, "other_request"),
        ({"method": RESOURCES_READ}, "other_request"),
        ({"params_digest": bytes(16)}, "other_request"),
        ({"replica_id": "r2"}, "other_replica"),
        (
            {"now_ms": CLAIMS.expires_at_ms, "principal": "sha256:mallory", "replica_id": "r2"},
            "other_principal",  # only the state's own caller learns that it expired
        ),
        ({"principal": "sha256:mallory", "method": PROMPTS_GET}, "other_principal"),
        ({"method": PROMPTS_GET, "replica_id": "r2"}, "other_request"),
    ],
)
def test_check_claims_names_the_first_failed_claim(overrides: dict[str, Any], reason: str) -> None:
    """Each failed claim raises InvalidRequestState with a log-only reason; the public message is
    fixed but for an expired state of the caller's own, which says so."""
    with pytest.raises(InvalidRequestState) as caught:
        _check(**overrides)
    assert caught.value.reason == reason
    if reason == "expired":
        assert caught.value.message == EXPIRED_REQUEST_STATE_MESSAGE
    else:
        assert caught.value.message == INVALID_REQUEST_STATE_MESSAGE
        assert reason not in caught.value.message


# ---- earlier answers for a recovery ------------------------------------------------------------

ANSWERS = {
    "elicitation-1a2b": {"action": "accept", "content": {"name": "Ada"}},
    "sampling-3c4d": {
        "role": "assistant",
        "content": {"type": "text", "text": "é 4"},
        "model": "m",
    },
}


def test_sealed_answers_round_trip_and_stay_bound() -> None:
    ring = _ring()
    claims = dataclasses.replace(CLAIMS, answers=pack_answers(ANSWERS))
    token = seal(claims, ring, NONCE)
    opened = open_state(token, ring)
    assert opened == claims and unpack_answers(opened.answers) == ANSWERS
    assert len(token) > len(seal(CLAIMS, ring, NONCE))
    assert _reason(tampered_middle(token), ring) == "authentication_failed"


def test_no_answers_adds_nothing_and_the_not_carried_flag_costs_no_byte() -> None:
    ring = _ring()
    plain = seal(CLAIMS, ring, NONCE)
    flagged = seal(dataclasses.replace(CLAIMS, answers_carried=False), ring, NONCE)
    assert pack_answers({}) == b"" and len(flagged) == len(plain)
    assert (
        open_state(flagged, ring).answers_carried is False
        and open_state(plain, ring).answers_carried is True
    )


def test_answers_over_the_hard_ceiling_are_never_sealed() -> None:
    with pytest.raises(ValueError, match="sealed answers over"):
        seal(dataclasses.replace(CLAIMS, answers=b"x" * (MAX_ANSWERS_BYTES + 1)), _ring(), NONCE)
    token = seal(dataclasses.replace(CLAIMS, answers=b"x" * MAX_ANSWERS_BYTES), _ring(), NONCE)
    assert len(token) <= MAX_TOKEN_LENGTH


@pytest.mark.parametrize(
    "blob",
    [
        b"not zlib",
        zlib.compress(b"[1, 2]"),
        zlib.compress(b'{"a": 1}')[:-3],
        zlib.compress(b'{"a": 1}') + b"trailing",
    ],
)
def test_a_bad_answers_blob_is_malformed(blob: bytes) -> None:
    with pytest.raises(InvalidRequestState) as caught:
        unpack_answers(blob)
    assert caught.value.reason == "malformed"


def test_recovery_grace_extends_only_the_expiry() -> None:
    late = dataclasses.replace(CLAIMS, expires_at_ms=NOW_MS - 1_000)
    check = dict(
        principal=PRINCIPAL, method=TOOLS_CALL, params_digest=PARAMS_DIGEST, replica_id=REPLICA
    )
    with pytest.raises(InvalidRequestState) as caught:
        check_claims(late, now_ms=NOW_MS, **check)  # type: ignore[arg-type]
    assert caught.value.reason == "expired"
    check_claims(late, now_ms=NOW_MS, grace_ms=1_001, **check)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestState) as caught:
        check_claims(late, now_ms=NOW_MS, grace_ms=1_000, **check)  # type: ignore[arg-type]
    assert caught.value.reason == "expired"


def tampered_middle(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
