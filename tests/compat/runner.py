"""One compatibility row: a server run directly with the legacy client, checked by `mrtr-bridge
check`, and run through the bridge with the modern client, each against a fresh server process
(a stateful or one-session server then meets each client as it would alone), then compared."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from integration.harness import BRIDGE_EXE, REPO_ROOT, Peers, bridge_env, free_port
from integration.test_check import run_check
from mcp import StdioServerParameters

from compat.catalog import Server
from compat.clients import seen_directly, seen_through_bridge
from compat.compare import Seen, differences
from compat.sdk import detect_sdk

SERVER_BOUND_S = 120  # each of the three runs of one server
RAISED = re.compile(r"^[\s|]*(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)\b.*)$", re.MULTILINE)
T = TypeVar("T")


@dataclass
class Row:
    """What docs/compatibility.md says of one server (kept as JSON between runs)."""

    name: str
    spec: str
    ecosystem: str
    transport: str
    sdk: str = ""
    revision: str = ""
    compared: str = ""
    direct: str = ""
    bridged: str = ""
    differences: list[str] = field(default_factory=list)
    check: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def make_scratch(root: Path) -> Path:
    """notes.txt, a.js, repo/ (git, one commit) and data.db (table `items`) in a new `root`."""
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("hello from the compatibility list\n", "utf-8")
    (root / "a.js").write_text("const answer = 42;\nexport default answer;\n", "utf-8")
    repo = root / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("compat\n", "utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=compat", "-c", "user.email=compat@localhost"]
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-qm", "one"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    with contextlib.closing(sqlite3.connect(root / "data.db")) as db:
        db.execute("CREATE TABLE items (name TEXT)")
        db.executemany("INSERT INTO items VALUES (?)", [("alpha",), ("bravo",)])
        db.commit()
    return root


def _expand(text: str, server: Server, scratch: Path, port: int) -> str:
    return text.format(port=port, scratch=scratch, bin=server.bin_dir)


@dataclass(frozen=True)
class Target:
    """How the clients reach one server process: the probe client's flags, `check`'s and the
    bridge's upstream (a URL, or the stdio command)."""

    probe: list[str]
    url: str | None
    command: str | None

    @property
    def check_args(self) -> list[str]:
        if self.url is not None:
            return ["--upstream", self.url]
        return ["--upstream-command", self.command or ""]


@contextlib.asynccontextmanager
async def serving(server: Server, scratch: Path, peers: Peers) -> AsyncIterator[Target]:
    """A fresh server process over HTTP (stopped after), or the stdio command each client
    launches itself."""
    port = free_port() if server.transport != "stdio" else 0
    argv = [str(server.bin_dir / server.bin)]
    argv += [_expand(arg, server, scratch, port) for arg in server.args]
    env = {key: _expand(value, server, scratch, port) for key, value in server.env.items()}
    if server.transport == "stdio":
        command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *argv])
        yield Target(["--command", command], None, command)
        return
    process = await asyncio.to_thread(peers.start, server.name, argv, port, env)
    url = f"http://127.0.0.1:{port}{server.url_path}"
    try:
        yield Target(["--sse" if server.transport == "sse" else "--url", url], url, None)
    finally:
        await asyncio.to_thread(process.stop)


async def bounded(step: Awaitable[T]) -> T:
    async with asyncio.timeout(SERVER_BOUND_S):
        return await step


def failure(error: BaseException) -> str:
    """A one-line reason for a failed run."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return f"no answer within {SERVER_BOUND_S} s"
    if isinstance(error, AssertionError):  # the probe client printed nothing: its last error
        raised = RAISED.findall(str(error))
        return raised[-1][:300] if raised else "the legacy client printed nothing"
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text[:300]}"


async def _direct(server: Server, scratch: Path, peers: Peers) -> tuple[Seen | None, str, str]:
    """The legacy client directly: its view, the revision it negotiated, and its verdict."""
    try:
        async with serving(server, scratch, peers) as target:
            seen, report = await bounded(
                seen_directly(target.probe, server.capabilities, server.call, server.push)
            )
    except Exception as error:  # every failure is the row's finding
        return None, "", f"fails: {failure(error)}"
    return seen, str(report.get("protocolVersion", "")), "works"


async def _check(server: Server, scratch: Path, peers: Peers) -> tuple[str, str]:
    """`mrtr-bridge check`: what it repaired or left out, and the era and revision it found."""
    try:
        async with serving(server, scratch, peers) as target:
            status, report = await bounded(asyncio.to_thread(run_check, *target.check_args))
    except Exception as error:
        return f"check failed: {failure(error)}", ""
    found = [line for line in report.get("bridges") or [] if line.startswith("repaired")]
    found += [
        f"{tool['name']}: {tool.get('reason', 'not bridged')}"
        for tool in report.get("tools") or []
        if not tool.get("bridged", True)
    ]
    if status != 0:
        found.insert(0, f"exit {status}: {'; '.join(report.get('problems') or [])[:200]}")
    era = f"{report.get('protocolVersion') or '?'} ({report.get('era') or '?'})"
    return "; ".join(found) or "none", era


async def _bridged(server: Server, scratch: Path, peers: Peers) -> Seen | str:
    """The modern client through `mrtr-bridge serve`: its view, or why it failed."""
    try:
        async with serving(server, scratch, peers) as target:
            upstream = {"command": target.command} if target.command else {}
            bridge = await asyncio.to_thread(
                peers.bridge, target.url, env=bridge_env({"upstream": upstream})
            )
            seen = await bounded(
                seen_through_bridge(bridge.url, server.capabilities, server.call, server.push)
            )
            await asyncio.to_thread(bridge.stop)
    except Exception as error:
        return f"fails: {failure(error)}"
    return seen


async def _bridged_stdio(server: Server, scratch: Path, peers: Peers) -> Seen | str:
    """The modern client launching `mrtr-bridge stdio --upstream-command` (a stdio server), as a
    desktop client does: its view, or why it failed."""
    try:
        async with serving(server, scratch, peers) as target:
            argv = ["stdio", "--upstream-command", target.command or ""]
            quiet = {"MRTR_BRIDGE_LOG_LEVEL": "warning"}  # its log goes to this process's stderr
            bridge = StdioServerParameters(
                command=str(BRIDGE_EXE), args=argv, cwd=REPO_ROOT, env=quiet
            )
            return await bounded(
                seen_through_bridge(bridge, server.capabilities, server.call, server.push)
            )
    except Exception as error:
        return f"fails: {failure(error)}"


def compared(seen: Seen, server: Server) -> str:
    """What the row compares: each list's length, the safe call, the push and what it asked."""
    parts = [
        f"{name} {len(items)}" if isinstance(items, list) else f"{name} (error)"
        for name, items in seen.lists.items()
    ]
    if server.call is not None:
        parts.append(f"call `{server.call.tool}`")
    if server.push is not None:
        asked = ", ".join(sorted(set(seen.asked))) or "nothing asked"
        parts.append(f"push `{server.push.tool}` ({asked})")
    return ", ".join(parts)


def verdict(direct: Seen | None, bridged: Seen | str) -> tuple[str, list[str]]:
    """One front's verdict against the direct run: same, differs (each difference), fails."""
    if isinstance(bridged, str):
        return (bridged if direct is not None else f"{bridged} (as directly)"), []
    if direct is None:
        return "differs: works through the bridge, fails directly", []
    found = differences(direct, bridged)
    return ("differs: " + "; ".join(found) if found else "same"), found


def verdicts(row: Row, direct: Seen | None, fronts: dict[str, Seen | str]) -> None:
    """The row's bridged verdict: one when every front agrees, else each front's."""
    each = {front: verdict(direct, seen) for front, seen in fronts.items()}
    row.differences = [f"{front}: {d}" for front, (_, found) in each.items() for d in found]
    texts = {text for text, _ in each.values()}
    if len(texts) == 1:
        row.bridged = texts.pop()
        return
    worst = "fails" if any(t.startswith("fails") for t in texts) else "differs"
    row.bridged = f"{worst}: " + "; ".join(f"{front}: {text}" for front, (text, _) in each.items())


async def run_server(server: Server) -> Row:
    """The row of one server: direct, check and bridged runs, one after another. A server whose
    answer names today's date (the time servers) differs when midnight (UTC) falls between its
    direct and bridged runs: such a row is run once more."""
    day = today()
    row = await _run_once(server)
    if row.bridged != "same" and today() != day:
        row = await _run_once(server)
    return row


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


async def _run_once(server: Server) -> Row:
    began = time.monotonic()
    row = Row(server.name, server.spec, server.ecosystem, server.transport, detect_sdk(server))
    with tempfile.TemporaryDirectory(prefix="mrtr-compat-") as tmp:
        scratch = make_scratch(Path(tmp) / "scratch")
        peers = Peers(log_dir=Path(tmp))
        try:
            direct, row.revision, row.direct = await _direct(server, scratch, peers)
            row.check, era = await _check(server, scratch, peers)
            fronts = {"serve": await _bridged(server, scratch, peers)}
            if server.transport == "stdio":
                fronts["stdio"] = await _bridged_stdio(server, scratch, peers)
        finally:
            await asyncio.to_thread(peers.close)
    if era and not era.startswith(f"{row.revision} ") and row.revision:
        row.revision += f"; check: {era}"
    elif era:
        row.revision = era
    row.compared = compared(direct, server) if direct is not None else ""
    row.compared += "; through " + " and ".join(f"`mrtr-bridge {front}`" for front in fronts)
    verdicts(row, direct, fronts)
    if server.known is not None and row.bridged != "same":
        row.bridged += f" (known: {server.known})"
    row.seconds = round(time.monotonic() - began, 1)
    return row
