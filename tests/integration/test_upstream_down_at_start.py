"""An HTTP upstream that is down when the bridge starts: a warning naming it (without credentials)
and the reason, repeated with backoff until it answers; `/readyz` says the same in plain words; once
a real legacy server listens there, the bridge says so and becomes ready."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from config import ENV_PREFIX

from .harness import BRIDGE_EXE, FIXTURE_SERVER, LEGACY_PYTHON, PEERS_DIR, Peers, free_port

WAIT_S = 40.0
CLASS_NAME = re.compile(r"Upstream[A-Z][a-z]+|Error\b|Exception")


class LogReader:
    """Collects the bridge's JSON log lines from stderr on a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.events: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._process = process
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.raw.append(line)
            self.events.append(json.loads(line))

    def wait_for(self, event: str, count: int = 1) -> list[dict[str, Any]]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = [e for e in list(self.events) if e["event"] == event]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no {count} x {event} within {WAIT_S} s: {self.raw}")


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_upstream_down_at_start_is_warned_with_backoff_until_it_answers(peers: Peers) -> None:
    upstream_port, bridge_port = free_port(), free_port()
    url = f"http://127.0.0.1:{upstream_port}/mcp"
    listen = f"127.0.0.1:{bridge_port}"
    process = subprocess.Popen(
        [
            str(BRIDGE_EXE),
            "serve",
            "--upstream",
            f"{url}?token=s3cret",
            "--listen",
            listen,
            "--log-format",
            "json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)},
    )
    try:
        logs = LogReader(process)
        warnings = logs.wait_for("upstream_unreachable", 3)
        assert [w["retry_in_s"] for w in warnings[:3]] == [1.0, 2.0, 4.0]
        for warning in warnings:
            assert warning["level"] == "warning"
            # the upstream's name (bound to every line about it), and its URL without the query
            assert (warning["upstream"], warning["url"]) == (f"127.0.0.1:{upstream_port}", url)
            assert warning["reason"] == "cannot connect: connection refused"
        logs.wait_for("bridge_started")
        status, body = readyz(bridge_port)
        assert status == 503
        assert body["checks"]["upstream"] == "unreachable: cannot connect: connection refused"
        assert CLASS_NAME.search(json.dumps(body)) is None
        peers.start(
            "legacy",
            [str(LEGACY_PYTHON), str(PEERS_DIR / FIXTURE_SERVER), "--port", str(upstream_port)],
            upstream_port,
        )
        (reachable,) = logs.wait_for("upstream_reachable")
        assert (reachable["url"], reachable["era"]) == (url, "legacy")
        assert reachable["upstream"] == f"127.0.0.1:{upstream_port}"
        deadline = time.monotonic() + WAIT_S
        while (answer := readyz(bridge_port))[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
        checks = {"upstream": "reachable", "transport": "streamable-http", "era": "legacy"}
        assert answer == (
            200,
            {
                "status": "ready",
                "ready_requires": "any",
                "checks": {"keys": "ephemeral", **checks},
                "upstreams": {"/mcp": {"status": "ready", "checks": checks}},
            },
        )
        # no warning once it answered: `upstream_reachable` is the watch's last word (it ends
        # there; tests/proxy/upstream/test_reachability.py moves its clock far past any backoff)
        said = ("upstream_unreachable", "upstream_reachable")
        watch = [entry["event"] for entry in list(logs.events) if entry["event"] in said]
        assert watch[-1] == "upstream_reachable" and watch.count("upstream_reachable") == 1
        assert not any("s3cret" in line for line in logs.raw)
    finally:
        process.terminate()
        process.wait(WAIT_S)
