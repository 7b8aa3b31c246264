"""The trace context sealed in `requestState` (issue 29; translators/held/request_state.py): every
round
of one logical call carries its first round's trace context, and states sealed without one (by a
bridge that does not trace, or before this field existed) open exactly as before."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from test_request_state import CLAIMS, NONCE, _reason, _ring

from translators.held.request_state import (
    MAX_PLAIN_TOKEN_LENGTH,
    PREFIX,
    TRACE_CONTEXT_SIZE,
    open_state,
    seal,
)

TRACE = bytes(range(1, 17)) + bytes(range(40, 48)) + b"\x01"

# Sealed by the bridge before the trace context existed (commit d9a0927), with _ring() and NONCE:
# such a state still opens after an upgrade, with no trace.
OLD_TOKEN = (
    "v1.AmsxBwgJCgsMDQ4PEBESmKrhV-Sf31_S-hKsYF2V5AFcp2ZjIeGWu8fBDGGV0dTrYxJD1riGsg2jPG1l4IiVqmr_jt_"
    "L7LCl8smX1B33pNyp_dzDTdox7w85f0Ykmu4viZkdJ8Q"
)


def test_a_traced_state_opens_with_its_trace_context() -> None:
    ring = _ring()
    claims = dataclasses.replace(CLAIMS, trace=TRACE, answers=b"\x78\x9c", answers_carried=True)
    opened = open_state(seal(claims, ring, NONCE), ring)
    assert opened == claims
    plain = dataclasses.replace(CLAIMS, trace=TRACE)
    token = seal(plain, ring, NONCE)
    assert open_state(token, ring).trace == TRACE
    assert len(token) <= MAX_PLAIN_TOKEN_LENGTH
    assert len(token) - len(seal(CLAIMS, ring, NONCE)) in (33, 34)  # 25 bytes, in base64url


def test_a_state_without_trace_reads_as_before() -> None:
    opened = open_state(OLD_TOKEN, _ring())
    assert opened == CLAIMS and opened.trace == b""
    assert seal(CLAIMS, _ring(), NONCE) == OLD_TOKEN  # untraced, byte for byte as before


def test_a_trace_context_of_another_size_is_refused_when_sealing() -> None:
    with pytest.raises(ValueError, match="25 bytes"):
        seal(dataclasses.replace(CLAIMS, trace=TRACE[:-1]), _ring(), NONCE)
    assert TRACE_CONTEXT_SIZE == len(TRACE)


def test_a_flagged_state_cut_short_is_malformed() -> None:
    """The flag with fewer than 25 bytes after the replica id (sealed by hand, with the key)."""
    ring = _ring()
    token = seal(dataclasses.replace(CLAIMS, trace=TRACE), ring, NONCE)
    blob = base64.urlsafe_b64decode(token[len(PREFIX) :] + "==")
    kid = blob[1 : 1 + blob[0]]
    cipher = ring.cipher(kid.decode())
    assert cipher is not None
    start = 1 + len(kid) + NONCE_LEN
    plain = cipher.decrypt(
        blob[1 + len(kid) : start], blob[start:], b"mrtr-bridge/requestState/v1|" + kid
    )
    short = plain[: -TRACE_CONTEXT_SIZE + 3]
    sealed = cipher.encrypt(NONCE, short, b"mrtr-bridge/requestState/v1|" + kid)
    forged = PREFIX + base64.urlsafe_b64encode(blob[:start] + sealed).rstrip(b"=").decode()
    assert _reason(forged, ring) == "malformed"


NONCE_LEN = len(NONCE)
