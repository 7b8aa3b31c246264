"""The held-call machine's two timers ("batch" and "deadline") on the event loop: a `StartTimer`
action becomes a loop timer whose expiry is fed back to the machine as an event carrying the
action's token (a stale token is ignored by the machine)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from translators.held.events import BatchWindowClosed, DeadlinePassed, Event, StartTimer


class MachineTimers:
    def __init__(self, feed: Callable[[Event], None]) -> None:
        self._feed = feed
        self._handles: dict[str, asyncio.TimerHandle] = {}

    def start(self, action: StartTimer) -> None:
        """Start `action.name`, replacing the running one of that name."""
        self.cancel(action.name)
        event: Event = (
            BatchWindowClosed(action.token)
            if action.name == "batch"
            else DeadlinePassed(action.token)
        )
        self._handles[action.name] = asyncio.get_running_loop().call_later(
            action.delay_s, self._feed, event
        )

    def cancel(self, name: str) -> None:
        handle = self._handles.pop(name, None)
        if handle is not None:
            handle.cancel()


__all__ = ["MachineTimers"]
