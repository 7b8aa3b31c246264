"""Sealed task ids (docs/tasks.md § Task ids).

A modern `taskId` is `t1.` + base64url(kid length ‖ kid ‖ 12-byte nonce ‖ AEAD ciphertext+tag),
sealed under the same key ring as `requestState` but with its own associated data, so neither
token opens as the other. The plaintext binds the record, the principal, the expiry and the
replica that owns the task, for a task the bridge runs for a client without the extension the
request its rounds are bound to (its id is then their `requestState`), and, for a task on a
Streamable HTTP upstream, an `UpstreamHandle`:
what a new bridge process needs to find the task again (the upstream session id, the legacy
task id, the revision, where the legacy `tasks/result` stream can be resumed, the capabilities
the creating request declared, the session's cookies). None of it leaves the bridge in clear.
Key, nonce and time are parameters: this module reads no clock and draws no randomness.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from typing import Final

from translators.held.request_state import KeyRing, RequestBinding, open_blob, seal_blob
from translators.wire.errors import InvalidRequestState
from translators.wire.jsonrpc import JsonObject

SealedCookie = tuple[str, str, str, int | None]  # name, value, path, expires (ms since the epoch)
PREFIX: Final = "t1."
# a bigger handle is left out (the task then cannot be adopted); its cookies are left out first
MAX_HANDLE_BYTES: Final = 2048
MAX_TOKEN_LENGTH: Final = 240 + (MAX_HANDLE_BYTES + 2) // 3 * 4
_AAD: Final = b"mrtr-bridge/taskId/v1|"
# record(16) principal(16) expires_ms(Q) replica_len(B), then the replica id, then optionally
# _BOUND and a RequestBinding, then optionally the handle (JSON: never starts with _BOUND)
_LAYOUT: Final = struct.Struct(">16s16sQB")
_BOUND: Final = b"\x01"


@dataclass(frozen=True)
class UpstreamHandle:
    """Where a legacy task lives upstream, so that a new bridge process can adopt its session
    (docs/tasks.md § What survives what)."""

    session_id: str  # the upstream `Mcp-Session-Id`
    legacy_task_id: str
    version: str  # the revision negotiated on that session
    result_request_id: int  # the JSON-RPC id of the legacy `tasks/result` the bridge opened
    resume_event_id: str | None  # the first SSE event id of that request's stream, if any
    capabilities: JsonObject = field(default_factory=dict)  # the creating request's, for pushes
    created_at_ms: int = 0
    # the session's cookies (name, value, path, expiry in ms or None): a load balancer's pin
    cookies: tuple[SealedCookie, ...] = ()

    def encode(self) -> bytes:
        fields: list[object] = [
            self.session_id,
            self.legacy_task_id,
            self.version,
            self.result_request_id,
            self.resume_event_id,
            self.capabilities,
            self.created_at_ms,
        ]
        if self.cookies:  # an id sealed before cookies were carried has seven fields
            fields.append([list(cookie) for cookie in self.cookies])
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> UpstreamHandle | None:
        try:
            fields = json.loads(raw)
        except (ValueError, TypeError):
            return None
        if not isinstance(fields, list) or len(fields) not in (7, 8):
            return None
        sid, legacy, version, request_id, event_id, caps, created = fields[:7]
        cookies = _cookies(fields[7]) if len(fields) == 8 else ()
        if not (
            isinstance(sid, str)
            and isinstance(legacy, str)
            and isinstance(version, str)
            and isinstance(request_id, int)
            and (event_id is None or isinstance(event_id, str))
            and isinstance(caps, dict)
            and isinstance(created, int)
            and cookies is not None
        ):
            return None
        return cls(sid, legacy, version, request_id, event_id, caps, created, cookies)

    def sealable(self) -> UpstreamHandle:
        """This handle, or without its cookies if they would make it too big to seal."""
        if self.cookies and len(self.encode()) > MAX_HANDLE_BYTES:
            return dataclasses.replace(self, cookies=())
        return self


def _cookies(raw: object) -> tuple[SealedCookie, ...] | None:
    if not isinstance(raw, list):
        return None
    cookies: list[SealedCookie] = []
    for cookie in raw:
        if not (
            isinstance(cookie, list)
            and len(cookie) == 4
            and all(isinstance(part, str) for part in cookie[:3])
            and (cookie[3] is None or isinstance(cookie[3], int))
        ):
            return None
        cookies.append((cookie[0], cookie[1], cookie[2], cookie[3]))
    return tuple(cookies)


@dataclass(frozen=True)
class TaskClaims:
    record: bytes
    principal_digest: bytes
    expires_at_ms: int
    replica_id: str
    handle: UpstreamHandle | None = None  # None: the task cannot outlive this process
    # the request whose rounds the id serves as `requestState` (tasks.run_in_bridge); None: the
    # id is no `requestState` at all (a task of the extension)
    binding: RequestBinding | None = None


def seal_task_id(claims: TaskClaims, ring: KeyRing, nonce: bytes) -> str:
    """The sealed id; a handle bigger than `MAX_HANDLE_BYTES` is left out, after its cookies."""
    replica = claims.replica_id.encode()
    handle = b"" if claims.handle is None else claims.handle.sealable().encode()
    binding = b"" if claims.binding is None else _BOUND + claims.binding.encode()
    plaintext = (
        _LAYOUT.pack(claims.record, claims.principal_digest, claims.expires_at_ms, len(replica))
        + replica
        + binding
        + (handle if len(handle) <= MAX_HANDLE_BYTES else b"")
    )
    return PREFIX + seal_blob(plaintext, ring, nonce, _AAD)


def open_task_id(token: str, ring: KeyRing) -> TaskClaims | None:
    """The claims of a well-formed, authentic id; None for anything else (the caller answers
    every failure alike)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None
    try:
        plaintext = open_blob(token[len(PREFIX) :], ring, _AAD)
    except InvalidRequestState:
        return None
    if len(plaintext) < _LAYOUT.size:
        return None
    record, principal, expires, replica_len = _LAYOUT.unpack_from(plaintext)
    replica = plaintext[_LAYOUT.size : _LAYOUT.size + replica_len]
    rest = plaintext[_LAYOUT.size + replica_len :]
    if len(replica) != replica_len:
        return None
    binding: RequestBinding | None = None
    if rest.startswith(_BOUND):
        binding = RequestBinding.decode(rest[1 : 1 + RequestBinding.SIZE])
        if binding is None:
            return None
        rest = rest[1 + RequestBinding.SIZE :]
    handle = UpstreamHandle.decode(rest) if rest else None
    if rest and handle is None:
        return None
    replica_id = replica.decode(errors="replace")
    return TaskClaims(record, principal, expires, replica_id, handle, binding)


def is_task_state(token: object) -> bool:
    """Whether a `requestState` is a task id (a task the bridge runs for a client that did not
    declare the extension) rather than a sealed held-call state."""
    return isinstance(token, str) and token.startswith(PREFIX)


__all__ = [
    "PREFIX",
    "TaskClaims",
    "UpstreamHandle",
    "is_task_state",
    "open_task_id",
    "seal_task_id",
]
