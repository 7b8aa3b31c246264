"""Ctrl-C at every moment, with the real `mrtr-bridge` command: right after it is spawned, while it
imports (a `stdio` bridge whose legacy process is already up), while the HTTP app is being set up
(an upstream that never answers the first era probe), while it serves, twice while it drains, and
while `check` probes an HTTP or a stdio upstream. Each ends with exit 130 and the one line
`mrtr-bridge: stopped by SIGINT ...` (SIGTERM: exit 0), or exit 0 after a clean drain once serving;
never a traceback, an "Unclosed client session" or a legacy process left behind
(proxy/app/interrupts.py)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

import proxy
from config import ENV_PREFIX, env_name

from .harness import BRIDGE_EXE, ModernPoster, Peers, free_port, is_listening
from .mrtr_helpers import INTERACTIVE, Journal
from .test_check_answers import RawServer

pytestmark = pytest.mark.integration
WAIT_S = 30.0
SLOW_PROBE = {env_name("upstream.era_probe_timeout_s"): "20", env_name("log.format"): "json"}
# A legacy "server" that writes its pid to a file and then waits; what the bridge starts first.
MARKED = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
NOISE = ("Traceback", "Unclosed", "KeyboardInterrupt", "CancelledError", "Task was destroyed")


class Bridge:
    """The real command in its own process group, stdin a pipe kept open, stderr captured."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        self.popen = subprocess.Popen(
            [str(BRIDGE_EXE), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**base, **(env or {})},
            start_new_session=True,
        )

    def signal(self, signum: signal.Signals) -> None:
        self.popen.send_signal(signum)

    def outcome(self) -> tuple[int, str, str]:
        """Exit status, stdout and stderr, within `WAIT_S`."""
        stdout, stderr = self.popen.communicate(timeout=WAIT_S)
        return self.popen.returncode, stdout.decode(), stderr.decode()

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.communicate()


# CPython's own start-up, interrupted before it runs the script: its error, exit 1.
INTERPRETER_START_UP = (
    "Fatal Python error: init_import_site: Failed to import the site module",
    "python: failed to set __main__.__loader__",
)
# CPython's start-up can take a SIGINT, print it and go on: while it checks whether the script is
# a zip archive, before it runs it. The command then runs as if no signal had come.
CPYTHON_GOES_ON = "Failed checking if argv[0] is an import path entry\n"
PACKAGE = Path(proxy.__file__).resolve().parent
# The bridge's modules a SIGINT can interrupt before `proxy.__main__` runs `interrupts.install()`.
BEFORE_THE_HANDLER = {
    PACKAGE / name
    for name in ("__init__.py", "__main__.py", "app/__init__.py", "app/interrupts.py")
}


@pytest.fixture(autouse=True)
def sigint_not_ignored() -> Iterator[None]:
    """Each bridge starts with SIGINT as a terminal gives it. A test run started as a script's
    background job (`make test &`) has SIGINT ignored, and its children inherit that: a SIGINT
    during a bridge's interpreter start-up, before its first statement, would then be lost."""
    inherited = signal.getsignal(signal.SIGINT)
    if inherited == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.fixture
def bridges() -> Iterator[Callable[..., Bridge]]:
    started: list[Bridge] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Bridge:
        started.append(Bridge(*args, env=env))
        return started[-1]

    try:
        yield start
    finally:
        for bridge in started:
            bridge.kill()


@pytest.fixture
def silent_server() -> Iterator[RawServer]:
    server = RawServer(None)
    try:
        yield server
    finally:
        server.close()


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def assert_stopped(stderr: str, line: str) -> None:
    """`line` ends stderr, and nothing else on it is a traceback or a leak warning."""
    assert stderr.endswith(line + "\n"), stderr
    for noise in NOISE:
        assert noise not in stderr, stderr


def is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def before_the_first_statement(stderr: str) -> bool:
    """Python's own `KeyboardInterrupt` while the script imports `proxy.app.interrupts`, the one
    module loaded before the bridge's first statement takes SIGINT. The bridge never raises
    `KeyboardInterrupt` itself, and once it took SIGINT, Python's handler is gone."""
    files = {Path(name).resolve() for name in re.findall(r'^  File "(/[^"]+)"', stderr, re.M)}
    return (
        stderr.startswith("Traceback (most recent call last):\n")
        and stderr.endswith("\nKeyboardInterrupt\n")
        and {file for file in files if file.is_relative_to(PACKAGE)} <= BEFORE_THE_HANDLER
    )


def cpython_went_on(stderr: str) -> bool:
    """CPython's start-up printed the `KeyboardInterrupt` (its own frames only) and went on."""
    printed, interrupted, _ = stderr.partition("\nKeyboardInterrupt\n")
    frames = re.findall(r'^  File "([^"]+)"', printed, re.MULTILINE)
    return (
        printed.startswith(CPYTHON_GOES_ON + "Traceback (most recent call last):\n")
        and interrupted != ""
        and all(frame.startswith("<frozen ") for frame in frames)
    )


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0"],
        ["stdio", "--upstream", "http://127.0.0.1:9/mcp"],
        ["check", "--upstream", "http://127.0.0.1:9/mcp"],
    ],
    ids=["serve", "stdio", "check"],
)
def test_sigint_right_after_spawn(bridges: Callable[..., Bridge], args: list[str]) -> None:
    """Before the interpreter runs any code, SIGINT kills it as any program (what a shell reports
    as 130) and nothing is printed; while the interpreter itself starts (it imports `site`, it sets
    up `__main__`) it is CPython's own error, exit 1, as for every Python program; while the script
    imports the one module before the bridge's first statement, Python's `KeyboardInterrupt`; from
    the bridge's first statement on, it is the one line and 130. Only when CPython itself prints
    the signal and goes on (`CPYTHON_GOES_ON`) does the command run as if it had not come."""
    bridge = bridges(*args)
    bridge.signal(signal.SIGINT)
    try:
        status, stdout, stderr = bridge.outcome()
    except subprocess.TimeoutExpired as running:  # `serve` or `stdio` never saw the signal
        assert cpython_went_on((running.stderr or b"").decode()), running.stderr
        return
    if cpython_went_on(stderr):  # `check` then ran to its end
        assert (status, stdout.splitlines()[-1]) == (2, "bridgeable: no")
        return
    assert stdout == ""
    if status == -signal.SIGINT:
        assert stderr == "" or before_the_first_statement(stderr), stderr
    elif stderr.startswith(INTERPRETER_START_UP):
        last = stderr.rstrip().splitlines()[-1]
        assert (status, last.removesuffix(":")) == (1, "KeyboardInterrupt"), stderr
    else:
        assert status == 130
        assert_stopped(stderr, "mrtr-bridge: stopped by SIGINT while starting")


def test_sigint_while_importing_stops_the_early_legacy_process(
    bridges: Callable[..., Bridge], tmp_path: Path
) -> None:
    """`stdio` starts its legacy process before importing itself: SIGINT once that process is up
    (the bridge still importing) is the one line, and the process is gone with the bridge."""
    marker = tmp_path / "pid"
    command = f"{sys.executable} -c {MARKED!r} {marker}"
    bridge = bridges("stdio", "--upstream-command", command)
    until(lambda: marker.exists() and marker.read_text() != "", "the legacy process")
    bridge.signal(signal.SIGINT)
    status, stdout, stderr = bridge.outcome()
    assert (status, stdout) == (130, "")
    assert_stopped(stderr, "mrtr-bridge: stopped by SIGINT while starting")
    until(lambda: is_gone(int(marker.read_text())), "the legacy process to be gone")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_stop_while_the_app_is_set_up_closes_what_was_opened(
    bridges: Callable[..., Bridge],
    silent_server: RawServer,
    signum: signal.Signals,
    status: int,
) -> None:
    """`serve` probes its upstream's era before it listens; a stop while that probe waits on a
    server that never answers ends the set-up, closes the probe's client, and exits."""
    url = f"http://127.0.0.1:{silent_server.port}/mcp"
    listen = f"127.0.0.1:{free_port()}"
    bridge = bridges("serve", "--upstream", url, "--listen", listen, env=SLOW_PROBE)
    until(lambda: len(silent_server.accepted) >= 1, "the era probe to connect")
    bridge.signal(signum)
    returned, stdout, stderr = bridge.outcome()
    assert (returned, stdout) == (status, "")
    assert_stopped(stderr, f"mrtr-bridge: stopped by {signum.name} while starting")
    assert '"bridge_started"' not in stderr


def test_sigint_while_serving_drains_and_exits_0(
    bridges: Callable[..., Bridge], peers: Peers
) -> None:
    legacy = peers.legacy()
    port = free_port()
    bridge = bridges(
        "serve", "--upstream", legacy.url, "--listen", f"127.0.0.1:{port}", "--log-format", "json"
    )
    until(lambda: is_listening(port), "the bridge to listen")
    bridge.signal(signal.SIGINT)
    status, stdout, stderr = bridge.outcome()
    assert (status, stdout) == (0, "")
    assert '"bridge_stopping"' in stderr
    for noise in NOISE:
        assert noise not in stderr, stderr


def test_sigint_while_check_probes_an_http_upstream(
    bridges: Callable[..., Bridge], silent_server: RawServer
) -> None:
    bridge = bridges("check", "--upstream", f"http://127.0.0.1:{silent_server.port}/mcp")
    until(lambda: len(silent_server.accepted) >= 1, "check to connect")
    bridge.signal(signal.SIGINT)
    status, stdout, stderr = bridge.outcome()
    assert (status, stdout) == (130, "")
    assert_stopped(stderr, "mrtr-bridge: stopped by SIGINT while checking the upstream")


def test_sigint_while_check_probes_a_stdio_upstream_stops_its_process(
    bridges: Callable[..., Bridge], tmp_path: Path
) -> None:
    marker = tmp_path / "pid"
    command = f"{sys.executable} -c {MARKED!r} {marker}"
    bridge = bridges("check", "--upstream-command", command, "--json")
    until(lambda: marker.exists() and marker.read_text() != "", "the probe's process")
    bridge.signal(signal.SIGINT)
    status, stdout, stderr = bridge.outcome()
    assert (status, stdout) == (130, "")
    assert_stopped(stderr, "mrtr-bridge: stopped by SIGINT while checking the upstream")
    until(lambda: is_gone(int(marker.read_text())), "the probe's process to be gone")


async def test_ctrl_c_twice_while_draining_still_exits_0(
    bridges: Callable[..., Bridge], peers: Peers, tmp_path: Path
) -> None:
    """Shutdown: a call attached upstream holds the drain (grace 2 s); a second Ctrl-C during it
    changes nothing visible: the call gets the shutting-down error, exit 0, no traceback."""
    legacy = peers.legacy(INTERACTIVE, "--state-dir", str(tmp_path))
    journal = Journal(tmp_path)
    port = free_port()
    env = {env_name("front.shutdown_grace_s"): "2", env_name("log.format"): "json"}
    bridge = bridges("serve", "--upstream", legacy.url, "--listen", f"127.0.0.1:{port}", env=env)
    until(lambda: is_listening(port), "the bridge to listen")
    async with asyncio.timeout(WAIT_S), aiohttp.ClientSession() as http:
        post = ModernPoster(http, f"http://127.0.0.1:{port}/mcp")
        call = asyncio.create_task(post.post("tools/call", {"name": "slow", "arguments": {
            "tag": "drain", "seconds": 20}}))  # fmt: skip
        await journal.wait_for("drain", "call")
        bridge.signal(signal.SIGINT)
        await asyncio.sleep(0.2)  # the drain is under way (it waits for the call)
        bridge.signal(signal.SIGINT)
        reply = await call
    status, stdout, stderr = await asyncio.to_thread(bridge.outcome)
    assert (status, stdout) == (0, "")
    assert reply.response["error"]["data"]["reason"] == "shutting_down"
    assert '"bridge_stop_hurried"' in stderr
    for noise in NOISE:
        assert noise not in stderr, stderr
