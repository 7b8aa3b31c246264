"""Forwarding a retry to the replica that owns its held call (docs/architecture.md § Replicas).

On the HTTP front only. A request is forwarded when it is a retry (an MRTR method with a
`requestState`), its `requestState` opens with the shared keys and names another replica, and the
request did not itself arrive forwarded. It goes out as received (body and headers, hop-by-hop
headers aside, with the original `Host`) plus the replica proof (`translators.auth.forward_proof`);
the
owner's status, headers and body stream back unchanged, SSE included. The owner checks everything
again (the proof, principal binding, round, single use) as for any retry.

When the owner is known to be gone — outside the peer set, or its address refuses the connection
(or drops it unanswered) — the retry gets the fixed invalid-`requestState` error, logged and
counted with reason `owner_not_in_peer_set` / `owner_unreachable`; the front's `on_unreachable`
then serves the retry locally, where recovery by re-execution may answer instead. An owner that
does not answer in time (paused, overloaded, a network that drops packets) is not gone: the retry
gets the retryable `OwnerStalled` error (reason `owner_stalled`), nothing runs here, and the owner
keeps its call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings
from proxy.auth.keys import decode_key
from proxy.cluster.peers import PeerDirectory
from proxy.common.clock import Clock
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.observe.metrics import BridgeMetrics
from translators.auth.forward_proof import (
    HEADER,
    ForwardedFrom,
    ProofKeys,
    ProofRejected,
    sign,
    verify,
)
from translators.held.request_state import KeyRing, open_state
from translators.protocol.eras import MRTR_METHODS
from translators.protocol.request_validation import ModernRoute
from translators.tasks_ext.messages import TASK_METHODS
from translators.tasks_ext.task_ids import is_task_state, open_task_id
from translators.wire.errors import (
    BridgeError,
    InvalidRequestState,
    LimitExceeded,
    OwnerStalled,
    RejectionReason,
    http_status_for,
)
from translators.wire.jsonrpc import to_error_response

_log = structlog.get_logger("proxy.cluster.forward")
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        HEADER.lower(),
    }
)
_RESPONSE_HEADERS: Final = (
    "Content-Type",
    "Cache-Control",
    "X-Accel-Buffering",
    "WWW-Authenticate",
)
STREAM_MARGIN_S: Final = 10.0


class OwnerUnreachable(Exception):
    """The owner of a retry cannot be reached: `reason` is owner_not_in_peer_set or
    owner_unreachable."""

    def __init__(self, owner: str, reason: RejectionReason) -> None:
        super().__init__(f"owner {owner} of the held call: {reason.value}")
        self.owner = owner
        self.reason = reason


UnreachableHandler = Callable[
    [web.Request, ModernRoute, OwnerUnreachable], Awaitable[web.StreamResponse | None]
]


def proof_keys(settings: Settings) -> ProofKeys:
    held = settings.held
    keys = {kid: decode_key(kid, secret.get_secret_value()) for kid, secret in held.keys.items()}
    return ProofKeys(keys, held.active_key or next(iter(keys)))


def _error(route: ModernRoute, exc: BridgeError) -> web.Response:
    return web.json_response(
        to_error_response(exc, route.front_request_id), status=http_status_for(exc.code)
    )


class Forwarder:
    """The HTTP front's cluster hop: checks inbound proofs and forwards retries owned elsewhere."""

    def __init__(
        self,
        settings: Settings,
        keyring: KeyRing,
        directory: PeerDirectory,
        client: aiohttp.ClientSession,
        metrics: BridgeMetrics,
        clock: Clock = time.monotonic,
    ) -> None:
        """`clock` tells how long an owner took to answer a forward (a proof it read after
        `cluster.proof_max_age_s` was stale; proxy/common/clock.py)."""
        self._settings = settings
        self._clock = clock
        self._me = settings.held.replica_id
        self._keyring = keyring
        self._proof_keys = proof_keys(settings)
        self._directory = directory
        self._client = client
        self._metrics = metrics
        self._slots = asyncio.Semaphore(settings.cluster.max_forwards)

    def check_inbound(self, request: web.Request, body: bytes) -> ForwardedFrom | None:
        """The proof of a request that claims to be forwarded (None when it does not claim it);
        raises `ProofRejected` for a claim that does not hold."""
        value = request.headers.get(HEADER)
        if value is None:
            return None
        try:
            forwarded = verify(
                value,
                self._proof_keys,
                me=self._me,
                now_ms=int(time.time() * 1000),
                max_age_ms=int(self._settings.cluster.proof_max_age_s * 1000),
                path=request.path,
                body=body,
                authorization=request.headers.get("Authorization"),
            )
        except ProofRejected as exc:
            _log.warning("forward_proof_rejected", reason=exc.reason)
            self._metrics.forward_proof_rejections.labels(exc.reason).inc()
            raise
        self._metrics.forwarded_received.inc()
        return forwarded

    def owner_elsewhere(self, route: ModernRoute, scope: str | None = None) -> str | None:
        """The owner replica of a retry, or of a task (`tasks/*` and in-bridge task rounds: the
        sealed task id names it, docs/tasks.md), when it is another replica; None to serve here.
        `scope`: the named upstream the request came for (its states open under its scope only,
        `KeyRing.scoped`)."""
        ring = self._keyring if scope is None else self._keyring.scoped(scope)
        token = route.params.get("taskId") if route.method in TASK_METHODS else None
        if route.method in MRTR_METHODS and is_task_state(route.params.get("requestState")):
            token = route.params["requestState"]
        if isinstance(token, str):
            task = open_task_id(token, ring)
            return task.replica_id if task is not None and task.replica_id != self._me else None
        if route.method not in MRTR_METHODS or "requestState" not in route.params:
            return None
        try:
            state = open_state(route.params["requestState"], ring)
        except InvalidRequestState:
            return None  # the engine rejects it, here
        tracing.adopt(current_trace(), state.trace)  # this hop is part of the call's trace too
        return state.replica_id if state.replica_id != self._me else None

    async def forward(
        self,
        request: web.Request,
        body: bytes,
        route: ModernRoute,
        owner: str,
        *,
        on_unreachable: UnreachableHandler | None = None,
    ) -> web.StreamResponse:
        """Forward a retry to `owner` and stream its answer back (or answer why it cannot be);
        `on_unreachable` may answer instead when the owner cannot be reached (recovery)."""
        if self._slots.locked():
            self._failed(owner, "busy")
            return _error(
                route,
                LimitExceeded(
                    f"{self._settings.cluster.max_forwards} forwarded retries are in "
                    "flight; the limit is cluster.max_forwards",
                    "cluster.max_forwards",
                ),
            )
        async with self._slots:
            try:
                with tracing.child(current_trace(), "forward", {"mrtr_bridge.owner": owner}):
                    return await self._relay(request, body, owner)
            except TimeoutError:  # stalled, not gone: a retryable error, and nothing runs here
                self._failed(owner, "owner_stalled")
                return _error(route, OwnerStalled())
            except OwnerUnreachable as exc:
                self._failed(owner, exc.reason.value)
                if on_unreachable is not None:
                    recovered = await on_unreachable(request, route, exc)
                    if recovered is not None:
                        return recovered
                self._metrics.at_path(request.path).observe_error(InvalidRequestState(exc.reason))
                return _error(route, InvalidRequestState(exc.reason))

    def _failed(self, owner: str, reason: str) -> None:
        _log.warning("forward_failed", owner=owner, reason=reason)
        self._metrics.forward_failures.labels(reason).inc()

    def _headers(self, request: web.Request, body: bytes, owner: str) -> list[tuple[str, str]]:
        """The client's headers as received (repeated ones kept, hop-by-hop ones dropped), plus the
        proof; when tracing, the `traceparent` is this hop's span."""
        headers = [
            (name, value)
            for name, value in request.headers.items()
            if name.lower() not in _HOP_BY_HOP
        ]
        if tracing.active():
            context = tracing.upstream_headers({})  # this hop's span, as traceparent
            replaced = {name.lower() for name in (*context, "traceparent", "tracestate")}
            headers = [(n, v) for n, v in headers if n.lower() not in replaced]
            headers += list(context.items())
        proof = sign(
            self._proof_keys,
            sender=self._me,
            owner=owner,
            now_ms=int(time.time() * 1000),
            path=request.path,
            body=body,
            authorization=request.headers.get("Authorization"),
        )
        return [*headers, (HEADER, proof)]

    async def _relay(self, request: web.Request, body: bytes, owner: str) -> web.StreamResponse:
        base = await self._directory.owner_url(owner)
        if base is None:
            raise OwnerUnreachable(owner, RejectionReason.OWNER_NOT_IN_PEER_SET)
        front = self._settings.front
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=self._settings.cluster.connect_timeout_s,
            sock_read=front.request_timeout_s + front.sse_keepalive_s + STREAM_MARGIN_S,
        )
        sent_at = self._clock()
        try:
            headers = self._headers(request, body, owner)
            upstream = await self._client.post(
                base + request.path,  # the path it came to: a named upstream's stays its own
                data=body,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
                auto_decompress=False,
            )
        except TimeoutError:
            raise  # aiohttp's timeouts included: the owner may be paused, it is not gone
        except aiohttp.ClientConnectionError:  # refused, or closed without an answer: gone
            self._directory.forget(owner)
            raise OwnerUnreachable(owner, RejectionReason.OWNER_UNREACHABLE) from None
        stale = self._clock() - sent_at >= self._settings.cluster.proof_max_age_s
        if upstream.status == 403 and stale:
            # the owner took longer than a proof lives to read the request: stalled, and it
            # refused the proof, so nothing ran there either
            upstream.release()
            raise TimeoutError
        self._metrics.forwarded.inc()
        _log.info("retry_forwarded", owner=owner, status=upstream.status)
        async with upstream:
            return await self._stream_back(request, upstream, owner)

    async def _stream_back(
        self, request: web.Request, upstream: aiohttp.ClientResponse, owner: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status)
        for name in _RESPONSE_HEADERS:
            for value in upstream.headers.getall(name, ()):
                response.headers.add(name, value)
        if "Content-Encoding" in upstream.headers:
            response.headers["Content-Encoding"] = upstream.headers["Content-Encoding"]
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError):
            self._failed(owner, "owner_stream_broken")  # the client sees its stream end early
            return response
        await response.write_eof()
        return response


__all__ = ["Forwarder", "OwnerUnreachable", "UnreachableHandler", "proof_keys"]
