"""`subscriptions/listen`: legacy session-wide notifications fanned out to modern listen streams
(issue 5).

Each listen stream holds a shared lease on an upstream session of its (principal, capabilities) for
its whole life; `resources/subscribe` is sent once per (session, URI) and reference-counted across
listeners; the last listener to leave unsubscribes. List-changed notifications from any session of
the same principal reach that principal's listeners (a legacy server announces changes on the
session where they happened). A lost upstream session is replaced and its subscriptions re-made.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import structlog

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease
from translators.protocol.eras import RESOURCES_SUBSCRIBE, RESOURCES_UNSUBSCRIBE
from translators.protocol.subscriptions import (
    LIST_CHANGED,
    ListenFilter,
    acknowledgement,
    closing_result,
    honoured_filter,
    listen_notification,
    parse_listen_filter,
    uri_key,
)
from translators.wire.errors import BridgeError
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, notification

log = structlog.get_logger()
LeaseOpener = Callable[[], Awaitable[Lease]]
SessionSharer = Callable[[UpstreamSession], Lease | None]
HEALTH_CHECK_S = 1.0


@dataclass(eq=False)
class _Listener:
    listen_id: int | str
    principal: str
    sink: NotificationSink
    honoured: ListenFilter
    lease: Lease
    subscribed: frozenset[str]  # URIs this listener holds a reference to on `lease.session`
    generation: int  # the session's re-initialization count when subscribed
    ended: asyncio.Future[str] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


def _generation(session: UpstreamSession) -> int:
    """Bumps when a session re-initializes in place (its upstream subscriptions are gone then)."""
    count = getattr(session, "reinitialized_count", 0)
    return count if isinstance(count, int) else 0


class ListenHub:
    """Open listen streams, by principal; upstream resource subscriptions, reference-counted."""

    def __init__(self) -> None:
        self._listeners: dict[str, set[_Listener]] = {}
        # principal -> its open listen streams, read-only outside: a call of a principal with none
        # skips the hub altogether
        self.listening: Mapping[str, object] = self._listeners
        self._uri_refs: dict[int, Counter[str]] = {}  # id(session) -> normalized URI -> listeners

    def home(self, principal: str, fingerprint: str) -> UpstreamSession | None:
        """The session holding this principal's resource subscriptions made with these
        capabilities: its calls go there when they can (a legacy server sends a subscription's
        updates, and runs the tools that trigger them, per session)."""
        for listener in self._listeners.get(principal, ()):
            key = listener.lease.key
            if listener.subscribed and key.fingerprint == fingerprint:
                return listener.lease.session
        return None

    async def follow(self, call: Lease, share: SessionSharer) -> int:
        """Move the principal's subscriptions made with the call's capabilities onto the call's
        session when theirs can never serve the call (another roots answer): the call may trigger
        updates, and the server sends them only to the session that subscribed. Returns how many
        listeners moved."""
        key = call.key
        moved = 0
        for listener in list(self._listeners.get(key.principal, ())):
            old = listener.lease
            if (
                not listener.subscribed
                or old.key.fingerprint != key.fingerprint
                or old.key == key
                or old.session is call.session
            ):
                continue
            new = share(call.session)
            if new is None:
                return moved
            try:
                subscribed = await self._subscribe(new.session, listener.honoured.resource_uris)
            except BaseException:
                await new.release()
                raise
            listener.lease, listener.generation = new, _generation(new.session)
            previous, listener.subscribed = listener.subscribed, subscribed
            await self._unsubscribe(old.session, previous)
            await old.release()
            moved += 1
            log.info("listen_followed_call", resources=len(subscribed))
        return moved

    def publish(self, principal: str, message: JsonObject) -> None:
        """A session-wide notification from any upstream session of `principal`."""
        for listener in list(self._listeners.get(principal, ())):
            tagged = listen_notification(message, listener.honoured, listener.listen_id)
            if tagged is not None:
                listener.sink.send(tagged)

    async def listen(
        self,
        request: FrontRequest,
        sink: NotificationSink,
        open_lease: LeaseOpener,
        server_info: Callable[[UpstreamSession], JsonObject | None],
        task_ids: frozenset[str] = frozenset(),
    ) -> JsonObject:
        """Acknowledge, then deliver until the client goes away (cancellation) or the bridge closes
        it.

        A URI the upstream refuses to subscribe is left out of the acknowledged filter; `task_ids`
        are the requested tasks this replica serves to the caller (docs/tasks.md)."""
        wanted = parse_listen_filter(request.params)
        lease = await open_lease()
        try:
            offered = self._honour(wanted, lease.session)
            subscribed = await self._subscribe(lease.session, offered.resource_uris)
        except BaseException:
            await lease.release()
            raise
        honoured = ListenFilter(offered.list_changed, subscribed, task_ids)
        listener = _Listener(
            request.front_request_id,
            request.principal,
            sink,
            honoured,
            lease,
            subscribed,
            _generation(lease.session),
        )
        try:
            sink.send(acknowledgement(listener.listen_id, honoured))
            self._listeners.setdefault(request.principal, set()).add(listener)
            log.info("listen_opened", filter=sorted(honoured.to_wire()))
            await self._watch(listener, open_lease)
            return closing_result(listener.listen_id, server_info(listener.lease.session))
        finally:
            self._forget(listener)
            await self._unsubscribe(listener.lease.session, listener.subscribed)
            await listener.lease.release()

    @staticmethod
    def _honour(wanted: ListenFilter, session: UpstreamSession) -> ListenFilter:
        capabilities = as_object(session.init_result.get("capabilities"))
        return honoured_filter(wanted, capabilities, session_stream=session.has_get_stream)

    async def _watch(self, listener: _Listener, open_lease: LeaseOpener) -> None:
        """Wait for the end; replace a lost (or silently re-initialized) upstream session
        and re- make its subscriptions. If no replacement can be had, the stream ends gracefully."""
        while True:
            done, _ = await asyncio.wait({listener.ended}, timeout=HEALTH_CHECK_S)
            if done:
                return
            session = listener.lease.session
            if session.is_alive and _generation(session) == listener.generation:
                continue
            # they died with it
            await self._unsubscribe(session, listener.subscribed, upstream=False)
            listener.subscribed = frozenset()
            await listener.lease.release(discard=True)
            try:
                listener.lease = await open_lease()
            except BridgeError as exc:
                log.warning("listen_upstream_lost", error=exc.message)
                return
            listener.generation = _generation(listener.lease.session)
            listener.subscribed = await self._subscribe(
                listener.lease.session, listener.honoured.resource_uris
            )
            log.warning("listen_upstream_reestablished", resources=len(listener.subscribed))
            for method in LIST_CHANGED:  # changes in the gap are lost: say so
                tagged = listen_notification(
                    notification(method), listener.honoured, listener.listen_id
                )
                if tagged is not None:
                    listener.sink.send(tagged)

    def _forget(self, listener: _Listener) -> None:
        peers = self._listeners.get(listener.principal)
        if peers is not None:
            peers.discard(listener)
            if not peers:
                del self._listeners[listener.principal]

    async def _subscribe(self, session: UpstreamSession, uris: frozenset[str]) -> frozenset[str]:
        """Take a reference on each URI (subscribing upstream for the first); returns those held.
        A refusal skips that URI; a cancellation gives back every reference taken here."""
        refs = self._uri_refs.setdefault(id(session), Counter())
        held: list[str] = []
        try:
            for uri in sorted(uris):
                if refs[uri_key(uri)] == 0 and not await self._request(
                    session, RESOURCES_SUBSCRIBE, uri
                ):
                    continue
                refs[uri_key(uri)] += 1
                held.append(uri)
        except BaseException:
            await asyncio.shield(self._unsubscribe(session, frozenset(held)))
            raise
        finally:
            if not refs:
                self._uri_refs.pop(id(session), None)
        return frozenset(held)

    async def _unsubscribe(
        self, session: UpstreamSession, uris: frozenset[str], *, upstream: bool = True
    ) -> None:
        """Give back references; the last one for a URI unsubscribes upstream (unless `upstream` is
        False: the session lost its subscriptions already)."""
        refs = self._uri_refs.get(id(session))
        if refs is None:
            return
        for uri in sorted(uris):
            refs[uri_key(uri)] -= 1
            if refs[uri_key(uri)] <= 0:
                del refs[uri_key(uri)]
                if upstream and session.is_alive:
                    await self._request(session, RESOURCES_UNSUBSCRIBE, uri)
        if not refs:
            del self._uri_refs[id(session)]

    @staticmethod
    async def _request(session: UpstreamSession, method: str, uri: str) -> bool:
        """Send a (un)subscribe upstream; False (logged) when it fails."""
        try:
            async with asyncio.timeout(10):
                await session.start(method, {"uri": uri}, headers={}, on_inbound=None).result()
        except (BridgeError, TimeoutError) as exc:
            log.warning(
                "upstream_resource_subscription_failed",
                upstream_method=method,
                error=getattr(exc, "message", "timed out"),
            )
            return False
        log.info("upstream_resource_subscription_changed", upstream_method=method)
        return True

    def close_all(self, reason: str) -> None:
        """Graceful end of every listen stream (shutdown): each answers with its closing result."""
        for listeners in list(self._listeners.values()):
            for listener in listeners:
                if not listener.ended.done():
                    listener.ended.set_result(reason)
