"""The HTTP front under fuzzing (issue 6): a short run of `bench/fuzz_front.py`, and the regressions
that fuzzing found, kept as plain tests.

The full run (10,000 messages, figures in docs/security.md) is `bench/fuzz_front.py` itself; here
300 messages against a real bridge and legacy server must give no crash, every held call back and
a healthy bridge.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from safety_harness import JournalPeer, bridge_settings, inprocess_bridge, journal_peer

from translators.wire.errors import INVALID_PARAMS

REPO = Path(__file__).resolve().parents[3]
FUZZ = REPO / "bench" / "fuzz_front.py"
LONE_SURROGATE = json.loads('"\\ud800"')


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server for the module."""
    with journal_peer(tmp_path_factory.mktemp("fuzz")) as peer:
        yield peer


def test_a_short_fuzz_run_finds_no_crash() -> None:
    """300 fuzzed messages with 3 held calls open: no crash, every held call completes, the bridge
    is healthy."""
    run = subprocess.run(
        [sys.executable, str(FUZZ), "--messages", "300", "--held", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (summary["ok"], summary["crashes"], summary["crash_samples"]) == (True, 0, [])
    assert summary["messages_sent"] == 300
    assert summary["held_completed"] == summary["held_opened"] == 3
    assert summary["health"] == {
        "alive": True,
        "/healthz": 200,
        "/readyz": 200,
        "/metrics": 200,
        "metrics_lines": summary["health"]["metrics_lines"],
        "echo_after": True,
    }
    assert run.returncode == 0


async def test_an_id_with_a_lone_surrogate_is_echoed_escaped(upstream: JournalPeer) -> None:
    """A request id holding a lone surrogate gets its error echoed as a \\u escape, not an
    HTTP 500."""
    async with asyncio.timeout(30), inprocess_bridge(bridge_settings(upstream.url)) as bridge:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": LONE_SURROGATE, "method": "tools/list", "params": []}
        )
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        async with bridge.http.post(bridge.url, data=body, headers=headers) as response:
            raw = await response.read()
    assert response.status == 400
    assert b'"id":"\\ud800"' in raw
    assert json.loads(raw)["error"]["code"] == INVALID_PARAMS
