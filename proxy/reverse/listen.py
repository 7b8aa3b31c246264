"""Session-wide notifications of a legacy session served in front of a 2026-07-28 upstream.

While a legacy client keeps its GET stream open, the bridge holds one `subscriptions/listen`
request upstream for it: list changes of tools, prompts and resources, and updates of the resources
the session subscribed to (`resources/subscribe`, `resources/unsubscribe` restart the listen with
the new set). What the upstream sends on it goes to the GET stream as a legacy server sends it
(without the `subscriptionId` `_meta`). The listen ends with the GET stream or the session; one the
upstream ends is opened again (after 2 s, doubling up to 30 s while it keeps ending early).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import structlog

from proxy.reverse.sessions import ReverseSession
from proxy.upstream.modern.caller import ModernCaller
from translators.protocol.eras import (
    PROMPTS_LIST_CHANGED,
    RESOURCE_UPDATED,
    RESOURCES_LIST_CHANGED,
    SUBSCRIPTIONS_ACKNOWLEDGED,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_LIST_CHANGED,
)
from translators.reverse.session import modern_meta
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, notification, request

_log = structlog.get_logger("proxy.reverse")
_RELAYED: Final = frozenset(
    {TOOLS_LIST_CHANGED, PROMPTS_LIST_CHANGED, RESOURCES_LIST_CHANGED, RESOURCE_UPDATED}
)


class Listener:
    """One upstream `subscriptions/listen` per legacy session with an open GET stream."""

    def __init__(self, caller: ModernCaller) -> None:
        self._caller = caller
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._count = 0

    def refresh(self, session: ReverseSession, authorization: str | None) -> None:
        """(Re)start the session's listen with its current subscriptions, if its GET stream is
        open."""
        self.stop(session)
        if session.outbox is None or session.closed:
            return
        self._count += 1
        task = asyncio.get_running_loop().create_task(
            self._listen(session, authorization, f"mrtr-bridge-listen-{self._count}"),
            name="reverse-listen",
        )
        self._tasks[session.id] = task
        session.on_close.append(lambda: self.stop(session))

    def stop(self, session: ReverseSession) -> None:
        task = self._tasks.pop(session.id, None)
        if task is not None:
            task.cancel()

    async def _listen(
        self, session: ReverseSession, authorization: str | None, listen_id: str
    ) -> None:
        view = session.view
        wanted: JsonObject = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
        }
        if view.subscribed:
            wanted["resourceSubscriptions"] = sorted(view.subscribed)
        message = request(
            listen_id,
            SUBSCRIPTIONS_LISTEN,
            {"notifications": wanted, "_meta": modern_meta(view, logs=False)},
        )

        def relay(notice: JsonObject) -> None:
            method = notice.get("method")
            if method == SUBSCRIPTIONS_ACKNOWLEDGED:  # open: what changes from now on comes
                _log.info("reverse_listen_opened", resource_subscriptions=len(view.subscribed))
            elif method in _RELAYED:
                params = {k: v for k, v in as_object(notice.get("params")).items() if k != "_meta"}
                session.notify(notification(str(method), params or None))

        pause_s = 1.0
        while session.outbox is not None and not session.closed:
            began = asyncio.get_running_loop().time()
            reply = await self._caller.call(message, relay, authorization)
            _log.info("reverse_listen_ended", error="error" in reply)
            # the upstream ended it (restart, shed load): listen again, backing off while it fails
            lasted_s = asyncio.get_running_loop().time() - began
            pause_s = 1.0 if lasted_s > 30 else min(pause_s * 2, 30.0)
            await asyncio.sleep(pause_s)

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


__all__ = ["Listener"]
