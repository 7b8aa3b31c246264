"""The legacy stdio processes one bridge started, so that none of them outlives it.

Three layers, from gentle to certain:

* each session's own stop (`stdio_process.stop_process`): stdin closed, then SIGTERM, then SIGKILL
  to its process group, `upstream.kill_grace_s` apart;
* `ChildProcesses.stop_all`, when the bridge is in a hurry (the stdio front's stop deadline, or a
  second stop signal): every live process group gets SIGTERM at once and SIGKILL after a short
  grace; `kill_all` is the synchronous last resort just before the bridge exits;
* when the bridge dies without running any code (SIGKILL): on Linux the kernel, since each child is
  started with `PR_SET_PDEATHSIG` = SIGKILL (`die_with_bridge`), so it dies with the bridge; and on
  any POSIX system the group keeper (`stdio_keeper`), which kills what is left of each group (the
  children's own children, which the death signal does not reach).

Each child runs in its own session (process group), so signals meant for the bridge (Ctrl-C on its
terminal, a client's `killpg` of the bridge's group) never reach the children directly: the bridge
stops them itself, in order. The death signal is tied to the *thread* that forked the child, so it
is set only when the spawn runs on the main thread, where `mrtr-bridge` runs its event loop (a child
of a short-lived thread would die with that thread). The hook runs between fork and exec, in a child
of a process that may have other threads: it only calls `prctl` (resolved beforehand), `getppid` and
`kill`, which take no lock another thread could have held (`early.die_with_bridge`, where the
entry point's first process is started with it too). Platform notes: docs/operations.md,
"Shutdown".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Final

import structlog

from proxy.upstream.stdio.early import die_with_bridge
from proxy.upstream.stdio.keeper import GroupKeeper

log = structlog.get_logger(__name__)

REAP_WAIT_S: Final = 1.0  # after SIGKILL, how long to wait for the exits to be reaped
GROUP_POLL_S: Final = 0.05
Process = asyncio.subprocess.Process


def signal_group(process: Process, sig: signal.Signals) -> None:
    """`sig` to the process's group (the child leads its own session, so its pid is the
    group id)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)
        else:  # pragma: no cover - non-POSIX
            process.send_signal(sig)


async def exited_within(process: Process, timeout: float) -> bool:
    """Whether the process exited and its pipes closed within `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            await process.wait()
    except TimeoutError:
        return False
    return True


def _groups_running() -> set[int] | None:
    """The process groups with a member still running (not a zombie), from /proc; None without
    /proc.

    A killed member stays in its group until it is reaped, and an orphan is reaped by PID 1, which
    in a container may never do it: signal 0 to the group would report it alive for ever."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    groups = set()
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:  # gone meanwhile
                continue
            if len(fields) > 2 and fields[0] not in (b"Z", b"X"):  # state, ppid, pgrp
                groups.add(int(fields[2]))
    return groups


def _group_alive(pgid: int, running: set[int] | None = None) -> bool:
    """Whether the group still has a running member (a group id is not reused while it has any)."""
    if running is not None:
        return pgid in running
    if not hasattr(os, "killpg"):  # pragma: no cover - non-POSIX
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or a member that is not ours to wait for
        return False
    return True


async def stop_leftovers(process: Process, grace_s: float) -> bool:
    """After the process exited: SIGTERM to what is left of its group (its own children, which
    had the same stdin EOF), SIGKILL to those still there `grace_s` later. Whether anything was
    left."""
    if not _group_alive(process.pid, _groups_running()):
        return False
    signal_group(process, signal.SIGTERM)
    deadline = asyncio.get_running_loop().time() + grace_s
    while (
        _group_alive(process.pid, _groups_running())
        and asyncio.get_running_loop().time() < deadline
    ):
        await asyncio.sleep(GROUP_POLL_S)
    signal_group(process, signal.SIGKILL)
    return True


class ChildProcesses:
    """Every process one bridge spawned that has not been stopped yet, and, if given, the
    `keeper` that stops their groups should the bridge die first (`stdio_keeper`)."""

    def __init__(self, keeper: GroupKeeper | None = None) -> None:
        self._processes: list[Process] = []
        self._keeper = keeper

    def add(self, process: Process) -> None:
        live = self.live()
        for gone in [known for known in self._processes if known not in live]:
            self.discard(gone)
        self._processes = [*live, process]
        if self._keeper is not None:
            self._keeper.watch(process.pid)

    def discard(self, process: Process) -> None:
        """The process has been stopped and its group is empty."""
        if process in self._processes:
            self._processes.remove(process)
        if self._keeper is not None:
            self._keeper.forget(process.pid)

    def close(self) -> None:
        """Every process is stopped: let the keeper go."""
        if self._keeper is not None:
            self._keeper.close()

    def live(self) -> list[Process]:
        """The processes still running, or whose process group still has members (their
        children)."""
        running = _groups_running()
        return [
            process
            for process in self._processes
            if process.returncode is None or _group_alive(process.pid, running)
        ]

    def signal_all(self, sig: signal.Signals) -> int:
        """`sig` to the group of every live process; how many there were."""
        live = self.live()
        for process in live:
            signal_group(process, sig)
        return len(live)

    async def stop_all(self, grace_s: float) -> None:
        """SIGTERM to every live group at once, SIGKILL to those still there `grace_s` later."""
        if not self.signal_all(signal.SIGTERM):
            return
        log.info("upstream_processes_hurried", count=len(self.live()), grace_s=grace_s)
        await self._wait_all(grace_s)
        if self.signal_all(signal.SIGKILL):
            await self._wait_all(REAP_WAIT_S)

    def kill_all(self) -> int:
        """SIGKILL to every live group, synchronously (the bridge is about to exit); how many there
        were."""
        count = self.signal_all(signal.SIGKILL)
        if count:
            log.warning("upstream_processes_killed_at_exit", count=count)
        return count

    async def _wait_all(self, timeout: float) -> None:
        await asyncio.gather(*(exited_within(process, timeout) for process in self.live()))


__all__ = ["ChildProcesses", "die_with_bridge", "exited_within", "signal_group", "stop_leftovers"]
