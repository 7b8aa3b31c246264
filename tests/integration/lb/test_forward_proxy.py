"""The upstream behind a forward proxy (tinyproxy from Debian, `make test-lb`; docs/operations.md,
"Behind a forward proxy"): the bridge reaches its upstream through the proxy the environment
names, with the proxy's credentials, as a legacy client used directly through the `mcp` Python SDK
does; `no_proxy` and `upstream.proxy = "none"` connect directly.

tinyproxy requires Basic credentials and logs every request it forwards (`Request (file
descriptor N): POST http://...`): the test compares what it forwarded for the client used directly
and for the bridge, modern clients and a relayed legacy client alike.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from translators.protocol.eras import RESULT_COMPLETE, TOOLS_CALL

from ..harness import PeerProcess, Peers, free_port, run_legacy_script
from ..raw_http import ModernPoster
from ..test_check import run_check, run_check_raw

T = 60.0  # bound on each test body, seconds
CREDENTIALS = "bridge:s3cret"
TINYPROXY_CFG = """\
Port {port}
Listen 127.0.0.1
Timeout 600
LogFile "{log}"
LogLevel Connect
MaxClients 200
Allow 127.0.0.1
BasicAuth bridge s3cret
"""


class Proxied:
    """The legacy fixture server and tinyproxy; `forwarded()` reads what tinyproxy forwarded."""

    def __init__(self, directory: Path) -> None:
        self.peers = Peers(log_dir=directory)
        self._log = directory / "tinyproxy.log"
        try:
            self.server: PeerProcess = self.peers.legacy()
            port = free_port()
            config = directory / "tinyproxy.conf"
            config.write_text(TINYPROXY_CFG.format(port=port, log=self._log))
            tinyproxy = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
            self.peers.start("tinyproxy", [tinyproxy, "-d", "-c", str(config)], port)
        except BaseException:
            self.peers.close()
            raise
        self.proxy = f"http://{CREDENTIALS}@127.0.0.1:{port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment that names the proxy for http:// URLs, and no exceptions."""
        return {"http_proxy": self.proxy, "no_proxy": "", **extra}

    def forwarded(self) -> list[str]:
        """The method of each request tinyproxy forwarded to the server, in order."""
        text = self._log.read_bytes().decode(errors="replace") if self._log.exists() else ""
        target = f"{self.server.url} HTTP/1.1"
        return [
            line.split("): ", 1)[1].split(" ", 1)[0]
            for line in text.splitlines()
            if "Request (file descriptor" in line and line.endswith(target)
        ]


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Proxied]:
    proxied = Proxied(tmp_path)
    try:
        yield proxied
    finally:
        proxied.peers.close()


async def _legacy_client(url: str, env: dict[str, str]) -> None:
    report = await run_legacy_script("legacy_client.py", "--url", url, env=env)
    assert report["text"] == 'User response: action=accept, content={"response": "yes"}', report


async def test_a_legacy_client_used_directly_goes_through_the_environments_proxy(
    proxied: Proxied,
) -> None:
    """The ground truth: the `mcp` 1.x SDK (httpx) sends its session through `HTTP_PROXY`, with
    the credentials in it; with the server's host in `NO_PROXY` it connects directly."""
    async with asyncio.timeout(T):
        await _legacy_client(proxied.server.url, proxied.env())
        through = proxied.forwarded()
        await _legacy_client(proxied.server.url, proxied.env(no_proxy="127.0.0.1"))
    assert through[0] == "POST" and {"POST", "GET", "DELETE"} <= set(through), through
    assert proxied.forwarded() == through  # nothing more went through the proxy


async def test_the_bridge_reaches_the_upstream_through_the_same_proxy(proxied: Proxied) -> None:
    """Through the bridge, with the same environment: the modern client's calls and a relayed
    legacy client's session both go through the proxy; the proxy's credentials are used and never
    logged."""
    bridge = proxied.peers.bridge(proxied.server.url, env=proxied.env())
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        poster = ModernPoster(http, bridge.url)
        reply = await poster.post(TOOLS_CALL, {"name": "test_simple_text", "arguments": {}})
        assert reply.response["result"]["resultType"] == RESULT_COMPLETE, reply.response
        modern = proxied.forwarded()
        await _legacy_client(bridge.url, {})  # the client itself knows no proxy
    assert modern[0] == "POST" and {"POST", "GET"} <= set(modern), modern
    relayed = proxied.forwarded()[len(modern) :]
    assert relayed[0] == "POST" and "DELETE" in relayed, relayed
    log = bridge.log_text(limit=10_000_000)
    assert '"event": "upstream_proxy"' in log and "s3cret" not in log


@pytest.mark.parametrize(
    "settings", [{"no_proxy": "127.0.0.1"}, {"MRTR_BRIDGE_UPSTREAM_PROXY": "none"}]
)
async def test_no_proxy_or_proxy_none_connects_directly(
    proxied: Proxied, settings: dict[str, str]
) -> None:
    bridge = proxied.peers.bridge(proxied.server.url, env=proxied.env(**settings))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        poster = ModernPoster(http, bridge.url)
        reply = await poster.post(TOOLS_CALL, {"name": "test_simple_text", "arguments": {}})
    assert reply.response["result"]["resultType"] == RESULT_COMPLETE, reply.response
    assert proxied.forwarded() == []
    assert '"event": "upstream_proxy"' not in bridge.log_text(limit=10_000_000)


def test_check_goes_through_the_proxy_and_names_it(proxied: Proxied) -> None:
    """`check` probes the upstream the way `serve` reaches it, and says through which proxy
    (without its credentials)."""
    status, report = run_check("--upstream", proxied.server.url, env=proxied.env())
    assert (status, report["bridgeable"]) == (0, True), report
    assert report["proxy"] == f"{proxied.proxy.replace(CREDENTIALS + '@', '')} (environment)"
    assert proxied.forwarded()[0] == "POST"
    _, text, _ = run_check_raw(
        "--upstream", proxied.server.url, env=proxied.env(), json_output=False
    )
    assert f"proxy:      {report['proxy']}\n" in text and "s3cret" not in text
