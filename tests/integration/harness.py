"""Real peers for integration tests: legacy mcp 1.x servers and the bridge as subprocesses,
the mcp 2.x modern client; raw hand-made modern / legacy HTTP requests live in `raw_http.py`
(re-exported here).

Processes are plain `subprocess.Popen` children (any fixture scope, no event loop needed),
each in its own process group with stdout+stderr in a log file; `Peers.close()` stops them
all (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`). Start-up waits poll for a listening
port, bounded by `START_TIMEOUT_S`. See tests/integration/README.md for the client recipes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from secret_scan import secrets_in

from config import ENV_PREFIX, env_name
from translators.protocol.eras import MODERN_VERSION

from .ports import free_port, is_listening, listener_is_ours, release
from .raw_http import (
    CLIENT_INFO,
    HTTP_TIMEOUT_S,
    JsonObject,
    LegacyPoster,
    ModernPoster,
    RawReply,
    encode_header_value,
    parse_sse,
    read_reply,
)

__all__ = [
    "CLIENT_INFO",
    "DEMO_SERVER",
    "FIXTURE_SERVER",
    "Bridged",
    "InputAnswers",
    "LegacyPoster",
    "ModernPoster",
    "PeerProcess",
    "PeerStartError",
    "Peers",
    "RawReply",
    "bridge_env",
    "encode_header_value",
    "free_port",
    "is_listening",
    "legacy_stdio_command",
    "modern_client",
    "parse_sse",
    "read_reply",
    "until_lease_waits",
    "upstream_status",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = REPO_ROOT / "tests" / "peers"
LEGACY_PYTHON = REPO_ROOT / ".venv-legacy" / "bin" / "python"
BRIDGE_EXE = Path(sys.executable).parent / "mrtr-bridge"
FIXTURE_SERVER = "legacy_fixture_server.py"
DEMO_SERVER = "demo_server.py"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
LOG_TAIL_CHARS = 6000


class PeerStartError(RuntimeError):
    """A peer exited or did not listen in time; the message carries its log tail."""


@dataclass
class PeerProcess:
    """One child process serving HTTP on 127.0.0.1:`port`."""

    name: str
    argv: list[str]
    port: int
    log_path: Path
    popen: subprocess.Popen[bytes]
    path: str = "/mcp"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def log_text(self, limit: int = LOG_TAIL_CHARS) -> str:
        """The last `limit` characters of the process's stdout+stderr."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return text[-limit:]

    def final_log(self) -> str:
        """Everything the process wrote, once it has stopped. The bridge writes a request's access
        line after its answer, so a client holding the answer may read the log before the line."""
        self.stop()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def until_logged(self, text: str, timeout: float = START_TIMEOUT_S) -> None:
        """Until `text` appears in the process's output (bounded by `timeout`)."""
        async with asyncio.timeout(timeout):
            while text not in self.log_text(limit=10**8):
                await asyncio.sleep(0.05)

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the process listens on its port (a listener of another process does not count:
        this one then fails to bind, and says so)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                taken = " (another process listens on its port)" if is_listening(self.port) else ""
                raise PeerStartError(
                    self._failure(f"exited with status {self.popen.returncode}{taken}")
                )
            if is_listening(self.port) and listener_is_ours(self.port, self.popen.pid):
                release(self.port)
                return
            time.sleep(0.05)
        raise PeerStartError(
            self._failure(f"did not listen on port {self.port} within {timeout:.0f}s")
        )

    def _failure(self, what: str) -> str:
        return (
            f"{self.name} {what}\n  argv: {' '.join(self.argv)}\n--- log tail "
            f"---\n{self.log_text()}"
        )

    def stop(self) -> None:
        """Terminate the process group; kill it if it does not exit in `STOP_TIMEOUT_S`."""
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
class Bridged:
    """A legacy server with the bridge in front of it."""

    legacy: PeerProcess
    bridge: PeerProcess

    @property
    def url(self) -> str:
        return self.bridge.url


def bridge_env(settings: Mapping[str, Mapping[str, Any] | Any]) -> dict[str, str]:
    """`{"held": {"ttl_s": 5}}` -> `{"MRTR_BRIDGE_HELD_TTL_S": "5"}`, in config/loader.py's formats.

    Lists become comma-separated values, mappings `k=v` pairs
    (`MRTR_BRIDGE_HELD_KEYS="k1=...,k2=..."`); a top-level field is `MRTR_BRIDGE_<FIELD>`."""
    env: dict[str, str] = {}
    for section, value in settings.items():
        if isinstance(value, Mapping):
            for name, inner in value.items():
                env[env_name(f"{section}.{name}")] = _env_value(inner)
        else:
            env[env_name(section)] = _env_value(value)
    return env


async def upstream_status(http: aiohttp.ClientSession, bridge: PeerProcess) -> JsonObject:
    """The bridge's one upstream as its `/status.json` shows it (sessions, `lease_waits`, ...)."""
    async with http.get(f"http://127.0.0.1:{bridge.port}/status.json") as reply:
        assert reply.status == 200
        status = await reply.json()
    (upstream,) = status["upstreams"]
    facts: JsonObject = upstream
    return facts


async def until_lease_waits(
    http: aiohttp.ClientSession, bridge: PeerProcess, since: int, call: asyncio.Task[Any]
) -> None:
    """Until the bridge has counted a lease wait more than `since` (`call` now waits for a session,
    and only a release lets it go on), or `call` ended; bounded by the caller's timeout."""
    while (await upstream_status(http, bridge))["lease_waits"] <= since and not call.done():
        await asyncio.sleep(0.05)


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{key}={_env_value(inner)}" for key, inner in value.items())
    if isinstance(value, list | tuple):
        return ",".join(_env_value(item) for item in value)
    return str(value)


async def run_legacy_script(
    script: str, *args: str, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run `tests/peers/<script>` with `.venv-legacy` to the end (`env` added to this process's
    environment); the JSON of its last line."""
    process = await asyncio.create_subprocess_exec(
        str(LEGACY_PYTHON),
        str(PEERS_DIR / script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


def legacy_stdio_command(script: str = FIXTURE_SERVER, *args: str) -> str:
    """The shell-style command line that runs a `tests/peers/` script over stdio from
    `.venv-legacy`."""
    return shlex.join([str(LEGACY_PYTHON), str(PEERS_DIR / script), "--transport", "stdio", *args])


@dataclass
class Peers:
    """Starts peers and stops every one of them on `close()` (last started, first stopped)."""

    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mrtr-peers-")))
    processes: list[PeerProcess] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: list[str],
        port: int,
        env: Mapping[str, str] | None = None,
        *,
        inherit_bridge_env: bool = True,
    ) -> PeerProcess:
        """Start `argv` (which must listen on `port`) and wait until it accepts connections."""
        base = {
            k: v
            for k, v in os.environ.items()
            if inherit_bridge_env or not k.startswith(ENV_PREFIX)
        }
        log_path = self.log_dir / f"{len(self.processes):02d}-{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env={**base, **(env or {})},
                start_new_session=True,
            )
        peer = PeerProcess(name, argv, port, log_path, popen)
        self.processes.append(peer)
        peer.wait_listening()
        return peer

    def legacy(self, script: str = FIXTURE_SERVER, *args: str) -> PeerProcess:
        """A legacy server `tests/peers/<script> --port N <args>` run by `.venv-legacy`."""
        if not LEGACY_PYTHON.exists():
            raise PeerStartError(
                f"{LEGACY_PYTHON} is missing: run `make test`, which creates .venv-legacy"
            )
        port = free_port()
        argv = [str(LEGACY_PYTHON), str(PEERS_DIR / script), "--port", str(port), *args]
        return self.start(Path(script).stem, argv, port)

    def bridge(
        self,
        upstream_url: str | None,
        *,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> PeerProcess:
        """`mrtr-bridge serve --upstream URL --listen 127.0.0.1:N <args>` with `env` (no --upstream
        if None).

        Inherited `MRTR_BRIDGE_*` variables are dropped, so only `env` configures the bridge."""
        if not BRIDGE_EXE.exists():
            raise PeerStartError(
                f"{BRIDGE_EXE} is missing: run `make test`, which installs the bridge in .venv"
            )
        port = free_port()
        upstream = ["--upstream", upstream_url] if upstream_url is not None else []
        argv = [str(BRIDGE_EXE), "serve", *upstream, "--listen", f"127.0.0.1:{port}", *args]
        return self.start("bridge", argv, port, env, inherit_bridge_env=False)

    def bridge_stdio(
        self, script: str = FIXTURE_SERVER, *script_args: str, env: Mapping[str, str] | None = None
    ) -> PeerProcess:
        """The bridge launching `tests/peers/<script> --transport stdio` as its legacy stdio
        upstream."""
        command = bridge_env({"upstream": {"command": legacy_stdio_command(script, *script_args)}})
        return self.bridge(None, env={**command, **(env or {})})

    def bridged(
        self, script: str = FIXTURE_SERVER, *script_args: str, env: Mapping[str, str] | None = None
    ) -> Bridged:
        """A legacy server and the bridge in front of it."""
        legacy = self.legacy(script, *script_args)
        return Bridged(legacy, self.bridge(legacy.url, env=env))

    def close(self) -> None:
        """Stop every peer; a bridge whose log holds a requestState or a bearer token fails the
        test."""
        for peer in reversed(self.processes):
            peer.stop()
        leaks = [
            f"{peer.name}: {hit}"
            for peer in self.processes
            if peer.name.startswith("bridge")
            for hit in secrets_in(peer.log_path.read_text(encoding="utf-8", errors="replace"))
        ]
        assert not leaks, "secret material in a bridge log:\n" + "\n".join(leaks)

    def logs(self) -> list[tuple[str, str]]:
        """(title, log tail) of every peer, for failure reports."""
        return [
            (f"{p.name} (port {p.port}, exit {p.popen.poll()})", p.log_text())
            for p in self.processes
        ]


# --- the modern client (mcp 2.x) --------------------------------------------------------------


@dataclass
class InputAnswers:
    """Canned answers for the modern client's elicitation / sampling / roots callbacks.

    Every question asked is recorded in `asked` as `(method, params or None)`."""

    elicit_action: Literal["accept", "decline", "cancel"] = "accept"
    elicit_content: JsonObject = field(default_factory=lambda: {"name": "Alice"})
    sample_text: str = "Paris"
    roots: list[str] = field(default_factory=lambda: ["file:///test/root"])
    asked: list[tuple[str, Any]] = field(default_factory=list)

    async def elicitation(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(("elicitation/create", params))
        content = self.elicit_content if self.elicit_action == "accept" else None
        return types.ElicitResult(action=self.elicit_action, content=content)

    async def sampling(
        self, ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append(("sampling/createMessage", params))
        text = types.TextContent(type="text", text=self.sample_text)
        return types.CreateMessageResult(role="assistant", content=text, model="canned-model")

    async def list_roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append(("roots/list", None))
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in self.roots])

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `modern_client` that register all three callbacks."""
        return {
            "elicitation_callback": self.elicitation,
            "sampling_callback": self.sampling,
            "list_roots_callback": self.list_roots,
        }


@contextlib.asynccontextmanager
async def modern_client(
    url: str, *, headers: Mapping[str, str] | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    """An entered `mcp.Client` pinned to the modern revision (no probe, no response cache).

    `headers` go on every HTTP request (e.g. `Authorization`); `client_kwargs` go to `Client`
    (callbacks, `log_level`, `read_timeout_seconds`, ...)."""
    client_kwargs.setdefault("mode", MODERN_VERSION)
    client_kwargs.setdefault("cache", None)
    timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=300.0)
    async with httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, **client_kwargs) as client:
            yield client
