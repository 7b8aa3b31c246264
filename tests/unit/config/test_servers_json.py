"""A desktop client's `mcpServers` file read as named upstreams (config/servers_json.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config.servers_json import ServersJsonError, read_servers_json


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_each_entry_becomes_the_table_of_a_named_upstream(tmp_path: Path) -> None:
    """Claude Desktop's and Cursor's format: commands with args, env and cwd; remote urls with
    headers (Authorization as the secret setting) and type."""
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/my dir"],
                    "env": {"LOG": "debug"},
                    "cwd": "/srv",
                },
                "remote": {
                    "url": "http://127.0.0.1:8931/sse",
                    "type": "sse",
                    "headers": {"Authorization": "Bearer s3cret", "X-Api-Key": "k"},
                },
            }
        },
    )
    found = read_servers_json(path)
    assert found.upstreams == {
        "files": {
            "command": "npx -y @modelcontextprotocol/server-filesystem '/tmp/my dir'",
            "env": {"LOG": "debug"},
            "cwd": "/srv",
        },
        "remote": {
            "url": "http://127.0.0.1:8931/sse",
            "authorization": "Bearer s3cret",
            "headers": {"X-Api-Key": "k"},
            "transport": "sse",
        },
    }
    assert found.warnings() == []


def test_vs_code_servers_disabled_entries_unknown_keys_and_names(tmp_path: Path) -> None:
    """VS Code's `servers` with `type`; a disabled entry is skipped; keys the bridge does not use
    and names made valid are said in one line each."""
    path = write(
        tmp_path,
        {
            "servers": {
                "My Server": {"type": "stdio", "command": "node", "args": ["s.js"]},
                "web": {"type": "http", "url": "https://mcp.example.com/mcp", "timeout": 30},
                "old": {"command": "python", "disabled": True},
                "github": {"command": "gh-mcp", "autoApprove": ["list"], "alwaysAllow": []},
            }
        },
    )
    found = read_servers_json(path)
    assert set(found.upstreams) == {"my-server", "web", "github"}
    assert found.upstreams["web"] == {
        "url": "https://mcp.example.com/mcp",
        "transport": "streamable-http",
    }
    assert found.warnings() == [
        "keys the bridge does not use, ignored (web: timeout; github: alwaysAllow, autoApprove)",
        "entries renamed to valid upstream names ('My Server' as 'my-server')",
        "disabled entries skipped (old)",
    ]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"mcpServers": []}, 'no "mcpServers" (or "servers") object of entries'),
        ({"other": {}}, 'no "mcpServers" (or "servers") object of entries'),
        ({"mcpServers": {"a": {"command": "x", "disabled": True}}}, "no enabled server entry"),
        ({"mcpServers": {"a": "npx"}}, "entry 'a' is not an object"),
        ({"mcpServers": {"a": {}}}, "entry 'a' needs a command or a url (one of them)"),
        (
            {"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}},
            "entry 'a' needs a command or a url (one of them)",
        ),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "args a list"),
        ({"mcpServers": {"A": {"command": "x"}, "a": {"command": "y"}}}, "two entries"),
        ({"mcpServers": {"!!": {"command": "x"}}}, "entry '!!' has no usable name"),
    ],
)
def test_a_file_that_cannot_be_used_is_one_line_naming_it(
    tmp_path: Path, document: Any, problem: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ServersJsonError) as raised:
        read_servers_json(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert problem in str(raised.value)


def test_not_json_and_missing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(ServersJsonError, match="not JSON"):
        read_servers_json(broken)
    with pytest.raises(ServersJsonError, match="cannot read it"):
        read_servers_json(tmp_path / "missing.json")
