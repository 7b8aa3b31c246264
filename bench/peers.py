"""The processes a benchmark runs: the legacy bench server and bridge instances, on loopback.

Each is a `subprocess.Popen` child in its own process group with its output in a log file;
`Processes.close()` stops them all (SIGTERM, then SIGKILL after a bounded wait). Start-up waits
poll for a listening port with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]
LEGACY_PYTHON: Final = REPO / ".venv-legacy" / "bin" / "python"
BRIDGE_EXE: Final = REPO / ".venv" / "bin" / "mrtr-bridge"
SERVER: Final = REPO / "bench" / "servers" / "legacy_bench_server.py"
RELAY: Final = REPO / "bench" / "servers" / "relay.py"
STREAM_RELAY: Final = REPO / "bench" / "servers" / "stream_relay.py"
ROOTS_KEEPING_SERVER: Final = REPO / "tests" / "peers" / "roots_keeping_server.py"
BRIDGE_PYTHON: Final = REPO / ".venv" / "bin" / "python"
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def legacy_stdio_argv() -> list[str]:
    return [str(LEGACY_PYTHON), str(SERVER), "--transport", "stdio"]


def legacy_stdio_command() -> str:
    return shlex.join(legacy_stdio_argv())


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def wait_listening(self) -> None:
        assert self.port is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited ({self.popen.returncode}); log: {self.log_path}"
                )
            if _listening(self.port):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen on {self.port}; log: {self.log_path}")

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=STOP_TIMEOUT_S)


@dataclass
class Processes:
    """Starts the peers of a run; `close()` stops every one (last started, first stopped)."""

    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mrtr-bench-")))
    procs: list[Proc] = field(default_factory=list)

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None, port: int | None
    ) -> Proc:
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path, port)
        self.procs.append(proc)
        if port is not None:
            proc.wait_listening()
        return proc

    def legacy_http(self, name: str = "legacy", server: Path = SERVER) -> Proc:
        port = free_port()
        return self._spawn(name, [str(LEGACY_PYTHON), str(server), "--port", str(port)], None, port)

    def bridge(
        self,
        name: str,
        upstream: list[str],
        env: dict[str, str] | None = None,
        exe: list[str] | None = None,
    ) -> Proc:
        """`mrtr-bridge serve` with `upstream` flags (`--upstream URL` or
        `--upstream-command CMD`); `exe` replaces the `mrtr-bridge` command."""
        port = free_port()
        argv = [*(exe or [str(BRIDGE_EXE)]), "serve", *upstream, "--listen", f"127.0.0.1:{port}"]
        return self._spawn(name, argv, env, port)

    def replica(self, name: str, upstream_url: str, port: int, env: dict[str, str]) -> Proc:
        """`mrtr-bridge serve` on a given port (a cluster replica lists every port as a peer)."""
        argv = [
            str(BRIDGE_EXE),
            "serve",
            "--upstream",
            upstream_url,
            "--listen",
            f"127.0.0.1:{port}",
        ]
        return self._spawn(name, argv, env, port)

    def relay(self, upstream_url: str) -> Proc:
        """The bare aiohttp relay (calibration: one extra hop with no bridge logic)."""
        port = free_port()
        return self._spawn(
            "relay",
            [str(BRIDGE_PYTHON), str(RELAY), "--upstream", upstream_url, "--port", str(port)],
            None,
            port,
        )

    def stream_relay(self, upstream_url: str) -> Proc:
        """The bare relay that streams replies (carries a push on the call's SSE stream)."""
        port = free_port()
        argv = [str(BRIDGE_PYTHON), str(STREAM_RELAY), "--upstream", upstream_url]
        return self._spawn("stream-relay", [*argv, "--port", str(port)], None, port)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
