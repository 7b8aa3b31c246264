"""`mrtr-bridge install claude-desktop|cursor|vscode`, the real command on temporary files: one
entry merged (the other servers and unknown keys kept, in order; the previous file kept as .bak;
an entry of the same name replaced), at the client's own location by default, refused in one line
when the file is not JSON or the upstream would not start; and the entry, run as the client runs
it, answers a modern `tools/list` through a real legacy stdio server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from config import ENV_PREFIX
from translators.protocol.eras import TOOLS_LIST

from .harness import BRIDGE_EXE, legacy_stdio_command
from .streams_helpers import request

TIMEOUT_S = 60
URL = "http://127.0.0.1:8931/mcp"
OTHERS = {
    "claude-desktop": {
        "mcpServers": {"files": {"command": "npx", "args": ["-y", "server-files"]}},
        "globalShortcut": "Ctrl+Space",
    },
    "cursor": {"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp"}}, "extra": [1]},
    "vscode": {
        "inputs": [{"type": "promptString", "id": "key", "description": "Key", "password": True}],
        "servers": {"memory": {"type": "stdio", "command": "npx", "args": ["-y", "memory"]}},
    },
}
SERVERS_KEY = {"claude-desktop": "mcpServers", "cursor": "mcpServers", "vscode": "servers"}


def install(*args: str, home: Path | None = None, cwd: Path | None = None) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    if home is not None:
        env = {**{k: v for k, v in env.items() if k != "XDG_CONFIG_HOME"}, "HOME": str(home)}
    return subprocess.run(
        [str(BRIDGE_EXE), "install", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.parametrize("client", list(OTHERS))
def test_one_entry_is_merged_and_everything_else_kept(client: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    before = json.dumps(OTHERS[client], indent=4)
    path.write_text(before, encoding="utf-8")
    path.chmod(0o600)
    done = install(client, "--name", "legacy-demo", "--upstream", URL, "--config-path", str(path))
    assert (done.returncode, done.stderr) == (0, "")
    title = {"claude-desktop": "Claude Desktop", "cursor": "Cursor", "vscode": "VS Code"}[client]
    assert done.stdout == (
        f"added 'legacy-demo' in {path} (previous version: {path}.bak); restart {title} to use it\n"
    )
    written = json.loads(path.read_text(encoding="utf-8"))
    key = SERVERS_KEY[client]
    expected_entry = {"command": str(BRIDGE_EXE), "args": ["stdio", "--upstream", URL]}
    if client == "vscode":
        expected_entry = {"type": "stdio", **expected_entry}
    expected = json.loads(before)
    expected[key]["legacy-demo"] = expected_entry
    assert written == expected
    assert list(written) == list(expected) and list(written[key]) == list(expected[key])
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert (tmp_path / "config.json.bak").read_text(encoding="utf-8") == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "config.json.bak"]


def test_the_same_name_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    assert install("cursor", "--name", "x", "--upstream", URL, "--config-path", str(path)).stdout
    other = "http://127.0.0.1:9000/mcp"
    done = install("cursor", "--name", "x", "--upstream", other, "--config-path", str(path))
    assert done.stdout.startswith(f"replaced 'x' in {path} (previous version: {path}.bak)")
    servers = json.loads(path.read_text(encoding="utf-8"))["mcpServers"]
    assert servers == {"x": {"command": str(BRIDGE_EXE), "args": ["stdio", "--upstream", other]}}


@pytest.mark.parametrize(
    ("client", "folder", "name"),
    [
        ("claude-desktop", ".config/Claude", "claude_desktop_config.json"),
        ("cursor", ".cursor", "mcp.json"),
        ("vscode", ".config/Code/User", "mcp.json"),
    ],
)
def test_the_clients_own_file_by_default(
    client: str, folder: str, name: str, tmp_path: Path
) -> None:
    """Linux locations (HOME is a temporary folder): created when the folder exists, refused in
    one line when the client was never started."""
    missing = install(client, "--name", "demo", "--upstream", URL, home=tmp_path)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.startswith(f"mrtr-bridge: error: {tmp_path / folder} does not exist")
    (tmp_path / folder).mkdir(parents=True)
    done = install(client, "--name", "demo", "--upstream", URL, home=tmp_path)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / folder / name).read_text(encoding="utf-8"))
    assert written[SERVERS_KEY[client]]["demo"]["args"] == ["stdio", "--upstream", URL]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"mcpServers": {}, // a comment\n}', "is not valid JSON"),
        ("[1, 2]", "a JSON object is not an object as Cursor writes it"),
        ('{"mcpServers": []}', '"mcpServers" is not an object as Cursor writes it'),
    ],
)
def test_a_file_it_cannot_merge_into_is_left_alone(text: str, why: str, tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8")
    done = install("cursor", "--name", "demo", "--upstream", URL, "--config-path", str(path))
    assert (done.returncode, done.stdout) == (1, "")
    assert why in done.stderr and len(done.stderr.splitlines()) == 1
    assert path.read_text(encoding="utf-8") == text
    assert not (tmp_path / "mcp.json.bak").exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--upstream", "127.0.0.1:8931/mcp"], "invalid setting upstream.url (from command line "),
        (["--upstream", URL, "--upstream-command", "x"], "give exactly one of --upstream URL"),
        ([], "give exactly one of --upstream URL"),
        (["--upstream-command", "/nonexistent/server"], "Cannot start legacy stdio server"),
    ],
)
def test_an_upstream_that_would_not_start_is_refused(
    args: list[str], line: str, tmp_path: Path
) -> None:
    path = tmp_path / "mcp.json"
    done = install("cursor", "--name", "demo", *args, "--config-path", str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("mrtr-bridge: error: " + line), done.stderr
    assert not path.exists()


def test_a_name_that_is_no_name_is_refused(tmp_path: Path) -> None:
    done = install("cursor", "--name", "my server!", "--upstream", URL, "--config-path", "x")
    assert done.returncode == 2
    assert done.stderr == (
        "mrtr-bridge: error: --name 'my server!': 1-64 letters, digits, '.', '-' or '_' (a letter "
        "or digit first)\n"
    )


def test_the_installed_entry_runs_as_the_client_runs_it(tmp_path: Path) -> None:
    """The entry's command and args, started from another folder as a client would, answer a
    modern `tools/list` through the legacy stdio fixture server."""
    path = tmp_path / "claude_desktop_config.json"
    command = legacy_stdio_command()
    done = install(
        "claude-desktop", "--name", "fixture", "--upstream-command", command,
        "--config-path", str(path), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    server = json.loads(path.read_text(encoding="utf-8"))["mcpServers"]["fixture"]
    assert server["args"] == [
        "stdio",
        "--upstream-command",
        command,
        "--upstream-cwd",
        str(tmp_path),
    ]
    line = json.dumps(request(1, TOOLS_LIST, {})) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    ran = subprocess.run(
        [server["command"], *server["args"]],
        input=line,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd="/",
        env=env,
        check=False,
    )
    answer = json.loads(ran.stdout.splitlines()[0])
    assert answer["id"] == 1
    assert "test_elicitation" in {tool["name"] for tool in answer["result"]["tools"]}
