"""The event loop the bridge runs on: uvloop when installed (the default), or asyncio's own.

`front.event_loop` chooses: "auto" takes uvloop when it can be imported and asyncio's loop
otherwise; "uvloop" requires it (a startup error names the missing package); "asyncio" never uses
it. uvloop runs the same code with its transports, timers and polling in C (libuv): the bench's
CPU per forwarded call (bench/README.md) shows what it saves. Everything the bridge does works on
both loops; the tests run the in-process bridge on asyncio's loop and spawned bridges on the
default.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal, TypeVar

from proxy.app import interrupts

EventLoopChoice = Literal["auto", "asyncio", "uvloop"]
UVLOOP: Final = "uvloop"
ASYNCIO: Final = "asyncio"
T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopUnavailable(RuntimeError):
    """`front.event_loop = "uvloop"` but uvloop cannot be imported."""


def _uvloop_factory() -> LoopFactory | None:
    try:
        module = importlib.import_module(UVLOOP)
    except ImportError:
        return None
    factory: LoopFactory = module.new_event_loop
    return factory


def loop_factory(choice: EventLoopChoice) -> tuple[str, LoopFactory | None]:
    """The loop's name and its factory (None: asyncio's default loop) for `choice`."""
    if choice == ASYNCIO:
        return ASYNCIO, None
    factory = _uvloop_factory()
    if factory is not None:
        return UVLOOP, factory
    if choice == UVLOOP:
        raise EventLoopUnavailable(
            'front.event_loop is "uvloop" but uvloop is not installed (pip install uvloop), or '
            'set it to "auto" or "asyncio"'
        )
    return ASYNCIO, None


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice) -> T:
    """`asyncio.run(main)` on the loop `choice` names; a stop signal before the bridge takes the
    signals over cancels `main` and raises `interrupts.StopRequested` (proxy/app/interrupts.py)."""
    _name, factory = loop_factory(choice)
    with interrupts.on_loop(), asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(interrupts.main_task(main))


def running_loop_name() -> str:
    """ "uvloop" or "asyncio": what the running loop is (for the startup log line)."""
    return UVLOOP if type(asyncio.get_running_loop()).__module__.startswith(UVLOOP) else ASYNCIO


__all__ = [
    "EventLoopChoice",
    "EventLoopUnavailable",
    "loop_factory",
    "run",
    "running_loop_name",
]
