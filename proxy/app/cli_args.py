"""The `mrtr-bridge` argument parser: subcommands, their flags, and the settings each flag overrides
(every flag is also a config-file key and an environment variable, named in its help)."""

from __future__ import annotations

import argparse
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

from config import CONFIG_ENV, env_name
from config.settings import MAX_UPSTREAM_NAME, UPSTREAM_NAME
from translators.protocol.eras import MODERN_VERSION
from translators.protocol.revisions import SUPPORTED

PROG: Final = "mrtr-bridge"
# Command-line flag -> dotted setting it overrides.
FLAG_SETTINGS: Final[dict[str, str]] = {
    "upstream": "upstream.url",
    "upstream_command": "upstream.command",
    "upstream_cwd": "upstream.cwd",
    "upstream_transport": "upstream.transport",
    "listen": "front.listen",
    "replica_id": "held.replica_id",
    "advertise_url": "cluster.advertise_url",
    "peers": "cluster.peers",
    "peers_dns": "cluster.peers_dns",
    "log_level": "log.level",
    "log_format": "log.format",
    "event_loop": "front.event_loop",
}


def _where(dotted: str) -> str:
    return f"[env {env_name(dotted)}; config {dotted}]"


def _add_upstream_flags(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """The upstream flags; `several`: `--upstream` and `--upstream-command` may repeat, as
    NAME=URL / NAME=CMD (named upstreams, each at /servers/NAME/mcp), and `--servers-json` reads a
    desktop client's mcpServers file."""
    append = "append" if several else "store"
    named = (
        "; repeat it as NAME=URL for several named upstreams, each served at /servers/NAME/mcp"
        if several
        else ""
    )
    parser.add_argument(
        "--upstream",
        metavar="URL",
        action=append,
        help=f"legacy (MCP {', '.join(SUPPORTED)}) HTTP endpoint to front: Streamable HTTP "
        "(e.g. http://127.0.0.1:8931/mcp) or HTTP+SSE (e.g. http://127.0.0.1:8931/sse)"
        + named
        + " "
        + _where("upstream.url"),
    )
    if several:
        parser.add_argument(
            "--servers-json",
            metavar="FILE",
            type=Path,
            help="a desktop client's mcpServers JSON (Claude Desktop, Cursor, VS Code): each "
            "entry is a named upstream (docs/several-servers.md)",
        )
    parser.add_argument(
        "--upstream-transport",
        choices=("auto", "streamable-http", "sse"),
        help="HTTP transport of --upstream: auto (default) tries Streamable HTTP and falls back to "
        "the old HTTP+SSE on a 4xx " + _where("upstream.transport"),
    )
    parser.add_argument(
        "--upstream-command",
        metavar='"CMD ARGS..."',
        action=append,
        help="launch a legacy stdio server instead (one process per upstream session), split like "
        "a shell command line; extra environment comes from upstream.env"
        + named.replace("NAME=URL", '"NAME=CMD ARGS..."')
        + " "
        + _where("upstream.command"),
    )
    parser.add_argument(
        "--upstream-cwd",
        metavar="DIR",
        help="working directory of --upstream-command " + _where("upstream.cwd"),
    )


def _add_stdio(commands: Any) -> None:
    stdio = commands.add_parser(
        "stdio",
        help="serve one modern client on this process's stdin/stdout (for clients that launch the "
        "bridge)",
        description="Speak modern (2026-07-28) stdio on stdin/stdout and bridge every request to "
        "the legacy "
        "upstream. stdout carries protocol messages only; logs go to stderr.",
    )
    _add_upstream_flags(stdio)
    stdio.add_argument(
        "--server",
        metavar="NAME",
        help="with named upstreams in the config file ([upstreams.NAME]), the one to serve",
    )
    _add_common(stdio)


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="connect to the upstream the way serve would and report what will bridge (exit 0 "
        "yes, 1 no, "
        "2 unreachable)",
        description="Probe the upstream's era (server/discover, then initialize), transport and "
        "revision; list its "
        "serverInfo, capabilities and tools; say what will bridge and what will not, with "
        "reasons. Exit status: "
        "0 bridgeable, 1 not bridgeable, 2 unreachable.",
    )
    _add_upstream_flags(check, several=True)
    check.add_argument(
        "--json", action="store_true", help="print one JSON object (also when unreachable)"
    )
    _add_common(check)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help="TOML settings file; `mrtr-bridge config example` prints a commented one with every "
        f"setting and its default [env {CONFIG_ENV}]",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,  # DEBUG as well as debug
        choices=("debug", "info", "warning", "error"),
        help="log level (default info) " + _where("log.level"),
    )
    parser.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        help="log format on stderr: auto is console on a terminal, else json "
        + _where("log.format"),
    )
    parser.add_argument(
        "--event-loop",
        choices=("auto", "asyncio", "uvloop"),
        help="event loop: auto (default) runs on uvloop when installed, else on asyncio's "
        + _where("front.event_loop"),
    )


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve modern (2026-07-28) clients over Streamable HTTP, fronting a legacy upstream",
        description="Serve the modern Streamable HTTP endpoint and bridge every request to the "
        "legacy upstream.",
    )
    _add_upstream_flags(serve, several=True)
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where the modern endpoint listens: HOST:PORT, not a URL; its path is /mcp "
        "(default 127.0.0.1:8080) " + _where("front.listen"),
    )
    _add_cluster_flags(serve)
    _add_common(serve)


def _comma_list(value: str) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in value.split(","))))


def _add_cluster_flags(serve: argparse.ArgumentParser) -> None:
    """Replicas behind a load balancer (docs/operations.md § Replicas)."""
    serve.add_argument(
        "--replica-id",
        metavar="ID",
        help="this replica's id, or 'auto' for a random one " + _where("held.replica_id"),
    )
    serve.add_argument(
        "--advertise-url",
        metavar="URL",
        help="this replica's base URL as the others reach it " + _where("cluster.advertise_url"),
    )
    serve.add_argument(
        "--peers",
        metavar="URL,URL,...",
        type=_comma_list,
        help="every replica's base URL, comma-separated " + _where("cluster.peers"),
    )
    serve.add_argument(
        "--peers-dns",
        metavar="HOST:PORT",
        help="a DNS name resolving to every replica, re-resolved " + _where("cluster.peers_dns"),
    )


def _add_config(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        help="print the example settings file, or check one (`config validate FILE`)",
        description="`mrtr-bridge config example > bridge.toml` prints the commented example "
        "settings file shipped with the bridge; `mrtr-bridge config validate bridge.toml` checks "
        "one as `serve` would load it, without starting.",
    )
    actions = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser(
        "example",
        help="print the example settings file (every setting, commented, with its default)",
    )
    validate = actions.add_parser(
        "validate",
        help="check FILE (with the MRTR_BRIDGE_* environment) as serve would; print the "
        "effective settings, every secret masked (exit 0), or one line naming the mistake "
        "(exit 2)",
        description="Load FILE the way `serve` and `stdio` do (defaults < FILE < MRTR_BRIDGE_* "
        "environment), like `nginx -t` or `haproxy -c`: exit 0 and the effective settings as "
        "TOML on stdout, every secret masked; exit 2 and one line on stderr naming the setting, "
        "where it came from and what is allowed.",
    )
    validate.add_argument("file", metavar="FILE", type=Path, help="the TOML settings file")


def _add_install(commands: Any) -> None:
    install = commands.add_parser(
        "install",
        help="add this mrtr-bridge, in front of an upstream, to Claude Desktop, Cursor or VS Code",
        description="Merge one server entry into a desktop client's MCP config file: the "
        "absolute path of this mrtr-bridge, run as `stdio` in front of the upstream. Other "
        "entries and keys are kept; the previous file is kept as <file>.bak.",
    )
    install.add_argument(
        "client",
        choices=("claude-desktop", "cursor", "vscode"),
        help="claude-desktop: claude_desktop_config.json; cursor: ~/.cursor/mcp.json; vscode: "
        "the user profile's mcp.json (a workspace's: --config-path .vscode/mcp.json)",
    )
    install.add_argument("--name", required=True, help="the server's name in the client")
    install.add_argument("--upstream", metavar="URL", help="legacy HTTP endpoint to front")
    install.add_argument(
        "--upstream-command", metavar='"CMD ARGS..."', help="legacy stdio server to launch"
    )
    install.add_argument(
        "--config-path", metavar="FILE", type=Path, help="the client's config file to change"
    )
    install.add_argument(
        "--bridge-config",
        metavar="FILE",
        type=Path,
        help="a settings file the bridge is started with (--config FILE)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=f"Reverse proxy that lets MCP {MODERN_VERSION} clients use legacy MCP servers "
        "of revisions "
        f"{', '.join(SUPPORTED)}.",
        epilog="Precedence: command line > environment (MRTR_BRIDGE_<SECTION>_<KEY>) > config "
        "file > defaults. "
        "requestState keys come from [held.keys] or MRTR_BRIDGE_HELD_KEYS, never from the command "
        "line. "
        "Logs go to stderr.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"{PROG} {version(PROG)} (modern {MODERN_VERSION}"
        f" -> legacy {SUPPORTED[-1]} .. {SUPPORTED[0]})",
        help="print the version and the protocol revisions bridged, then exit",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(commands)
    _add_stdio(commands)
    _add_check(commands)
    _add_config(commands)
    _add_install(commands)
    keygen = commands.add_parser(
        "keygen",
        help="print a new requestState key (32 random bytes, base64url) for [held.keys]",
        description="Print a new requestState key as a TOML snippet for [held.keys] and as "
        "environment variables.",
    )
    keygen.add_argument(
        "--kid",
        metavar="ID",
        help="key id to print: 1-16 letters, digits, '-' or '_' (default: k<date><random hex>)",
    )
    return parser


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted setting overrides from parsed `serve` flags (unset flags are None and ignored);
    `--upstream NAME=URL` and `--upstream-command NAME=CMD` become `upstreams.NAME.url` and
    `.command`. Raises `UsageError` for two unnamed upstreams, or unnamed and named ones mixed."""
    overrides = {dotted: getattr(args, flag, None) for flag, dotted in FLAG_SETTINGS.items()}
    for flag, key in (("upstream", "url"), ("upstream_command", "command")):
        values = overrides.get(f"upstream.{key}")
        if isinstance(values, list):
            overrides[f"upstream.{key}"] = None
            overrides.update(_upstream_values(flag, key, values))
    unnamed = [k for k in ("upstream.url", "upstream.command") if overrides.get(k) is not None]
    if unnamed and any(key.startswith("upstreams.") for key in overrides):
        raise UsageError(
            "give every upstream a name (--upstream NAME=URL, --upstream-command NAME=CMD) or give "
            "one upstream without a name, not both"
        )
    return overrides


def _upstream_values(flag: str, key: str, values: list[str]) -> dict[str, str]:
    """The overrides of a repeated upstream flag: `NAME=…` (a valid upstream name before the first
    `=`) is a named upstream's, anything else (`http://host/mcp?a=b`, `env FOO=1 node s.js`) the
    one unnamed upstream's."""
    found: dict[str, str] = {}
    option = "--" + flag.replace("_", "-")
    for value in values:
        name, rest = named_value(value)
        dotted = f"upstream.{key}" if name is None else f"upstreams.{name}.{key}"
        if dotted in found:
            which = "an unnamed upstream" if name is None else f"upstream {name!r}"
            raise UsageError(f"{option} gives {which} twice: name each one once (NAME=...)")
        found[dotted] = rest
    return found


def named_value(value: str) -> tuple[str | None, str]:
    """(NAME, the rest) of `NAME=…` where NAME is a valid upstream name, else (None, value)."""
    name, sep, rest = value.partition("=")
    if sep and UPSTREAM_NAME.fullmatch(name) and len(name) <= MAX_UPSTREAM_NAME and rest:
        return name, rest
    return None, value


class UsageError(ValueError):
    """A mistake in the command line's flags (one line, exit 2)."""


__all__ = ["FLAG_SETTINGS", "PROG", "UsageError", "build_parser", "named_value", "overrides_from"]
