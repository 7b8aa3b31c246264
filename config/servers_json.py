"""The `mcpServers` JSON desktop clients keep, read as named upstreams (`--servers-json FILE`;
docs/several-servers.md).

Claude Desktop and Cursor keep `{"mcpServers": {NAME: ENTRY}}`, VS Code `{"servers": {NAME:
ENTRY}}`; Envoy AI Gateway's `--mcp-json` reads the same. An entry runs a program (`command`,
`args`, `env`, `cwd`) or names a remote server (`url`, `headers`), with `type` where given
(`stdio`, `http` / `streamable-http`, `sse`). Each entry becomes the table of one named upstream,
as `[upstreams.NAME]` in a settings file would be; an entry with `"disabled": true` is skipped; a
key the bridge does not use (`autoApprove`, `alwaysAllow`, `timeout`...) is named in one warning,
not an error. A name that is not a valid upstream name (lower-case letters, digits, `-`, `_`) is
made one (`My Server` -> `my-server`) and said so.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from config.settings import MAX_UPSTREAM_NAME, UPSTREAM_NAME

USED_KEYS: Final = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "type", "transportType", "disabled"}
)
_TRANSPORTS: Final = {
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
}
_NOT_A_NAME: Final = re.compile(r"[^a-z0-9_-]+")


class ServersJsonError(ValueError):
    """The file cannot be used; the message names the file and what is wrong."""


@dataclass
class ServersJson:
    """What a file configures: `[upstreams.NAME]` tables, and what to say about it."""

    path: Path
    upstreams: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # disabled entries
    renamed: dict[str, str] = field(default_factory=dict)  # given name -> upstream name
    unused: dict[str, list[str]] = field(default_factory=dict)  # name -> keys not used

    def warnings(self) -> list[str]:
        """One line each: the unused keys, the renamed and the skipped entries."""
        lines = []
        if self.unused:
            listed = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in self.unused.items())
            lines.append(f"keys the bridge does not use, ignored ({listed})")
        if self.renamed:
            listed = ", ".join(f"{given!r} as {name!r}" for given, name in self.renamed.items())
            lines.append(f"entries renamed to valid upstream names ({listed})")
        if self.skipped:
            lines.append(f"disabled entries skipped ({', '.join(self.skipped)})")
        return lines


def read_servers_json(path: Path) -> ServersJson:
    """The named upstreams of an `mcpServers` (or VS Code `servers`) file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ServersJsonError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ServersJsonError(f"{path}: not JSON ({exc})") from None
    servers = _servers_of(document)
    if servers is None:
        raise ServersJsonError(f'{path}: no "mcpServers" (or "servers") object of entries')
    found = ServersJson(path)
    for given, entry in servers.items():
        if not isinstance(entry, dict):
            raise ServersJsonError(f"{path}: entry {given!r} is not an object")
        if entry.get("disabled") is True:
            found.skipped.append(given)
            continue
        name = _upstream_name(path, given, found)
        found.upstreams[name] = _table(path, given, entry)
        unused = sorted(key for key in entry if key not in USED_KEYS)
        if unused:
            found.unused[name] = unused
    if not found.upstreams:
        raise ServersJsonError(f"{path}: no enabled server entry")
    return found


def _servers_of(document: Any) -> dict[str, Any] | None:
    if not isinstance(document, dict):
        return None
    servers = document.get("mcpServers", document.get("servers"))
    return servers if isinstance(servers, dict) else None


def _upstream_name(path: Path, given: str, found: ServersJson) -> str:
    name = given
    if not UPSTREAM_NAME.fullmatch(given) or len(given) > MAX_UPSTREAM_NAME:
        name = _NOT_A_NAME.sub("-", given.lower()).strip("-_")[:MAX_UPSTREAM_NAME]
        if not name:
            raise ServersJsonError(f"{path}: entry {given!r} has no usable name")
        found.renamed[given] = name
    if name in found.upstreams:
        raise ServersJsonError(f"{path}: two entries are named {name!r}")
    return name


def _table(path: Path, given: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The `[upstreams.NAME]` table of one entry."""
    kind = entry.get("type", entry.get("transportType"))
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ServersJsonError(f"{path}: entry {given!r} needs a command or a url (one of them)")
    if url is not None:
        if not isinstance(url, str):
            raise ServersJsonError(f"{path}: entry {given!r}: url must be a string")
        table: dict[str, Any] = {"url": url}
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict):
            raise ServersJsonError(f"{path}: entry {given!r}: headers must be an object")
        for header, value in headers.items():
            if str(header).lower() == "authorization":
                table["authorization"] = str(value)  # a secret setting, never shown
            else:
                table.setdefault("headers", {})[str(header)] = str(value)
        if kind in _TRANSPORTS:
            table["transport"] = _TRANSPORTS[kind]
        return table
    args = entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        raise ServersJsonError(f"{path}: entry {given!r}: command must be a string, args a list")
    table = {"command": shlex.join([command, *(str(arg) for arg in args)])}
    env = entry.get("env") or {}
    if not isinstance(env, dict):
        raise ServersJsonError(f"{path}: entry {given!r}: env must be an object")
    if env:
        table["env"] = {str(key): str(value) for key, value in env.items()}
    if isinstance(entry.get("cwd"), str):
        table["cwd"] = entry["cwd"]
    return table


__all__ = ["USED_KEYS", "ServersJson", "ServersJsonError", "read_servers_json"]
