"""Sealing and opening `requestState` (docs/decisions.md § 9).

Token: `v1.` + base64url(kid length ‖ kid ‖ 12-byte nonce ‖ AEAD ciphertext+tag). The associated
data binds the format version and the key id. The plaintext is a fixed binary layout (compact:
a token is ~170 characters). Key, nonce and `now` are parameters: this module reads no clock and
draws no randomness.

Recovery (docs/operations.md § Recovery): from the second round on, the client's earlier answers
may follow the fixed layout, as zlib-compressed canonical JSON (`pack_answers`), sealed with the
rest. A token without them is exactly as long as before. The method byte's high bit says "earlier
answers not carried" (over the size cap, or recovery off): such a state never starts a recovery.

Tracing (docs/operations.md § Tracing): when the bridge traces, the state also carries the trace
context of the call's first round (`TRACE_CONTEXT_SIZE` bytes: trace id, span id, trace flags)
right after the replica id, flagged by the method byte's bit 0x40, so every round of one logical
call, on any replica, is linked to the same trace. A state without the flag reads as before;
a bridge older than this flag refuses a state that has it (as malformed): upgrade every replica
before turning tracing on.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from translators.protocol.eras import PROMPTS_GET, RESOURCES_READ, TOOLS_CALL
from translators.protocol.requests import salient_params
from translators.wire.errors import InvalidRequestState, RejectionReason
from translators.wire.fast_json import digest
from translators.wire.jsonrpc import JsonObject

PREFIX: Final = "v1."
NONCE_SIZE: Final = 12
KEY_SIZE: Final = 32
MAX_ANSWERS_BYTES: Final = 16_384  # hard ceiling of recovery.max_answers_bytes (compressed)
MAX_PLAIN_TOKEN_LENGTH: Final = 300  # a token without earlier answers
MAX_TOKEN_LENGTH: Final = MAX_PLAIN_TOKEN_LENGTH + (MAX_ANSWERS_BYTES + 2) // 3 * 4
MAX_ANSWERS_JSON_BYTES: Final = 8 * 1_048_576  # inflating a sealed answers blob stops here
_NOT_CARRIED: Final = 0x80  # method byte flag: the earlier answers are not in the token
_TRACED: Final = 0x40  # method byte flag: a trace context follows the replica id
TRACE_CONTEXT_SIZE: Final = 25  # trace id (16) + span id (8) + trace flags (1)
MAX_KID_LENGTH: Final = 16
_AAD: Final = b"mrtr-bridge/requestState/v1|"
_METHOD_CODES: Final[dict[str, int]] = {TOOLS_CALL: 1, PROMPTS_GET: 2, RESOURCES_READ: 3}
_METHODS_BY_CODE: Final = {v: k for k, v in _METHOD_CODES.items()}
# continuation(16) round(H) principal(16) method(B) params(16) keys(8) expires_ms(Q) replica_len(B)
_LAYOUT: Final = struct.Struct(">16sH16sB16s8sQB")

Aead = Literal["aes-256-gcm", "chacha20-poly1305"]


def request_digest(method: str, params: JsonObject) -> bytes:
    """What a state binds of its request besides the method: its name or uri and arguments."""
    return digest(salient_params(method, params))


@dataclass(frozen=True)
class RequestBinding:
    """The one request a state is good for (the MRTR spec's SHOULD; docs/security.md): a sealed
    `requestState` binds it, and so does a task id that serves as one (translators/tasks_ext/
    task_ids.py)."""

    method: str
    params_digest: bytes

    SIZE: ClassVar[int] = 17  # method code + params digest, as `encode` writes it

    @classmethod
    def of(cls, method: str, params: JsonObject) -> RequestBinding:
        return cls(method, request_digest(method, params))

    def encode(self) -> bytes:
        return bytes([_METHOD_CODES[self.method]]) + self.params_digest

    @classmethod
    def decode(cls, raw: bytes) -> RequestBinding | None:
        if len(raw) != cls.SIZE or raw[0] not in _METHODS_BY_CODE:
            return None
        return cls(_METHODS_BY_CODE[raw[0]], raw[1:])


def check_binding(bound: RequestBinding | None, request: RequestBinding) -> None:
    """A state bound to another request (or to none) is refused as any invalid state is."""
    if bound != request:
        raise InvalidRequestState(RejectionReason.OTHER_REQUEST)


@dataclass(frozen=True)
class StateClaims:
    """What a `requestState` binds (docs/decisions.md § 9)."""

    continuation_id: bytes
    round: int
    replica_id: str
    principal_digest: bytes
    method: str
    params_digest: bytes
    keys_digest: bytes
    expires_at_ms: int
    answers: bytes = b""  # earlier rounds' answers, `pack_answers`; empty: none (or not carried)
    answers_carried: bool = True  # False: over the size cap or recovery off; never recovered
    trace: bytes = b""  # the first round's trace context (TRACE_CONTEXT_SIZE bytes), or none

    @property
    def binding(self) -> RequestBinding:
        return RequestBinding(self.method, self.params_digest)


class KeyRing:
    """Keys by id: one seals, all open (rotation without dropping in-flight calls)."""

    def __init__(self, keys: dict[str, bytes], active: str, aead: Aead = "aes-256-gcm") -> None:
        if active not in keys:
            raise ValueError(f"active key id {active!r} is not in the key ring")
        for kid, key in keys.items():
            if not kid or len(kid.encode()) > MAX_KID_LENGTH or "." in kid:
                raise ValueError(f"key id {kid!r} must be 1-{MAX_KID_LENGTH} bytes without '.'")
            if len(key) != KEY_SIZE:
                raise ValueError(f"key {kid!r} must be {KEY_SIZE} bytes, got {len(key)}")
        cipher = AESGCM if aead == "aes-256-gcm" else ChaCha20Poly1305
        self._ciphers = {kid: cipher(key) for kid, key in keys.items()}
        self.active = active
        # added to the associated data of everything sealed or opened with this ring: what one
        # upstream of several seals opens under its own scope only (`scoped`); b"" for the only one
        self.scope = b""

    def cipher(self, kid: str) -> AESGCM | ChaCha20Poly1305 | None:
        return self._ciphers.get(kid)

    def scoped(self, name: str) -> KeyRing:
        """The same keys, for the named upstream `name` of a bridge that serves several: a
        `requestState` or task id sealed by one upstream opens at no other (the same refusal as
        any state that does not authenticate)."""
        ring = copy.copy(self)
        ring.scope = b"upstream=" + name.encode() + b"|"
        return ring

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._ciphers)


def principal_digest(principal: str) -> bytes:
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).digest()[:16]


def keys_digest(keys: list[str]) -> bytes:
    return hashlib.sha256("\x00".join(sorted(keys)).encode("utf-8", "surrogatepass")).digest()[:8]


def pack_answers(answers: dict[str, Any]) -> bytes:
    """Earlier answers as sealed: zlib-compressed canonical JSON; b"" for none."""
    if not answers:
        return b""
    text = json.dumps(answers, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 9)


def unpack_answers(blob: bytes) -> dict[str, Any]:
    """The answers `pack_answers` sealed; a blob that does not decode raises
    `InvalidRequestState`."""
    if not blob:
        return {}
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(blob, MAX_ANSWERS_JSON_BYTES)
        answers = json.loads(text.decode("utf-8", "surrogatepass"))
    except (zlib.error, ValueError):
        raise InvalidRequestState(RejectionReason.MALFORMED) from None
    if (
        inflater.unconsumed_tail
        or inflater.unused_data
        or not inflater.eof
        or not isinstance(answers, dict)
    ):
        raise InvalidRequestState(RejectionReason.MALFORMED)
    return answers


def seal(claims: StateClaims, ring: KeyRing, nonce: bytes) -> str:
    """Encrypt and authenticate `claims` with the ring's active key."""
    replica = claims.replica_id.encode()
    if len(claims.answers) > MAX_ANSWERS_BYTES:
        raise ValueError(f"sealed answers over {MAX_ANSWERS_BYTES} bytes")
    if claims.trace and len(claims.trace) != TRACE_CONTEXT_SIZE:
        raise ValueError(f"a trace context is {TRACE_CONTEXT_SIZE} bytes")
    flags = (0 if claims.answers_carried else _NOT_CARRIED) | (_TRACED if claims.trace else 0)
    plaintext = (
        _LAYOUT.pack(
            claims.continuation_id,
            claims.round,
            claims.principal_digest,
            _METHOD_CODES[claims.method] | flags,
            claims.params_digest,
            claims.keys_digest,
            claims.expires_at_ms,
            len(replica),
        )
        + replica
        + claims.trace
        + claims.answers
    )
    return PREFIX + seal_blob(plaintext, ring, nonce, _AAD)


def seal_blob(plaintext: bytes, ring: KeyRing, nonce: bytes, aad: bytes) -> str:
    """base64url(kid length ‖ kid ‖ nonce ‖ AEAD(plaintext)) under the active key; `aad` + kid
    is the associated data (also used for sealed task ids, translators/tasks_ext/task_ids.py)."""
    kid = ring.active.encode()
    cipher = ring.cipher(ring.active)
    assert cipher is not None
    sealed = cipher.encrypt(nonce, plaintext, aad + ring.scope + kid)
    blob = bytes([len(kid)]) + kid + nonce + sealed
    return base64.urlsafe_b64encode(blob).rstrip(b"=").decode()


def open_state(token: object, ring: KeyRing) -> StateClaims:
    """Authenticate and decode a token; any failure raises `InvalidRequestState(reason)`."""
    if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    return _decode(open_blob(token[len(PREFIX) :], ring, _AAD))


def open_blob(body: str, ring: KeyRing, aad: bytes) -> bytes:
    """The plaintext `seal_blob` sealed into `body` with `aad` (and the ring's scope); raises
    `InvalidRequestState(reason)` (also for sealed task ids, translators/tasks_ext/task_ids.py)."""
    try:
        blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise InvalidRequestState(RejectionReason.MALFORMED) from None
    if base64.urlsafe_b64encode(blob).rstrip(b"=").decode() != body:
        # one spelling per token: no '+', '/', padding or stray bits
        raise InvalidRequestState(RejectionReason.MALFORMED)
    if not blob or len(blob) < 1 + blob[0] + NONCE_SIZE + 16:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    kid = blob[1 : 1 + blob[0]]
    cipher = ring.cipher(kid.decode(errors="replace"))
    if cipher is None:
        raise InvalidRequestState(RejectionReason.UNKNOWN_KEY)
    nonce_end = 1 + len(kid) + NONCE_SIZE
    try:
        return cipher.decrypt(
            blob[1 + len(kid) : nonce_end], blob[nonce_end:], aad + ring.scope + kid
        )
    except InvalidTag:
        raise InvalidRequestState(RejectionReason.AUTHENTICATION_FAILED) from None


def _decode(plaintext: bytes) -> StateClaims:
    if len(plaintext) < _LAYOUT.size:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    cont, round_, principal, method, params, keys, expires, replica_len = _LAYOUT.unpack_from(
        plaintext
    )
    replica = plaintext[_LAYOUT.size : _LAYOUT.size + replica_len]
    code = method & ~(_NOT_CARRIED | _TRACED)
    if code not in _METHODS_BY_CODE or len(replica) != replica_len:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    rest = _LAYOUT.size + replica_len
    trace = plaintext[rest : rest + TRACE_CONTEXT_SIZE] if method & _TRACED else b""
    if method & _TRACED and len(trace) != TRACE_CONTEXT_SIZE:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    answers = plaintext[rest + len(trace) :]
    carried = not method & _NOT_CARRIED
    if answers and not carried:
        raise InvalidRequestState(RejectionReason.MALFORMED)
    return StateClaims(
        cont,
        round_,
        replica.decode(),
        principal,
        _METHODS_BY_CODE[code],
        params,
        keys,
        expires,
        answers,
        carried,
        trace,
    )


def check_claims(
    claims: StateClaims,
    *,
    now_ms: int,
    principal: str,
    method: str,
    params_digest: bytes,
    replica_id: str,
    grace_ms: int = 0,
) -> None:
    """The request-independent checks (docs/decisions.md § 9); round and single use are the held
    call's to check. A recovery accepts a state up to `grace_ms` past its expiry. Raises
    `InvalidRequestState` naming the first failed claim (log only). The principal comes first:
    only the state's own caller may learn that it expired (its own public message)."""
    if claims.principal_digest != principal_digest(principal):
        raise InvalidRequestState(RejectionReason.OTHER_PRINCIPAL)
    if claims.expires_at_ms + grace_ms <= now_ms:
        raise InvalidRequestState(RejectionReason.EXPIRED)
    check_binding(claims.binding, RequestBinding(method, params_digest))
    if claims.replica_id != replica_id:
        raise InvalidRequestState(RejectionReason.OTHER_REPLICA)


__all__ = [
    "KEY_SIZE",
    "MAX_ANSWERS_BYTES",
    "MAX_PLAIN_TOKEN_LENGTH",
    "MAX_TOKEN_LENGTH",
    "NONCE_SIZE",
    "TRACE_CONTEXT_SIZE",
    "KeyRing",
    "RequestBinding",
    "StateClaims",
    "check_binding",
    "check_claims",
    "keys_digest",
    "open_blob",
    "open_state",
    "pack_answers",
    "principal_digest",
    "request_digest",
    "seal",
    "seal_blob",
    "unpack_answers",
]
