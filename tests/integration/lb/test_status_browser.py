"""The status page in a real browser (`make test-lb`: Chromium from Debian, headless): a real
`mrtr-bridge serve` in front of the legacy demo server holds two `book_table` calls (their
elicitation asked, not answered) while Chromium loads `/status`. The page shows them, as the
server's own state says they are (each waits for its form), and nothing secret; a screenshot is
taken (`MRTR_STATUS_SCREENSHOT=docs/status-page.png` keeps it, as the one in docs/ was made)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import aiohttp
import pytest

from proxy.auth.keys import new_key

from ..harness import REPO_ROOT, PeerProcess, Peers, bridge_env
from ..raw_http import ModernPoster

CAPABILITIES = {"elicitation": {"form": {}}}
BROWSER_TIMEOUT_S = 60


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",  # root in CI
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=False,
    )


async def _hold(bridge: PeerProcess, token: str, restaurant: str) -> str:
    async with aiohttp.ClientSession() as http:
        poster = ModernPoster(
            http,
            bridge.url,
            capabilities=CAPABILITIES,
            headers={"Authorization": f"Bearer {token}"},
        )
        reply = await poster.post(
            "tools/call", {"name": "book_table", "arguments": {"restaurant": restaurant}}
        )
    result = reply.response["result"]
    assert result["resultType"] == "input_required"
    [request] = result["inputRequests"].values()
    assert request["method"] == "elicitation/create"  # the demo server waits for its form
    state: str = result["requestState"]
    return state


def test_chromium_shows_the_calls_held_at_that_moment(tmp_path: Path) -> None:
    assert shutil.which("chromium"), "make test-lb needs chromium (apt-get install chromium)"
    kid, key = new_key()
    tokens = ["tok-" + secrets.token_hex(16), "tok-" + secrets.token_hex(16)]
    peers = Peers(log_dir=tmp_path)
    try:
        legacy = peers.legacy("demo_server.py")
        bridge = peers.bridge(legacy.url, env=bridge_env({"held": {"keys": {kid: key}}}))

        async def hold_two() -> list[str]:
            return [
                await _hold(bridge, tokens[0], "Chez Nous"),
                await _hold(bridge, tokens[1], "Le Petit Bistro"),
            ]

        states = asyncio.run(asyncio.wait_for(hold_two(), 60))
        url = f"http://127.0.0.1:{bridge.port}/status"
        dom = _chromium(tmp_path / "profile", "--dump-dom", url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        page = dom.stdout
        assert "<title>mrtr-bridge status</title>" in page
        assert page.count('<td class="waiting_client">waiting_client</td>') == 2
        assert "held calls<b>2</b>" in page
        assert "<td>tools/call book_table</td>" in page  # held calls per tool
        for token in tokens:
            digest = hashlib.sha256(f"authorization:Bearer {token}".encode()).hexdigest()[:12]
            # its row: method, tool, principal, age, round 1
            assert f"<tr><td>tools/call</td><td>book_table</td><td>{digest}</td>" in page
            assert token not in page
        for state in states:
            assert state not in page
        assert legacy.url not in page  # its name is host:port (an operator's page), never the URL
        # the one path on it: the endpoint clients call, in the upstreams' table
        assert page.count("/mcp") == page.count("<td>/mcp</td>") == 1

        shot = tmp_path / "status-page.png"
        taken = _chromium(
            tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,1100", url
        )
        assert taken.returncode == 0, taken.stderr[-2000:]
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        keep = os.environ.get("MRTR_STATUS_SCREENSHOT")
        if keep:
            shutil.copyfile(shot, REPO_ROOT / keep)
    finally:
        peers.close()


@pytest.mark.parametrize("path", ["/status", "/status.json"])
def test_a_browser_elsewhere_cannot_read_it_through_a_rebound_name(
    tmp_path: Path, path: str
) -> None:
    """A page from another origin that rebinds its name to 127.0.0.1 sends its own Host: refused."""
    peers = Peers(log_dir=tmp_path)
    try:
        bridge = peers.bridge(peers.legacy("demo_server.py").url)
        url = f"http://localhost.localdomain.invalid:{bridge.port}{path}"
        resolver = "--host-resolver-rules=MAP localhost.localdomain.invalid 127.0.0.1"
        dom = _chromium(tmp_path / "profile", resolver, "--dump-dom", url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert "Forbidden" in dom.stdout and "held" not in dom.stdout
    finally:
        peers.close()
