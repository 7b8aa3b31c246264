"""Sealed task ids (docs/tasks.md § Task ids).

A modern `taskId` is `t1.` + base64url(kid length ‖ kid ‖ 12-byte nonce ‖ AEAD ciphertext+tag),
sealed under the same key ring as `requestState` but with its own associated data, so neither
token opens as the other. The plaintext binds the record, the principal, the expiry and the
replica that owns the task. The legacy task id never leaves the bridge: it is session-scoped
upstream. Key, nonce and time are parameters: this module reads no clock and draws no randomness.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag

from translators.held.request_state import NONCE_SIZE, KeyRing, seal_blob

PREFIX: Final = "t1."
MAX_TOKEN_LENGTH: Final = 200
_AAD: Final = b"mrtr-bridge/taskId/v1|"
# record(16) principal(16) expires_ms(Q) replica_len(B)
_LAYOUT: Final = struct.Struct(">16s16sQB")


@dataclass(frozen=True)
class TaskClaims:
    record: bytes
    principal_digest: bytes
    expires_at_ms: int
    replica_id: str


def seal_task_id(claims: TaskClaims, ring: KeyRing, nonce: bytes) -> str:
    replica = claims.replica_id.encode()
    plaintext = (
        _LAYOUT.pack(claims.record, claims.principal_digest, claims.expires_at_ms, len(replica))
        + replica
    )
    return PREFIX + seal_blob(plaintext, ring, nonce, _AAD)


def open_task_id(token: str, ring: KeyRing) -> TaskClaims | None:
    """The claims of a well-formed, authentic id; None for anything else (the caller answers
    every failure alike)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None
    body = token[len(PREFIX) :]
    try:
        blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    if not blob or len(blob) < 1 + blob[0] + NONCE_SIZE + 16:
        return None
    kid = blob[1 : 1 + blob[0]]
    cipher = ring.cipher(kid.decode(errors="replace"))
    if cipher is None:
        return None
    nonce_end = 1 + len(kid) + NONCE_SIZE
    try:
        plaintext = cipher.decrypt(blob[1 + len(kid) : nonce_end], blob[nonce_end:], _AAD + kid)
    except InvalidTag:
        return None
    if len(plaintext) < _LAYOUT.size:
        return None
    record, principal, expires, replica_len = _LAYOUT.unpack_from(plaintext)
    replica = plaintext[_LAYOUT.size :]
    if len(replica) != replica_len:
        return None
    return TaskClaims(record, principal, expires, replica.decode(errors="replace"))


def is_task_state(token: object) -> bool:
    """Whether a `requestState` is a task id (a task the bridge runs for a client that did not
    declare the extension) rather than a sealed held-call state."""
    return isinstance(token, str) and token.startswith(PREFIX)


__all__ = ["PREFIX", "TaskClaims", "is_task_state", "open_task_id", "seal_task_id"]
