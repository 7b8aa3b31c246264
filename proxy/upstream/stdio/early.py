"""The legacy stdio process started first: before the bridge imports anything it can do without.

A client that launches `mrtr-bridge stdio` waits for the legacy server's first answer, and a Python
server spends about half a second importing before it can give one; so does the bridge (aiohttp,
pydantic, structlog, the engine). The entry point (`proxy.__main__`) therefore starts the configured
command here, with the standard library only, and imports the rest while the server starts
(docs/operations.md, "Start-up over stdio").

The command is guessed from the command line, environment and config file (`proxy.app.early_start`)
without validating anything. Once the real settings are loaded, `claim()` keeps the process only if
the settings name exactly the command, environment and working directory it was started with, and
stops it at once otherwise; `discard()` stops a process nobody claimed. The
process is started exactly as `process.spawn` starts every other one (piped stdio, its own
session, dying with the bridge), and `adopt()` turns it into an `asyncio.subprocess.Process` once
the event loop runs.

This module imports nothing from the bridge and nothing outside the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:
    import asyncio

PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


def _load_prctl() -> Any:
    """libc's `prctl`, resolved once in the bridge (never between fork and exec), or None
    off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None


_PRCTL: Final = _load_prctl()


def die_with_bridge() -> Callable[[], None] | None:
    """The `preexec_fn` that makes a child die with the bridge (Linux, spawned on the main thread),
    or None (`children` says why the main thread only)."""
    if _PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    prctl, bridge_pid, death_signal = _PRCTL, os.getpid(), ctypes.c_ulong(signal.SIGKILL)

    # in the child, between fork and exec: system calls and nothing more
    def set_death_signal() -> None:
        leave_the_bridges_group()
        prctl(
            PR_SET_PDEATHSIG, death_signal, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
        if os.getppid() != bridge_pid:  # the bridge died before the death signal was armed
            os.kill(os.getpid(), signal.SIGKILL)

    return set_death_signal


def leave_the_bridges_group() -> None:
    """In the child, between fork and exec: its own session now, and drop every signal that
    reached it while it was still in the bridge's process group.

    uvloop (libuv) forks with every signal blocked and calls `setsid` only after this function,
    just before it resets the handlers, unblocks the signals and execs; a Ctrl-C (or a client's
    SIGTERM) sent to the bridge's group in between (about 0.7 ms per spawn) stayed
    pending and then killed the new process with the default action. After `setsid`
    nothing sent to the bridge's group reaches the child, so what is pending was meant for the
    bridge: taken with `sigtimedwait`, without touching a handler. The standard library's
    `subprocess` calls `setsid` before this and never blocks signals: nothing to do then."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    pending = signal.sigpending()
    while pending and signal.sigtimedwait(pending, 0) is not None:
        pass


class Launch(NamedTuple):
    """How a legacy stdio process is started: its argv, the extra environment, the directory."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None

    @classmethod
    def of(cls, command: str, env: Mapping[str, str], cwd: str | None) -> Launch | None:
        """The launch of a configured command line, or None if it is not one (`spawn` says why)."""
        try:
            argv = tuple(shlex.split(command))
        except ValueError:
            return None
        return cls(argv, dict(env), cwd) if argv else None


class EarlyProcess:
    """The legacy process started before the bridge's imports, until the bridge claims it."""

    def __init__(self, launch: Launch, popen: subprocess.Popen[bytes]) -> None:
        self.launch = launch
        self.pid = popen.pid
        self._popen: subprocess.Popen[bytes] | None = popen

    @property
    def program(self) -> str:
        return self.launch.argv[0]

    def claim(self, launch: Launch | None) -> bool:
        """Keep the process for the bridge if `launch` (from the real settings) is the one it was
        started with; otherwise stop it now. True if kept."""
        if self._popen is not None and launch == self.launch and self._popen.poll() is None:
            return True
        self.discard()
        return False

    def discard(self) -> None:
        """Stop a process nobody will use: SIGKILL to its group (it was never sent anything)."""
        popen, self._popen = self._popen, None
        if popen is None or popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    async def adopt(self) -> asyncio.subprocess.Process:
        """The process as `asyncio.create_subprocess_exec` would have returned it; from here on the
        event loop owns it."""
        from proxy.upstream.stdio.adopted import adopted

        popen, self._popen = self._popen, None
        if popen is None:
            raise RuntimeError("the early legacy process was already adopted or discarded")
        return await adopted(popen)


def start_early(launch: Launch, environ: Mapping[str, str]) -> EarlyProcess | None:
    """Start `launch` as `process.spawn` would, or None if it does not start (the bridge then
    reports why, as without this)."""
    if launch.cwd is not None and not os.path.isdir(launch.cwd):
        return None
    try:
        popen = subprocess.Popen(
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**environ, **launch.env},
            cwd=launch.cwd,
            start_new_session=True,
            preexec_fn=die_with_bridge(),
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return EarlyProcess(launch, popen)


__all__ = [
    "EarlyProcess",
    "Launch",
    "die_with_bridge",
    "leave_the_bridges_group",
    "start_early",
]
