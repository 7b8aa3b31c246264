"""An `asyncio.subprocess.Process` for a child started with `subprocess.Popen`.

`proxy.upstream.stdio.early` starts the first legacy process before the event loop (and asyncio)
exist; `adopted()` connects its pipes to the running loop and watches its exit (a pidfd on Linux,
else a waiting thread), so the rest of the bridge handles it like any process it spawned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Final

READ_LIMIT: Final = 2**16  # asyncio's default StreamReader limit, as `process.spawn` gets it


class _PipeProtocol(asyncio.streams.FlowControlMixin):
    """The write end of the child's stdin, for a `StreamWriter` (drain raises once it is gone)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._gone: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._gone.done():
            self._gone.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._gone


class _ExitWatch:
    """The part of an asyncio subprocess transport that `asyncio.subprocess.Process` uses: pid,
    exit code, signals, and the wait for the exit (a pidfd on Linux, else a waiting thread)."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self._loop = loop
        self._exited: asyncio.Future[int] = loop.create_future()
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
            loop.add_reader(self._pidfd, self._reap)
        except (AttributeError, OSError, NotImplementedError):
            self._pidfd = None
            threading.Thread(target=self._wait_in_thread, daemon=True).start()

    def _reap(self) -> None:
        if self._popen.poll() is None:
            return
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._settle()

    def _wait_in_thread(self) -> None:
        self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        code = self._popen.returncode
        if not self._exited.done() and code is not None:
            self._exited.set_result(code)

    def get_pid(self) -> int:
        return self._popen.pid

    def get_returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    async def _wait(self) -> int:
        return await asyncio.shield(self._exited)


@dataclass
class _Pipes:
    """What `asyncio.subprocess.Process` reads from its protocol."""

    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader


async def adopted(popen: subprocess.Popen[bytes]) -> asyncio.subprocess.Process:
    """`popen` (started with three pipes) as `asyncio.create_subprocess_exec` would have returned
    it."""
    if popen.stdin is None or popen.stdout is None or popen.stderr is None:
        raise ValueError("the process was not started with piped stdin, stdout and stderr")
    loop = asyncio.get_running_loop()
    stdout = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
    stderr = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stdout, loop=loop), popen.stdout
    )
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stderr, loop=loop), popen.stderr
    )
    transport, protocol = await loop.connect_write_pipe(lambda: _PipeProtocol(loop), popen.stdin)
    stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    watch: Any = _ExitWatch(popen, loop)
    pipes: Any = _Pipes(stdin, stdout, stderr)
    return asyncio.subprocess.Process(watch, pipes, loop)


__all__ = ["READ_LIMIT", "adopted"]
