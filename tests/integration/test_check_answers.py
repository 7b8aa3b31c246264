"""`mrtr-bridge check` calls a server legacy or modern only after it answered as one: a port that
accepts and never answers, one that answers junk bytes, and a stdio command that hangs are
unreachable (exit 2); a plain web server is "not an MCP server" (exit 1); a stdio server that dies
is shown with its exit status and the tail of its stderr, and no traceback of the bridge's own."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator

import pytest

from config import env_name

from .harness import Peers, free_port
from .test_check import run_check, run_check_raw

FAST = {
    env_name("upstream.era_probe_timeout_s"): "1",
    env_name("upstream.init_timeout_s"): "2",
    env_name("upstream.connect_timeout_s"): "2",
}
DYING_SERVER = (
    "import sys; print('loading settings', file=sys.stderr); "
    "print('error: API_KEY is not set', file=sys.stderr); sys.exit(3)"
)


class RawServer:
    """A TCP listener on 127.0.0.1 that accepts every connection and then either says nothing or
    sends bytes that are not HTTP; connections stay open until the test ends."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)
            if self.reply is not None:
                conn.sendall(self.reply)

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture(params=[None, b"\x00\xffSSH-2.0-not-http\r\n\r\n"], ids=["silent", "junk"])
def raw_server(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    server = RawServer(request.param)
    try:
        yield server
    finally:
        server.close()


def test_a_port_that_never_answers_or_answers_junk_is_unreachable(raw_server: RawServer) -> None:
    url = f"http://127.0.0.1:{raw_server.port}/mcp"
    status, report = run_check("--upstream", url, env=FAST)
    assert status == 2
    assert (report["reachable"], report["era"], report["bridgeable"]) == (False, None, False)
    assert (report["protocolVersion"], report["serverInfo"]) == (None, None)
    assert len(report["problems"]) == 1
    expected = "did not answer in time" if raw_server.reply is None else "invalid HTTP response"
    assert report["problems"][0].startswith(f"unreachable: no HTTP answer: Upstream {url} ")
    assert expected in report["problems"][0]
    assert len(raw_server.accepted) >= 1


def test_a_hung_stdio_command_is_unreachable() -> None:
    command = f"{sys.executable} -c 'import time; time.sleep(120)'"
    status, report = run_check("--upstream-command", command, env=FAST)
    assert status == 2
    assert (report["reachable"], report["era"], report["transport"]) == (False, None, "stdio")
    assert report["problems"] == [
        f"unreachable: Legacy stdio server {sys.executable!r} did not answer initialize within 2 s"
        " (upstream.init_timeout_s)"
    ]
    assert report["stderrTail"] == []


def test_a_plain_web_server_is_not_an_mcp_server(peers: Peers) -> None:
    port = free_port()
    peers.start(
        "web", [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], port
    )
    url = f"http://127.0.0.1:{port}/mcp"
    status, report = run_check("--upstream", url, env=FAST)
    assert status == 1
    assert (report["reachable"], report["era"], report["bridgeable"]) == (True, None, False)
    assert report["problems"] == [
        "not an MCP server: server/discover got HTTP 501 without a JSON-RPC answer, and Upstream "
        f"{url} answered initialize with HTTP 501"
    ]


def test_a_dying_stdio_server_shows_its_exit_status_and_stderr_tail() -> None:
    command = f"{sys.executable} -c {DYING_SERVER!r}"
    for _ in range(3):  # the race that once printed the event loop's RuntimeError
        status, stdout, stderr = run_check_raw("--upstream-command", command, json_output=False)
        assert status == 2
        assert "RuntimeError" not in stderr and "Traceback" not in stderr
        assert stdout.splitlines()[1] == "era:        unknown"
        assert stdout.endswith(
            "its stderr ended with:\n  | loading settings\n  | error: API_KEY is not set\n"
            "bridgeable: no\n"
        )
    status, report = run_check("--upstream-command", command)
    assert status == 2
    assert (report["reachable"], report["era"]) == (False, None)
    assert report["problems"][0].startswith(
        f"unreachable: Legacy stdio server {sys.executable!r} stopped before answering initialize:"
        " legacy server process exited with code 3"
    )
    assert report["stderrTail"] == ["loading settings", "error: API_KEY is not set"]


def test_a_command_that_exits_at_once_leaves_no_traceback() -> None:
    for _ in range(4):
        status, _stdout, stderr = run_check_raw("--upstream-command", "false", json_output=False)
        assert status == 2
        assert "Traceback" not in stderr and "RuntimeError" not in stderr
