#!/usr/bin/env python3
"""Fake legacy (2025-11-25) stdio MCP servers that misbehave on purpose, for the stdio upstream
tests.

Standard library only, so any Python runs it. Every mode answers `initialize` (except `silent`
and `exit`) and serves one tool set:

* `tools/list` lists `echo` (a client validating results asks)
* `echo` -> text content "echo:<text>"          * `slow` -> never answers (until cancelled or
  killed)
* a `notifications/cancelled` is acknowledged with a `notifications/message` log "cancelled
  <requestId>"
* `ask`  -> sends a `roots/list` push and a `ping`, answers with the number of roots it got back
* `batch` -> sends a log notification and its answer as one JSON-RPC batch line (2025-03-26)
* `big`  -> answers with a line of `--big-bytes` bytes  * `bigpush` -> sends an oversized push,
  answers with the error code the client gave it

Modes (`--mode`):
  normal   well-behaved garbage  writes garbage lines (not JSON, JSON arrays, JSON-RPC with a wrong
  version) before every reply silent   never answers anything; ignores stdin EOF and SIGTERM (only
  SIGKILL stops it) stunned  well-behaved until a `server/discover` arrives: that gets no answer,
  nor does anything after it crash    exits with code 3 as soon as a tools/call arrives (after a
  partial line on stdout) exit     prints "fatal: bad configuration" to stderr and exits with code 2
  at once flood    writes `--flood-lines` lines to stderr before serving

Shutdown behaviour (any mode):
  --on-eof linger     keep running after stdin EOF (like servers that never read their stdin's end)
  --ignore-sigterm    ignore SIGTERM (only SIGKILL stops it)
  --grandchild        start a child of its own (same process group, none of its parent's pipes) that
                      ignores stdin EOF and SIGTERM
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
GRANDCHILD = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: "
    "time.sleep(3600)"
)
GARBAGE = [
    b"this is not json",
    b"[1, 2, 3]",
    b'{"jsonrpc": "1.0", "id": 99, "result": {}}',
    b'{"truncated": ',
]


class Peer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stdin = sys.stdin.buffer
        self.stdout = sys.stdout.buffer
        self.next_push_id = 0
        self.stunned = False

    def write(self, message: dict[str, Any]) -> None:
        if self.args.mode == "garbage":
            for line in GARBAGE:
                self.stdout.write(line + b"\n")
        self.stdout.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.stdout.flush()

    def read(self) -> dict[str, Any] | None:
        while True:
            line = self.stdin.readline()
            if not line:
                return None
            if line.strip():
                message: dict[str, Any] = json.loads(line)
                return message

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a push and wait for its response (other messages meanwhile are ignored)."""
        self.next_push_id += 1
        push_id = self.next_push_id
        self.write({"jsonrpc": "2.0", "id": push_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message is None:
                sys.exit(0)
            if message.get("id") == push_id and "method" not in message:
                return message

    def log(self, text: str) -> None:
        self.write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": text},
            }
        )

    def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def serve(self) -> None:
        while (message := self.read()) is not None:
            if message.get("method") == "notifications/cancelled":
                self.log(f"cancelled {message['params']['requestId']}")
            if "method" not in message or "id" not in message:
                continue  # notifications and stray responses
            if self.args.mode == "silent" or (self.args.mode == "stunned" and self.stunned):
                continue
            if self.args.mode == "stunned" and message["method"] == "server/discover":
                self.stunned = True  # like FastMCP on mcp 1.8: no answer, and deaf from now on
                continue
            if message["method"] == "initialize":
                self.reply(
                    message["id"],
                    {
                        "protocolVersion": self.args.protocol_version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": f"misbehaving-{self.args.mode}", "version": "0"},
                    },
                )
            elif message["method"] == "tools/call":
                self.call(message["id"], message["params"])
            elif message["method"] == "tools/list":
                self.reply(
                    message["id"], {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
                )
            else:
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "nope"},
                    }
                )

    def call(self, request_id: Any, params: dict[str, Any]) -> None:
        if self.args.mode == "crash":
            self.stdout.write(b'{"jsonrpc":"2.0","id":')
            self.stdout.flush()
            os._exit(3)
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "slow":
            return
        if name == "ask":
            roots = self.ask("roots/list", {}).get("result", {}).get("roots", [])
            self.ask("ping", {})
            self.reply(request_id, _text(f"roots:{len(roots)}"))
        elif name == "batch":  # a 2025-03-26 batch: a log and the answer on one line
            log = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "batched"},
            }
            answer = {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": _text(f"batch:{arguments.get('text', '')}"),
            }
            self.stdout.write(json.dumps([log, answer]).encode() + b"\n")
            self.stdout.flush()
        elif name == "big":
            self.reply(request_id, _text("x" * self.args.big_bytes))
        elif name == "bigpush":
            answer = self.ask(
                "elicitation/create", {"message": "y" * self.args.big_bytes, "requestedSchema": {}}
            )
            self.reply(request_id, _text(f"refused:{answer.get('error', {}).get('code')}"))
        else:
            self.reply(request_id, _text(f"echo:{arguments.get('text', '')}"))


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def main() -> int:
    parser = argparse.ArgumentParser(description="misbehaving legacy stdio MCP server")
    parser.add_argument(
        "--mode",
        choices=["normal", "garbage", "silent", "stunned", "crash", "exit", "flood"],
        default="normal",
    )
    parser.add_argument(
        "--protocol-version", default=PROTOCOL_VERSION, help="answered to initialize"
    )
    parser.add_argument("--big-bytes", type=int, default=200_000)
    parser.add_argument("--flood-lines", type=int, default=5000)
    parser.add_argument("--on-eof", choices=["exit", "linger"], default="exit")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--grandchild", action="store_true")
    args = parser.parse_args()
    if args.mode == "exit":
        sys.stderr.write("fatal: bad configuration\n")
        return 2
    if args.mode == "silent" or args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.grandchild:
        subprocess.Popen(
            [sys.executable, "-c", GRANDCHILD],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if args.mode == "flood":
        sys.stderr.write("".join(f"noise line {n}\n" for n in range(args.flood_lines)))
        sys.stderr.flush()
    Peer(args).serve()
    if args.mode == "silent" or args.on_eof == "linger":
        while True:  # stdin is closed: keep running until SIGKILL
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
