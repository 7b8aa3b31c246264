"""A stop signal (SIGINT, SIGTERM) outside the bridge's graceful stop: one line, no traceback.

`proxy.__main__` installs `handle` for both signals as its first statement, and it stays until the
process exits; `proxy.common.stopping.BridgeStop` takes the signals over while the bridge serves and
gives them back when it stops. Three regimes, by what the process is doing:

1. **No event loop** (imports, settings, the end): `StopRequested` is raised where the program is;
   its `finally` blocks run (an early legacy process is stopped) up to `proxy.__main__`, which
   prints one line and exits. Raised inside a finalizer or a weakref callback, where the
   interpreter would print and drop it, it is kept quiet and raised again as the event loop
   starts.
2. **On the event loop, outside `BridgeStop`** (the HTTP app's set-up, `check` from start to end):
   the main task is cancelled, as `asyncio.run` does on Ctrl-C, so every `async with` closes what it
   opened (the aiohttp runner and client sessions, legacy processes); `event_loop.run` then raises
   `StopRequested`. A later signal, or one after the main task ended, exits at once (`os._exit`)
   with the same line: there is nothing left to wait for.
3. **`BridgeStop`** (serving): the first signal drains, a later one hurries
   (proxy/common/stopping.py); a clean drain exits 0.

Exit status: 130 for SIGINT (what a shell reports for an interrupted command), 0 for SIGTERM (a stop
that was asked for: a supervisor's, or a stdio client's close sequence). Once the command finished,
the signals are ignored: the process exits within milliseconds with its status. The interpreter's
own start-up, before `proxy.__main__` runs (about 15 ms, 50 ms with an editable install), keeps
Python's defaults (docs/operations.md § Shutdown).

Only `os`, `signal` and `sys` are imported here (`typing` neither): this module is loaded first.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # not `typing`'s: importing it would delay the handlers by 2 ms
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine
    from typing import Any, Final, TypeVar

    T = TypeVar("T")

PROG: Final = "mrtr-bridge"
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT


def line(signum: int, activity: str) -> str:
    """The one line: `mrtr-bridge: stopped by SIGINT while starting`."""
    return f"{PROG}: stopped by {signal.Signals(signum).name} {activity}\n"


def exit_status(signum: int) -> int:
    return EXIT_INTERRUPTED if signum == signal.SIGINT else 0


class StopRequested(BaseException):
    """A stop signal arrived where nothing could drain. A `BaseException`: no `except Exception`
    on the way mistakes it for a failure."""

    def __init__(self, signum: int, activity: str) -> None:
        super().__init__(signum)
        self.signum = signum
        self.status = exit_status(signum)
        self.line = line(signum, activity)


class _Interrupts:
    """The process's one record of the stop signals (signal handlers are process-wide)."""

    def __init__(self) -> None:
        self.activity = "while starting"
        self.looping = False  # an event loop runs the command (regime 2)
        self.signum: int | None = None  # the first signal taken on the event loop
        self.task: asyncio.Task[Any] | None = None  # the main task, once it started
        self.pending: StopRequested | None = None  # the stop raised outside the event loop

    def handle(self, signum: int, frame: object) -> None:
        if not self.looping:
            # Kept: raised inside a finalizer or a weakref callback (an import lock's, for one),
            # the interpreter drops it (`_unraisable`); the event loop's start raises it again.
            self.pending = StopRequested(signum, self.activity)
            raise self.pending
        if self.looping and self.signum is None:
            self.signum = signum
            task = self.task
            if task is None:  # not started yet: `main_task` cancels itself first thing
                return
            if not task.done():
                task.cancel()
                task.get_loop().call_soon_threadsafe(_wake)
                return
        self.exit_now(signum)

    def exit_now(self, signum: int) -> None:
        """Write the line and exit without unwinding anything (what was left is being stopped)."""
        status = exit_status(signum)
        try:
            os.write(2, line(signum, self.activity).encode())
        finally:
            os._exit(status)


def _wake() -> None:
    """Scheduled thread-safely: wakes a loop blocked in its selector to run the cancellation."""


_STATE: Final = _Interrupts()


def _unraisable(unraisable: Any) -> None:
    """`sys.unraisablehook`: a stop the interpreter dropped is kept (`_Interrupts.pending`), not
    printed; anything else as the interpreter prints it."""
    if not isinstance(unraisable.exc_value, StopRequested):
        sys.__unraisablehook__(unraisable)


def install() -> None:
    """Take SIGINT and SIGTERM for the whole process (the first thing `mrtr-bridge` does)."""
    sys.unraisablehook = _unraisable
    for signum in STOP_SIGNALS:
        signal.signal(signum, _STATE.handle)


def doing(activity: str) -> None:
    """What the one line says the process was doing: "while checking the upstream"."""
    _STATE.activity = activity


def finished() -> None:
    """The command is done: stop signals are ignored from now on. The interpreter
    exits within milliseconds (nothing is left to wait for); a handler of ours would be reset to
    the default by the interpreter's own shutdown, which a late signal would then die of."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


async def main_task(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` as the task a stop signal cancels (regime 2)."""
    import asyncio

    _STATE.task = asyncio.current_task()
    if _STATE.signum is not None:  # a signal came while the loop was starting
        main.close()
        raise asyncio.CancelledError()
    return await main


class on_loop:
    """While an event loop runs the command: a signal cancels `main_task`; on leaving, the
    cancellation it caused becomes `StopRequested` (a command that finished anyway keeps its
    outcome)."""

    def __enter__(self) -> None:
        if _STATE.pending is not None:  # raised where it was dropped (`_Interrupts.handle`)
            raise _STATE.pending
        _STATE.looping, _STATE.signum, _STATE.task = True, None, None

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        import asyncio

        signum = _STATE.signum
        _STATE.looping, _STATE.signum, _STATE.task = False, None, None
        if signum is not None and kind is not None and issubclass(kind, asyncio.CancelledError):
            raise StopRequested(signum, _STATE.activity)


__all__ = [
    "EXIT_INTERRUPTED",
    "STOP_SIGNALS",
    "StopRequested",
    "doing",
    "exit_status",
    "finished",
    "install",
    "main_task",
    "on_loop",
]
