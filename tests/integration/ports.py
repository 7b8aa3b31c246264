"""Ports for the test peers, unique among every test process on the machine, and a check that
what listens on one is the peer started for it.

Several pytest sessions run at once on one machine (xdist workers, and other checkouts' runs): a
port picked because it was free a moment ago could be picked by another session before the peer
bound it. Then one of the two servers fails to bind, and its test talks to the other's server
without knowing: a stopped (SIGSTOP) upstream still answers, a journal stays empty. So
`free_port()` *claims* a port: it holds an advisory lock on a file named after it
(`/tmp/mrtr-bridge-test-ports/<port>`) until `release(port)` (once the peer listens on it: a bound
port is not bindable, so nobody picks it then) or the process ends, and no other process using
this module picks that port meanwhile. And
`listener_is_ours()` reads `/proc` to tell whether the socket listening on a port belongs to a
given process session (a peer runs in a session of its own), so a peer whose port was taken by a
program that does not claim ports is reported, never used.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import socket
import tempfile
from pathlib import Path

__all__ = ["free_port", "is_listening", "listener_is_ours", "release"]

# Under pytest-xdist (`make test` runs several workers) each worker hands out ports from a block of
# its own below Linux's ephemeral range (32768-60999): a port it picked and has not yet bound is not
# taken by an outgoing connection, and a peer's readiness probe can never reach another worker's
# server. Two sessions' workers of the same name share a block: the claims keep them apart.
WORKER_PORT_BASE = 20000
WORKER_PORT_BLOCK = 1000
WORKER_PORT_BLOCKS = 12  # 20000-31999
CLAIMS_DIR = Path(tempfile.gettempdir()) / "mrtr-bridge-test-ports"
_worker_port_offsets = itertools.count(os.getpid())  # sessions start at different ports
_claims: dict[int, int] = {}  # port -> the descriptor holding its lock


def free_port() -> int:
    """A TCP port on 127.0.0.1, free now and claimed by this process: from this xdist worker's own
    block, or the kernel's choice (bind to port 0) in a serial run."""
    block = _worker_port_block()
    for _ in range(WORKER_PORT_BLOCK):
        if block is None:
            candidate = _kernel_port()
        else:
            candidate = block + next(_worker_port_offsets) % WORKER_PORT_BLOCK
        if _claim(candidate):
            return candidate
    raise RuntimeError(f"no free port to claim in {block}-{(block or 0) + WORKER_PORT_BLOCK - 1}")


def release(port: int) -> None:
    """Give up the claim on `port` (a peer listens on it now)."""
    descriptor = _claims.pop(port, None)
    if descriptor is not None:
        os.close(descriptor)


def is_listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def listener_is_ours(port: int, session: int) -> bool:
    """Whether a socket listening on `port` belongs to a process of `session` (its leader's pid);
    True where `/proc` cannot tell (not Linux)."""
    if not Path("/proc/net/tcp").exists():
        return True
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    return bool(sockets) and any(_holds_any(pid, sockets) for pid in _session_members(session))


def _worker_port_block() -> int | None:
    """The first port of this xdist worker's block ("gw3" -> 23000), None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    return WORKER_PORT_BASE + (int(worker[2:]) % WORKER_PORT_BLOCKS) * WORKER_PORT_BLOCK


def _kernel_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _claim(port: int) -> bool:
    """Whether `port` is bindable and this process holds its claim (taking it if nobody does)."""
    if port not in _claims:
        CLAIMS_DIR.mkdir(mode=0o777, exist_ok=True)
        descriptor = os.open(CLAIMS_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            return False
        _claims[port] = descriptor
    return _bindable(port)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rpartition(":")[2], 16) == port:  # 0A: LISTEN
                    inodes.add(inode)
    return inodes


def _session_members(session: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # after "pid (comm)": state, ppid, pgrp, session
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(fields[3]) == session:
                    members.append(int(entry.name))
    return members


def _holds_any(pid: int, sockets: set[str]) -> bool:
    with contextlib.suppress(OSError):
        for descriptor in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(descriptor) in sockets:
                    return True
    return False
