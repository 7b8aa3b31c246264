"""`mrtr-bridge install claude-desktop|cursor|vscode`: one entry in a desktop client's MCP config
file that starts this `mrtr-bridge` over stdio in front of an upstream (docs/operations.md,
"Desktop clients").

The entry's `command` is the absolute path of the `mrtr-bridge` being run (the script beside this
interpreter, as `fastmcp install` does; `python -m proxy` where there is none), its `args`
`["stdio", "--upstream", URL]` or `["stdio", "--upstream-command", CMD, "--upstream-cwd", DIR]`
(DIR: where `install` ran, since the client starts it from a folder of its own). The upstream is
checked as `serve` checks it (`config.load_settings` with the flag's name; a command's program must
be found).
The file is merged, not rewritten: the other servers and every key the bridge does not know stay
as they were, in their order; an entry of the same name is replaced. It is written to a temporary
file beside it and renamed over it (a reader never sees half a file), with the previous version
kept as `<file>.bak`. A file that is not a JSON object is left alone (one line says why).

Formats followed (docs/operations.md names the versions): Claude Desktop's and Cursor's
`{"mcpServers": {NAME: {"command", "args"}}}`, VS Code's `{"servers": {NAME: {"type": "stdio",
"command", "args"}}, "inputs": [...]}`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from config import ConfigError, load_settings
from proxy.app.cli_hints import fail, upstream_problem

EXIT_OK: Final = 0
NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Client:
    """A desktop client: its name, the key its servers are under, and what an entry adds."""

    title: str
    servers_key: str
    extra: Mapping[str, str]  # fields every entry of this client carries (VS Code: type)


CLIENTS: Final = {
    "claude-desktop": Client("Claude Desktop", "mcpServers", {}),
    "cursor": Client("Cursor", "mcpServers", {}),
    "vscode": Client("VS Code", "servers", {"type": "stdio"}),
}


def _app_data(env: Mapping[str, str], home: Path) -> Path:
    """Where desktop apps keep their settings: %APPDATA%, ~/Library/Application Support, or
    $XDG_CONFIG_HOME (~/.config)."""
    if sys.platform == "win32":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config")


def default_path(client: str, env: Mapping[str, str], home: Path) -> Path:
    """The client's user-wide config file on this platform."""
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return _app_data(env, home) / "Code" / "User" / "mcp.json"
    return _app_data(env, home) / "Claude" / "claude_desktop_config.json"


def bridge_command() -> list[str]:
    """The absolute command line of this `mrtr-bridge`."""
    here = Path(sys.executable).parent  # not resolved: a virtualenv's python is a symlink
    for name in ("mrtr-bridge", "mrtr-bridge.exe"):
        if (here / name).is_file():
            return [str((here / name).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "proxy"]


def entry(client: Client, upstream: list[str], config: Path | None) -> dict[str, Any]:
    """The server entry: this `mrtr-bridge stdio` in front of `upstream` (its flag and value)."""
    command, *prefix = bridge_command()
    extra = ["--config", str(config.absolute())] if config is not None else []
    return {**client.extra, "command": command, "args": [*prefix, "stdio", *upstream, *extra]}


def _checked_upstream(args: argparse.Namespace) -> list[str]:
    """`--upstream URL` or `--upstream-command CMD` as the entry passes it, checked as `serve`
    checks it (one line and exit 2 otherwise)."""
    if (args.upstream is None) == (args.upstream_command is None):
        fail("give exactly one of --upstream URL or --upstream-command CMD")
    flag, dotted = (
        ("--upstream", "upstream.url")
        if args.upstream is not None
        else ("--upstream-command", "upstream.command")
    )
    value = args.upstream if args.upstream is not None else args.upstream_command
    try:
        settings = load_settings(None, {}, {dotted: value}, {dotted: flag})
    except ConfigError as exc:
        fail(str(exc))
    problem = upstream_problem(settings.upstream, required=True, check_program=True)
    if problem is not None:
        fail(problem)
    if args.upstream_command is None:
        return [flag, value]
    # the client starts it from a folder of its own: from this one, where it was just found
    return [flag, value, "--upstream-cwd", str(Path.cwd())]


def _read(path: Path, client: Client) -> dict[str, Any]:
    """The file's JSON object ({} for a file that does not exist yet); one line and exit 1 for
    one the bridge would not merge into."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", 1)
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        fail(f"{path} is not valid JSON ({exc}); it was not changed", 1)
    servers = data.get(client.servers_key, {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        what = "a JSON object" if not isinstance(data, dict) else f'"{client.servers_key}"'
        fail(f"{path}: {what} is not an object as {client.title} writes it; it was not changed", 1)
    return data  # type: ignore[no-any-return]


def _write(path: Path, data: dict[str, Any]) -> Path | None:
    """Write `data` to a temporary file beside `path` and rename it over `path`; the previous
    version is kept as `<path>.bak` (returned; None when there was none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = path.with_name(path.name + ".bak") if path.exists() else None
    if backup is not None:
        shutil.copy2(path, backup)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        if backup is not None:
            shutil.copymode(backup, temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return backup


def _target(args: argparse.Namespace, env: Mapping[str, str]) -> Path:
    """The file to change: `--config-path`, else the client's own, whose folder must exist (the
    client was installed and started once)."""
    if args.config_path is not None:
        return Path(args.config_path).absolute()
    path = default_path(args.client, env, Path.home())
    if not path.parent.is_dir():
        fail(
            f"{path.parent} does not exist: is {CLIENTS[args.client].title} installed and was it "
            "started once? Give the file with --config-path FILE",
            1,
        )
    return path


def run_install(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`mrtr-bridge install CLIENT --name NAME (--upstream URL | --upstream-command CMD)`."""
    client = CLIENTS[args.client]
    if not NAME.fullmatch(args.name):
        fail(
            f"--name {args.name!r}: 1-64 letters, digits, '.', '-' or '_' (a letter or digit first)"
        )
    upstream = _checked_upstream(args)
    path = _target(args, env)
    data = _read(path, client)
    servers = data.setdefault(client.servers_key, {})
    replaced = args.name in servers
    servers[args.name] = entry(client, upstream, args.bridge_config)
    backup = _write(path, data)
    kept = f" (previous version: {backup})" if backup is not None else ""
    verb = "replaced" if replaced else "added"
    out.write(f"{verb} {args.name!r} in {path}{kept}; restart {client.title} to use it\n")
    return EXIT_OK


__all__ = ["CLIENTS", "bridge_command", "default_path", "entry", "run_install"]
