#!/usr/bin/env python3
"""A recording wrapper for a stdio MCP server: runs `COMMAND...`, copies this process's stdin to it
and its stdout to this process's stdout, line by line, and appends every line that passes to
`--record` (JSON lines, the same records as `recording_relay.py`: `dir` is `"sent"` for a line the
client wrote, `"received"` for one the server wrote; `session` is this wrapper's pid, as every stdio
process is one session). Standard library only; the child's stderr is inherited. SIGTERM and SIGINT
are passed on to the child, stdin's end closes the child's stdin, and the wrapper exits with the
child's status.

Usage:
    python tests/peers/stdio_tee.py --record FILE -- python server.py --transport stdio
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

LOCK = threading.Lock()


def record(out: IO[str], direction: str, line: bytes) -> None:
    text = line.decode("utf-8", errors="replace").strip()
    if not text:
        return
    try:
        message: Any = json.loads(text)
    except ValueError:
        message = {"raw": text}
    entry = {
        "dir": direction,
        "xid": None,
        "session": str(os.getpid()),
        "version": None,
        "http": None,
        "path": None,
        "message": message,
    }
    with LOCK:
        out.write(json.dumps(entry) + "\n")
        out.flush()


def pump(source: IO[bytes], sink: IO[bytes], out: IO[str], direction: str) -> None:
    try:
        for line in iter(source.readline, b""):
            record(out, direction, line)
            sink.write(line)
            sink.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    finally:
        try:
            sink.close()
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--record", type=Path, required=True, help="append JSON lines here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the server command after --")
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: child.send_signal(received))
    with args.record.open("a", encoding="utf-8") as out:
        threads = [
            threading.Thread(
                target=pump, args=(sys.stdin.buffer, child.stdin, out, "sent"), daemon=True
            ),
            threading.Thread(
                target=pump, args=(child.stdout, sys.stdout.buffer, out, "received"), daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        status = child.wait()
        threads[1].join(timeout=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
