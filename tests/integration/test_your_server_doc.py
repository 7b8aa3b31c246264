"""docs/your-server.md, run as written: its Python block is saved as `my_server.py` and its shell
blocks run verbatim, in order, in one bash (from a folder holding `.venv` and `.venv-legacy`, as
the checkout does), so the walk-through and this test cannot drift apart. The desktop client
entries of the README and docs/desktop-clients.md are checked too: valid JSON whose arguments the
bridge's own parser accepts. The README's Python example runs verbatim against the demo server
behind the bridge, as after `make run` (test_readme_example.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from config import ENV_PREFIX
from proxy.app.cli_args import build_parser

from .harness import REPO_ROOT

DOC = REPO_ROOT / "docs" / "your-server.md"
README = REPO_ROOT / "README.md"
DESKTOP = REPO_ROOT / "docs" / "desktop-clients.md"
MARK = "=== next block ==="
TIMEOUT_S = 240


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"(?ms)^```{language}\n(.*?)^```$", text)


def test_the_walk_through_runs_verbatim(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    (server,) = blocks(text, "python")
    shell = blocks(text, "sh")
    assert len(shell) == 3
    (tmp_path / "my_server.py").write_text(server)
    for venv in (".venv", ".venv-legacy"):
        (tmp_path / venv).symlink_to(REPO_ROOT / venv)
    separator = f"echo; echo {MARK!r}\n"  # curl's answer ends without a newline
    done = subprocess.run(
        ["bash", "-c", separator.join(shell)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)},
        check=False,
    )
    check_stdio, served_stdio, over_http = done.stdout.split(MARK + "\n")
    assert "era:        legacy" in check_stdio, done.stdout + done.stderr
    assert check_stdio.endswith("bridgeable: yes\n\n")
    assert "tool greet: bridged" in check_stdio and "tool add: bridged" in check_stdio
    reply = json.loads(served_stdio)
    assert reply["id"] == 1
    assert reply["result"]["content"] == [{"type": "text", "text": "5"}]
    lines = over_http.splitlines()  # the server's own access log goes to stdout too
    assert "transport:  streamable-http" in lines and "bridgeable: yes" in lines
    (answer,) = [line for line in lines if line.startswith('{"jsonrpc"')]
    asked = json.JSONDecoder().raw_decode(answer)[0]["result"]  # its log may follow on the line
    assert asked["resultType"] == "input_required"
    (request,) = asked["inputRequests"].values()
    assert (request["method"], request["params"]["message"]) == (
        "elicitation/create",
        "What is your name?",
    )
    assert asked["requestState"].startswith("v1.")


def desktop_entries(path: Path) -> list[dict[str, Any]]:
    entries = [json.loads(block) for block in blocks(path.read_text(encoding="utf-8"), "json")]
    return [entry for entry in entries if "mcpServers" in entry or "servers" in entry]


def test_desktop_client_entries_are_valid_and_parse_as_bridge_arguments() -> None:
    (readme,) = desktop_entries(README)
    desktop = desktop_entries(DESKTOP)
    assert len(desktop) == 4 and readme in desktop
    parser = build_parser()
    for entry in desktop:
        (server,) = (entry.get("mcpServers") or entry["servers"]).values()
        args = server["args"]
        if server["command"] == "uvx":
            assert args[:3] == ["--from", "/home/you/src/mrtr-bridge", "mrtr-bridge"]
            args = args[3:]
        else:
            assert Path(server["command"]).is_absolute()
        parsed = parser.parse_args(args)
        assert parsed.command == "stdio"
        assert (parsed.upstream is None) != (parsed.upstream_command is None)
    (vscode,) = [entry for entry in desktop if "servers" in entry]
    assert vscode["servers"]["my-server"]["type"] == "stdio"
