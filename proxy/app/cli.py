"""The `mrtr-bridge` command line: `serve`, `stdio`, `check`, `config`, `install`, `keygen`,
`--version`.

Every flag is also a config-file key and an environment variable; precedence is command line >
environment > file > defaults. Secrets (requestState keys, static upstream credentials) come only
from the file or the environment, never from the command line, where `ps` would show them.
"""

from __future__ import annotations

# The modules of one command only (the HTTP front, the engine, `check`, `keygen`'s cryptography)
# are imported when it runs: `stdio` answers a legacy client without the engine, and its first
# answer waits for the bridge's imports (docs/operations.md, "Start-up over stdio").
import argparse
import contextlib
import errno
import gc
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, NoReturn, TextIO

import structlog

from config import ConfigError, Settings, env_name, load_settings
from proxy.app import event_loop, interrupts
from proxy.app.cli_args import FLAG_SETTINGS, UsageError, build_parser, overrides_from
from proxy.app.cli_hints import fail, loopback_only_warning, settings_problem, unrecognized, warn
from proxy.app.event_loop import EventLoopUnavailable, running_loop_name
from proxy.common.shown import shown_uri
from proxy.common.stopping import BridgeStop
from proxy.observe.logs import configure_logging
from proxy.stdio_front.front import serve_stdio
from proxy.stdio_front.modern import RequestEngine
from proxy.upstream.stdio.children import ChildProcesses
from proxy.upstream.stdio.early import EarlyProcess, Launch
from proxy.upstream.stdio.keeper import GroupKeeper
from proxy.upstream.stdio.spares import SpareProcesses

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
# A stdio client closes the bridge's stdin, waits 2 s, then sends SIGTERM: the bridge's legacy
# processes get SIGTERM at this deadline after the stop began, and SIGKILL `HURRY_GRACE_S` later.
STDIO_STOP_DEADLINE_S: Final = 0.75
HURRY_GRACE_S: Final = 0.25
# A forwarded call allocates thousands of short-lived objects (tasks, futures, frames, headers):
# at the interpreter's default of 700 the cyclic collector runs every few calls, about 8% of the
# bridge's CPU under load (bench/README.md, "Where the CPU goes"). Cycles still get collected.
GC_GEN0_THRESHOLD: Final = 10_000
_log = structlog.get_logger("proxy.app.cli")


def keygen_text(kid: str, key: str) -> str:
    """What `keygen` prints: a TOML snippet and the equivalent environment variables."""
    return (
        "# requestState key: add to your config file (keep it private)\n"
        "[held]\n"
        f'active_key = "{kid}"\n\n'
        "[held.keys]\n"
        f'{kid} = "{key}"\n\n'
        "# or in the environment (append to existing keys as kid=key pairs, comma-separated):\n"
        f"{env_name('held.keys')}={kid}={key}\n"
        f"{env_name('held.active_key')}={kid}\n"
    )


def _keygen(args: argparse.Namespace, out: TextIO) -> int:
    from proxy.auth.keys import kid_problem, new_key

    problem = None if args.kid is None else kid_problem(args.kid)
    if problem is not None:
        fail(f"--kid: {problem}")
    kid, key = new_key()
    out.write(keygen_text(args.kid or kid, key))
    return EXIT_OK


def upstream_label(settings: Settings) -> str:
    """What the bridge fronts, for the startup line: the URL as `shown_uri` shows it, or the stdio
    program; with named upstreams, `NAME=<that>` for each, comma-separated."""
    if settings.upstreams:
        return ", ".join(
            f"{name}={upstream_label(own)}" for name, own in settings.units() if name is not None
        )
    if settings.upstream.url:
        return shown_uri(settings.upstream.url)
    program = (settings.upstream.command or "").split(maxsplit=1)
    return f"stdio:{program[0] if program else ''}"


def _listen_url(host: str, port: int, path: str) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


@contextlib.asynccontextmanager
async def _children_stop(
    deadline_s: float | None,
) -> AsyncIterator[tuple[ChildProcesses, BridgeStop]]:
    """The bridge's legacy stdio processes and its stop, with SIGTERM and SIGINT handled throughout:
    when the block ends, a hurry under way has finished and any process still alive gets SIGKILL."""
    children = ChildProcesses(GroupKeeper())
    stop = BridgeStop(lambda: children.stop_all(HURRY_GRACE_S), deadline_s=deadline_s)
    with stop.signals():
        try:
            yield children, stop
        finally:
            await stop.aclose()
            children.kill_all()
            children.close()


async def _serve(settings: Settings) -> None:
    """Run the HTTP bridge until SIGINT or SIGTERM, then shut down gracefully (a second signal stops
    the legacy stdio processes at once)."""
    # The app's on_shutdown drains within the grace (proxy.engine.engine.Drain); aiohttp's own
    # per-connection wait
    # (which it spends twice) only collects handlers that have already answered (0 would mean no
    # limit).
    from aiohttp import web

    from proxy.app.http_app import make_app
    from proxy.app.http_server import BridgeRunner
    from proxy.engine.engine import close_reserve_s

    async with _children_stop(None) as (children, stop):
        runner = BridgeRunner(
            make_app(settings, children),
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=max(0.05, close_reserve_s(settings.front.shutdown_grace_s) / 8),
        )
        try:
            if not await stop.before_stop(runner.setup()):  # what it set up is cleaned up below
                raise interrupts.StopRequested(stop.signum or signal.SIGTERM, "while starting")
            site = web.TCPSite(runner, settings.front.host, settings.front.port)
            await site.start()
            port = runner.addresses[0][1] if runner.addresses else settings.front.port
            paths = [own.front.path for _, own in settings.units()]
            _log.info(
                "bridge_started",
                listen=", ".join(_listen_url(settings.front.host, port, path) for path in paths),
                upstream=upstream_label(settings),
                event_loop=running_loop_name(),
            )
            warning = loopback_only_warning(settings.front)
            if warning is not None:
                _log.warning("allowed_hosts_loopback_only", hint=warning)
            await stop.wait()
            _log.info("bridge_stopping")
        finally:
            await runner.cleanup()


def _flag_names() -> dict[str, str]:
    return {dotted: "--" + flag.replace("_", "-") for flag, dotted in FLAG_SETTINGS.items()}


def _settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Validated settings for `serve`/`stdio`/`check`; a mistake is one line on stderr and exit 2
    (`check` reports a command that cannot start as an unreachable upstream instead). What a
    `--servers-json` file leaves out is a warning line each."""
    servers = None
    if getattr(args, "servers_json", None) is not None:
        from config.servers_json import ServersJsonError, read_servers_json

        try:
            servers = read_servers_json(args.servers_json)
        except ServersJsonError as exc:
            fail(str(exc))
        for line in servers.warnings():
            warn(line)
    try:
        settings = load_settings(
            args.config, env, overrides_from(args), _flag_names(), servers=servers
        )
    except (ConfigError, UsageError) as exc:
        fail(str(exc))
    problem = settings_problem(settings, required=True, check_program=args.command != "check")
    if problem is not None:
        fail(problem)
    return settings


def _one_upstream(settings: Settings, name: str | None) -> Settings:
    """The settings `stdio` serves: the one unnamed upstream, or the named one `--server NAME`
    picks (a stdio client has one endpoint)."""
    units = dict(settings.units())
    if name is None and None in units:
        return settings
    names = ", ".join(sorted(str(unit) for unit in units if unit is not None))
    if name is None:
        fail(f"stdio serves one upstream: pick one of the named ones with --server NAME ({names})")
    if name not in units:
        found = f"the named upstreams are {names}" if names else "no upstream is named"
        fail(f"--server {name}: {found}")
    return units[name]


async def _stdio(settings: Settings, early: EarlyProcess | None = None) -> None:
    """Serve one client on stdin/stdout until stdin EOF, SIGTERM or SIGINT; the legacy processes are
    gone `STDIO_STOP_DEADLINE_S` + `HURRY_GRACE_S` after that at the latest. `early`: the legacy
    process the entry point started before the imports, already claimed for these settings; spare
    processes start only once the first answer went out (docs/operations.md, "Start-up over
    stdio")."""
    async with _children_stop(STDIO_STOP_DEADLINE_S) as (children, stop):
        spares = SpareProcesses(settings.upstream, children) if settings.upstream.command else None

        @contextlib.asynccontextmanager
        async def open_engine() -> AsyncIterator[RequestEngine]:
            from proxy.app.compose import bridge_runtime  # a modern client's first line only

            async with bridge_runtime(settings, children=children, spares=spares) as (engine, _):
                yield engine

        try:
            if spares is not None and early is not None:
                await spares.adopt_first(early)
            _log.info(
                "bridge_started",
                listen="stdio",
                upstream=upstream_label(settings),
                event_loop=running_loop_name(),
            )
            await serve_stdio(
                settings,
                None,
                stop,
                processes=spares,
                on_first_answer=spares.release if spares is not None else None,
                open_engine=open_engine,
            )
        finally:
            if spares is not None:
                await spares.aclose()


def _claimed(early: EarlyProcess | None, settings: Settings) -> EarlyProcess | None:
    """`early` if it was started exactly as these settings start a legacy process (else it is
    stopped now)."""
    if early is None:
        return None
    upstream = settings.upstream
    launch = (
        Launch.of(upstream.command, upstream.env, upstream.cwd)
        if upstream.command and not upstream.url
        else None
    )
    return early if early.claim(launch) else None


def _tune_gc() -> None:
    """What is alive after start-up (modules, classes, settings) is never scanned again; young
    objects are collected less often."""
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])


def _run(command: Any, settings: Settings, *args: Any) -> int:
    """Run `serve` or `stdio` to the end; the process is expected to exit next."""
    configure_logging(settings.log, cache=True)
    if command is _serve:
        from proxy.observe import tracing

        tracing.configure()  # OpenTelemetry from OTEL_*, when installed (proxy/observe/tracing.py)
    _tune_gc()
    try:
        event_loop.run(command(settings, *args), settings.front.event_loop)
        # Exiting next, the interpreter would collect the whole heap: up to 0.8 s on a loaded
        # machine, much of the 2 s a stdio client allows between closing stdin and SIGTERM. Frozen
        # objects are not collected; the operating system reclaims them.
        gc.freeze()
    except (EventLoopUnavailable, OSError, ValueError) as exc:
        # e.g. the address is in use, a requestState key that is not 32 bytes of base64url
        _failed(settings, exc)
    except Exception as exc:  # a bug: one line; the traceback at --log-level debug
        _failed(settings, exc, hint=" (run with --log-level debug for the traceback)")
    return EXIT_OK


def run_check(settings: Settings, as_json: bool, out: TextIO) -> int:
    """`mrtr-bridge check` (`proxy.check`, imported only for it)."""
    from proxy.app.check import run_check as check

    return check(settings, as_json, out)


def _failed(settings: Settings, exc: BaseException, hint: str = "") -> NoReturn:
    """A start-up or run failure: one plain line on stderr, exit 1; the traceback only in a debug
    log line."""
    if settings.log.level == "debug":
        _log.error("bridge_failed", error=str(exc), exc_info=exc)
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror and exc.errno == errno.EADDRINUSE:
        reason = f"cannot listen on {settings.front.listen}: the address is already in use"
    fail(f"{reason}{hint}", EXIT_FAILED)


def main(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    early: EarlyProcess | None = None,
) -> int:
    """Entry point of `mrtr-bridge` and `python -m proxy` (after `proxy.__main__` started `early`,
    the legacy process of a `stdio` command line); returns the exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "upstream_command", None)
        last = command[-1] if isinstance(command, list) else command  # serve, check: repeatable
        fail(unrecognized(args.command, extra, last))
    if args.command == "keygen":
        return _keygen(args, out or sys.stdout)
    if args.command == "install":
        from proxy.app.install_client import run_install

        return run_install(args, os.environ if env is None else env, out or sys.stdout)
    if args.command == "config":
        from proxy.app.config_command import run_config

        return run_config(args, os.environ if env is None else env, out or sys.stdout)
    if args.command == "check":
        interrupts.doing("while checking the upstream")
        settings = _settings(args, os.environ if env is None else env)
        configure_logging(
            settings.log if args.log_level else settings.log.model_copy(update={"level": "warning"})
        )
        try:
            return run_check(settings, args.json, out or sys.stdout)
        except Exception as exc:  # a bug: one line; the traceback at --log-level debug
            _failed(settings, exc, hint=" (run with --log-level debug for the traceback)")
    if args.command == "serve":
        return _run(_serve, _settings(args, os.environ if env is None else env))
    if args.command == "stdio":
        settings = _one_upstream(_settings(args, os.environ if env is None else env), args.server)
        return _run(_stdio, settings, _claimed(early, settings))
    parser.print_help(out or sys.stdout)
    return EXIT_USAGE


__all__ = [
    "keygen_text",
    "main",
    "upstream_label",
]
