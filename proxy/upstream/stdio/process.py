"""The legacy stdio server as an OS process: command line, spawn, exit codes, and shutdown.

Error messages name the command's program (argv[0]) only: its arguments may carry secrets.
Shutdown follows the spec (basic/transports/stdio § Shutdown): close stdin, wait, SIGTERM, wait,
SIGKILL. The child runs in its own session and signals go to its process group, so wrappers such
as `npx` or `sh -c` leave no grandchild holding the pipes. On Linux the child also dies with the
bridge (`stdio_children.die_with_bridge`), and every child is recorded in the bridge's
`ChildProcesses`, which stops them all when the bridge is in a hurry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from typing import Any

from config.settings import UpstreamSettings
from proxy.upstream.stdio.children import (
    ChildProcesses,
    die_with_bridge,
    exited_within,
    signal_group,
    stop_leftovers,
)
from translators.wire.errors import UpstreamUnavailable


def command_argv(settings: UpstreamSettings) -> tuple[list[str], str]:
    """The argv of the configured command and its program (argv[0], the only part safe to show)."""
    if not settings.command:
        raise UpstreamUnavailable("No legacy stdio server command is configured (upstream.command)")
    try:
        argv = shlex.split(settings.command)
    except (
        ValueError
    ) as exc:  # the message names the problem ("No closing quotation"), not the text
        raise UpstreamUnavailable(f"upstream.command is not a valid command line: {exc}") from None
    if not argv:
        raise UpstreamUnavailable("upstream.command is empty")
    return argv, argv[0]


def upstream_label(program: str) -> dict[str, str]:
    """The `data.upstream` of errors about this server."""
    return {"upstream": f"stdio:{program}"}


def _cannot_start(program: str, reason: str) -> UpstreamUnavailable:
    return UpstreamUnavailable(
        f"Cannot start legacy stdio server {program!r}: {reason}", upstream_label(program)
    )


def _check_cwd(settings: UpstreamSettings, program: str) -> None:
    if settings.cwd is not None and not os.path.isdir(settings.cwd):
        raise _cannot_start(program, f"working directory {settings.cwd!r} does not exist")


def check_command(settings: UpstreamSettings) -> str:
    """Where the command's program would be found, or `UpstreamUnavailable` saying why it cannot
    start.

    A startup check that starts nothing: the program is resolved as the spawn resolves it (PATH from
    the merged environment; a path with a slash relative to `cwd`)."""
    _, program = command_argv(settings)
    _check_cwd(settings, program)
    if os.sep in program:
        candidate = os.path.join(settings.cwd or os.curdir, program)
        found = candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
    else:
        found = shutil.which(program, path={**os.environ, **settings.env}.get("PATH", os.defpath))
    if found is None:
        raise _cannot_start(program, "program not found or not executable")
    return found


async def spawn(
    settings: UpstreamSettings, children: ChildProcesses | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    """Start the command with piped stdio, `env` merged over the bridge's, in `cwd`, in its own
    session, dying with the bridge (Linux); record it in `children`; returns it and its program."""
    argv, program = command_argv(settings)
    _check_cwd(settings, program)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **settings.env},
            cwd=settings.cwd,
            start_new_session=True,
            preexec_fn=die_with_bridge(),
        )
    except OSError as exc:
        raise _cannot_start(program, exc.strerror or type(exc).__name__) from exc
    if children is not None:
        children.add(process)
    return process, program


def exit_message(code: int | None) -> str:
    """Why a session died, from the process's exit code (negative: killed by that signal)."""
    if code is None:
        return "legacy server process closed its stdout"
    if code < 0:
        with contextlib.suppress(ValueError):
            return (
                f"legacy server process exited with code {code} (killed by "
                f"{signal.Signals(-code).name})"
            )
    return f"legacy server process exited with code {code}"


async def exit_code(process: asyncio.subprocess.Process, timeout: float) -> int | None:
    """The exit code, waiting at most `timeout` seconds (None if the process has not exited)."""
    try:
        async with asyncio.timeout(timeout):
            return await process.wait()
    except TimeoutError:
        return process.returncode


async def stop_process(
    process: asyncio.subprocess.Process, grace_s: float, logger: Any, *, at_once: bool = False
) -> str:
    """Close stdin, then escalate to SIGTERM and SIGKILL to its group, `grace_s` apart; returns
    how it ended. What is left of its process group then (children that ignore the EOF) is stopped
    too. `at_once`: SIGTERM right away, for a process that holds nothing to finish (a spare never
    initialized, perhaps still importing, which would read the EOF only once started)."""
    if process.stdin is not None:
        process.stdin.close()
    how = await _escalate(process, grace_s, at_once=at_once)
    if how == "unreaped":
        logger.error("upstream_process_unreaped", grace_s=grace_s)
    elif await stop_leftovers(process, grace_s):
        logger.info("upstream_process_group_leftovers_stopped", how=how)
    return how


async def _escalate(
    process: asyncio.subprocess.Process, grace_s: float, *, at_once: bool = False
) -> str:
    if not at_once and await exited_within(process, grace_s):
        return "exited"
    signal_group(process, signal.SIGTERM)
    # a hurried bridge may have sent the SIGKILL meanwhile
    if await exited_within(process, grace_s):
        return "killed" if process.returncode == -signal.SIGKILL else "terminated"
    signal_group(process, signal.SIGKILL)
    return "killed" if await exited_within(process, grace_s) else "unreaped"


__all__ = [
    "check_command",
    "command_argv",
    "exit_code",
    "exit_message",
    "spawn",
    "stop_process",
    "upstream_label",
]
