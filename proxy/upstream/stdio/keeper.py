"""The group keeper: a tiny process that stops the legacy process groups a dead bridge left behind.

`PR_SET_PDEATHSIG` kills the bridge's own children when it dies, but not *their* children: a legacy
server started through a wrapper (`npx`, `uvx`, `sh -c`) runs as a grandchild, and one that ignores
stdin EOF would run on. Elsewhere than Linux there is no death signal at all. So `mrtr-bridge`
starts one keeper, in its own session, the first time it spawns a legacy process. The bridge writes
each child's process group id to the keeper's stdin, and `-<id>` once that group is gone. When the
pipe reaches EOF without the farewell line `0` (the bridge died: SIGKILL, a crash), the keeper sends
SIGKILL to every group still listed, then exits. A group id is not reused while the group has a
member, and a group is struck off as soon as the bridge has seen it empty.

The keeper runs `sys.executable -I -S -c <KEEPER_SOURCE>`: the standard library only, in
milliseconds.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Final

import structlog

log = structlog.get_logger(__name__)

FAREWELL: Final = b"0\n"  # the bridge stopped its processes itself: forget them all and exit
EXIT_WAIT_S: Final = 2.0
KEEPER_SOURCE: Final = """
import os, signal, sys
groups = set()
for line in sys.stdin.buffer:
    word = line.strip()
    if word == b"0":
        sys.exit(0)
    if word.startswith(b"-"):
        groups.discard(int(word[1:]))
    elif word:
        groups.add(int(word))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class GroupKeeper:
    """The bridge's side of the keeper: started on first use; a keeper that died is not replaced."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False

    @property
    def pid(self) -> int | None:
        """The keeper's pid, once started and until closed."""
        return self._process.pid if self._process is not None else None

    def watch(self, pgid: int) -> None:
        self._send(f"{pgid}\n".encode(), start=True)

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}\n".encode(), start=False)

    def close(self) -> None:
        """Say farewell (every process is stopped) and wait for the keeper to exit."""
        process, self._process = self._process, None
        if process is None or process.stdin is None:
            return
        with contextlib.suppress(OSError):
            process.stdin.write(FAREWELL)
            process.stdin.close()
        try:
            process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _send(self, line: bytes, *, start: bool) -> None:
        if self._process is None and start and not self._failed:
            self._start()
        process = self._process
        if process is None or process.stdin is None:
            return
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except OSError as exc:  # it died: the other layers remain
            log.warning("upstream_group_keeper_lost", error=type(exc).__name__)
            self._process, self._failed = None, True

    def _start(self) -> None:
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", KEEPER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            log.warning("upstream_group_keeper_not_started", error=type(exc).__name__)
            self._failed = True


__all__ = ["KEEPER_SOURCE", "GroupKeeper"]
