"""What the command line tells a person before anything runs: one plain line per mistake, a warning
for a listen address that remote clients would reach only to get 403, and the example config file
shipped with the package (`mrtr-bridge config example`)."""

from __future__ import annotations

import ipaddress
import shlex
import sys
from importlib.resources import files
from typing import Final, NoReturn, TextIO

from config import env_name
from config.settings import FrontSettings, Settings, UpstreamSettings
from proxy.upstream.stdio.process import check_command
from translators.wire.errors import BridgeError

PROG: Final = "mrtr-bridge"
EXAMPLE_CONFIG: Final = "bridge.example.toml"
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
EXIT_USAGE: Final = 2


def fail(message: str, status: int = EXIT_USAGE, err: TextIO | None = None) -> NoReturn:
    """Print `mrtr-bridge: error: <message>` as one line on stderr and exit with `status`."""
    stream = err or sys.stderr
    stream.write(f"{PROG}: error: {' '.join(message.split())}\n")
    stream.flush()
    raise SystemExit(status)


def warn(message: str, err: TextIO | None = None) -> None:
    """Print `mrtr-bridge: warning: <message>` as one line on stderr."""
    stream = err or sys.stderr
    stream.write(f"{PROG}: warning: {' '.join(message.split())}\n")
    stream.flush()


_UPSTREAM_COMMANDS: Final = frozenset({"serve", "stdio", "check"})


def unrecognized(command: str | None, extra: list[str], upstream_command: str | None) -> str:
    """What the command line cannot place, and where an upstream given without its flag goes
    (`mrtr-bridge check http://...`, `mrtr-bridge stdio node server.js`), or the rest of an
    unquoted `--upstream-command node server.js`."""
    message = f"unrecognized arguments: {shlex.join(extra)}"
    if command not in _UPSTREAM_COMMANDS:
        return message
    listen = _listen_hint(extra) if command == "serve" and upstream_command is None else None
    if listen is not None:
        return f"{message}; {listen}"
    url = next((word for word in extra if word.startswith(("http://", "https://"))), None)
    if url is not None:
        return f"{message}; the upstream's URL goes in --upstream {shlex.quote(url)}"
    if extra[0].startswith("-"):
        return message
    if upstream_command is not None:  # what followed its first word, flags included
        whole = shlex.quote(f"{upstream_command} {shlex.join(extra)}")
        return f"{message}; quote the whole command line: --upstream-command {whole}"
    if any(word.startswith("-") for word in extra):
        return message
    whole = shlex.quote(shlex.join(extra))
    return f"{message}; a stdio server's command line goes in --upstream-command {whole}"


def upstream_problem(
    upstream: UpstreamSettings, *, required: bool, check_program: bool
) -> str | None:
    """Why these upstream settings cannot serve, or None: none given (when `required`), both an
    HTTP and a stdio upstream, or (`check_program`) a stdio program that cannot be found."""
    if required and not (upstream.url or upstream.command):
        return (
            "no upstream: pass --upstream URL or --upstream-command CMD, or set "
            f"{env_name('upstream.url')} / {env_name('upstream.command')} or the config file"
        )
    if upstream.url and upstream.command:
        return (
            "choose one upstream: --upstream URL (HTTP) or --upstream-command CMD (stdio), not both"
        )
    if upstream.command and check_program:
        try:
            check_command(upstream)
        except BridgeError as exc:
            return exc.message
    return None


def settings_problem(settings: Settings, *, required: bool, check_program: bool) -> str | None:
    """`upstream_problem` for every upstream `settings` configure; a named one (`upstream NAME:
    ...`) always needs a url or a command of its own."""
    for name, own in settings.units():
        if name is None:
            problem = upstream_problem(own.upstream, required=required, check_program=check_program)
        elif not (own.upstream.url or own.upstream.command):
            problem = f"give it a url or a command ([upstreams.{name}] url = ... or command = ...)"
        elif own.upstream.url and own.upstream.command:
            problem = "give it a url (HTTP) or a command (stdio), not both"
        else:
            problem = upstream_problem(own.upstream, required=True, check_program=check_program)
        if problem is not None:
            return problem if name is None else f"upstream {name}: {problem}"
    return None


_ADDRESS_FLAGS: Final = ("--port", "--host", "--bind", "-p")


def _listen_hint(extra: list[str]) -> str | None:
    """Where a port or host given with another proxy's flag goes (`--port 9000`)."""
    for index, word in enumerate(extra):
        flag, sep, value = word.partition("=")
        if flag not in _ADDRESS_FLAGS:
            continue
        if not sep:
            value = extra[index + 1] if index + 1 < len(extra) else ""
        port = value if value.isdigit() else "8080"
        host = value if flag in ("--host", "--bind") and value else "127.0.0.1"
        return f"the address goes in --listen HOST:PORT, e.g. --listen {host}:{port}"
    return None


def example_config() -> str:
    """The commented example settings file, as shipped inside the `config` package."""
    return files("config").joinpath(EXAMPLE_CONFIG).read_text(encoding="utf-8")


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(allowed: str) -> str:
    """An allowed `Host` value without its port (`localhost:8080`, `[::1]:8080`)."""
    if allowed.startswith("["):
        return allowed.partition("]")[0] + "]"
    return allowed.rsplit(":", 1)[0] if allowed.count(":") == 1 else allowed


def loopback_only_warning(front: FrontSettings) -> str | None:
    """Why remote clients of a bridge listening beyond the loopback would all get 403, or None:
    its `front.allowed_hosts` admit loopback names only."""
    if _is_loopback(front.host) or "*" in front.allowed_hosts:
        return None
    if not all(_is_loopback(_host_of(allowed)) for allowed in front.allowed_hosts):
        return None
    return (
        f"listening on {front.listen}, but front.allowed_hosts ({', '.join(front.allowed_hosts)}) "
        "admits loopback names only: a client that reaches this bridge by another name or address "
        "gets 403. Add the names clients use to front.allowed_hosts "
        f"({env_name('front.allowed_hosts')}=mcp.example.com,10.0.0.5, or the config file); "
        "behind a port published on the loopback only (docker-compose.yml) this is expected"
    )


__all__ = [
    "EXAMPLE_CONFIG",
    "PROG",
    "example_config",
    "fail",
    "loopback_only_warning",
    "settings_problem",
    "upstream_problem",
    "warn",
]
