"""One older legacy server behind the bridge, with every hop recorded: the peers of
`test_revisions.py`.

    modern client ─► front relay ─► mrtr-bridge ─► upstream relay ─► revision_server.py (HTTP,
    HTTP+SSE)
                     (front.jsonl)               └► stdio_tee.py ──► revision_server.py (stdio)
                                                    (upstream.jsonl)

`revision_server.py` runs from `.venv-<revision>` (`make venv` builds one per older revision);
the relays (`recording_relay.py`) and the tee (`stdio_tee.py`) write the records that
`wire_records.py` validates. `slow` tool events go to `journal.jsonl`.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness import PEERS_DIR, REPO_ROOT, PeerProcess, Peers, PeerStartError, bridge_env, free_port
from .wire_records import WireLog, messages, used_sessions

REVISIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
TRANSPORTS = ("streamable-http", "stdio", "sse")
SERVER = PEERS_DIR / "revision_server.py"
RELAY = PEERS_DIR / "recording_relay.py"
TEE = PEERS_DIR / "stdio_tee.py"
JOURNAL_WAIT_S = 20.0


def revision_python(revision: str) -> Path:
    """The interpreter of `.venv-<revision>`, with the `mcp` release that negotiates `revision`."""
    python = REPO_ROOT / f".venv-{revision}" / "bin" / "python"
    if not python.exists():
        raise PeerStartError(
            f"{python} is missing: run `make venv`, which creates .venv-{revision}"
        )
    return python


@dataclass
class RevisionStack:
    """The peers of one (revision, transport) and the records of both recorded hops."""

    revision: str
    transport: str
    peers: Peers
    bridge: PeerProcess
    front: PeerProcess
    upstream_log: WireLog
    front_log: WireLog
    journal: Path

    @property
    def url(self) -> str:
        """The modern endpoint, through the front relay."""
        return self.front.url

    def journal_events(self, tag: str) -> list[str]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text(encoding="utf-8").splitlines()
        return [entry["event"] for entry in map(json.loads, lines) if entry["tag"] == tag]

    async def wait_journal(self, tag: str, event: str) -> None:
        async with asyncio.timeout(JOURNAL_WAIT_S):
            while event not in self.journal_events(tag):
                await asyncio.sleep(0.02)

    def sent_upstream(self, method: str) -> list[dict[str, Any]]:
        """Every message with `method` the bridge sent upstream so far."""
        return [message for _, message in self._sent(method)]

    def used_initializes(self) -> list[dict[str, Any]]:
        """The `initialize` of every upstream session the bridge went on to send a request on."""
        used = used_sessions(self.upstream_log.records())
        return [message for session, message in self._sent("initialize") if session in used]

    def _sent(self, method: str) -> list[tuple[str | None, dict[str, Any]]]:
        return [
            (record["session"], message)
            for record in self.upstream_log.records()
            if record["dir"] == "sent"
            for message in messages(record)
            if message.get("method") == method
        ]


def recording_relay(peers: Peers, name: str, target_port: int, record: Path) -> PeerProcess:
    """`recording_relay.py` on a free port, forwarding to 127.0.0.1:`target_port`, recording into
    `record`."""
    port = free_port()
    argv = [
        sys.executable,
        str(RELAY),
        "--port",
        str(port),
        "--upstream",
        f"http://127.0.0.1:{target_port}",
        "--record",
        str(record),
    ]
    return peers.start(name, argv, port)


def tee_command(record: Path, argv: list[str]) -> str:
    """The command line that runs the stdio server `argv` under `stdio_tee.py`, recording into
    `record`."""
    return shlex.join([sys.executable, str(TEE), "--record", str(record), "--", *argv])


def start_stack(peers: Peers, revision: str, transport: str, directory: Path) -> RevisionStack:
    """Start the server of `revision` over `transport`, the bridge and the relays."""
    python = revision_python(revision)
    upstream_log, front_log, journal = (
        directory / name for name in ("upstream.jsonl", "front.jsonl", "journal.jsonl")
    )
    server_args = [str(SERVER), "--journal", str(journal)]
    if transport == "stdio":
        command = tee_command(upstream_log, [str(python), *server_args, "--transport", "stdio"])
        bridge = peers.bridge(None, env=bridge_env({"upstream": {"command": command}}))
    else:
        port = free_port()
        wire = "sse" if transport == "sse" else "http"
        peers.start(
            f"server-{revision}",
            [str(python), *server_args, "--transport", wire, "--port", str(port)],
            port,
        )
        relay = recording_relay(peers, "relay-upstream", port, upstream_log)
        path, extra = (
            ("/sse", {"upstream": {"transport": "sse"}}) if transport == "sse" else ("/mcp", {})
        )
        bridge = peers.bridge(f"http://127.0.0.1:{relay.port}{path}", env=bridge_env(extra))
    front = recording_relay(peers, "relay-front", bridge.port, front_log)
    return RevisionStack(
        revision,
        transport,
        peers,
        bridge,
        front,
        WireLog(upstream_log),
        WireLog(front_log),
        journal,
    )
