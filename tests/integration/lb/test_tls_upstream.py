"""A legacy server behind TLS with a private CA (HAProxy terminating TLS, `make test-lb`;
docs/operations.md, "An https upstream"): the bridge trusts what `SSL_CERT_FILE` names, as the `mcp`
Python SDK used directly does, and without it `/readyz` says why the upstream cannot be used, in
plain words, without its address.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from translators.protocol.eras import RESULT_COMPLETE, TOOLS_CALL

from ..harness import LEGACY_PYTHON, PEERS_DIR, PeerProcess, Peers, run_legacy_script
from ..raw_http import ModernPoster
from ..test_modern_upstream import readyz
from .tls_front import start_tls_front, write_certificates

T = 60.0  # bound on each test body, seconds
ANSWER = 'User response: action=accept, content={"response": "yes"}'


@dataclass
class TlsUpstream:
    peers: Peers
    ca: Path
    port: int

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/mcp"

    def bridge(self, url: str | None = None, **env: str) -> PeerProcess:
        return self.peers.bridge(url or self.url, env=env)


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[TlsUpstream]:
    peers = Peers(log_dir=tmp_path)
    try:
        ca, server, _client = write_certificates(tmp_path)
        port = start_tls_front(peers, tmp_path, peers.legacy(), server)
        yield TlsUpstream(peers, ca, port)
    finally:
        peers.close()


async def _legacy_client_fails(url: str, *args: str) -> str:
    """The `mcp` 1.x client run with `args` (without any CA of its own by default): what it wrote
    on stderr before it failed."""
    process = await asyncio.create_subprocess_exec(
        str(LEGACY_PYTHON),
        str(PEERS_DIR / "legacy_client.py"),
        "--url",
        url,
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    _, err = await process.communicate()
    assert process.returncode != 0
    return err.decode(errors="replace")


async def _call(bridge: PeerProcess) -> dict[str, object]:
    async with aiohttp.ClientSession() as http:
        reply = await ModernPoster(http, bridge.url).post(
            TOOLS_CALL, {"name": "test_simple_text", "arguments": {}}
        )
    return reply.response


async def test_the_sdk_used_directly_trusts_the_ca_ssl_cert_file_names(tls: TlsUpstream) -> None:
    """The ground truth: without the CA the handshake fails; with `SSL_CERT_FILE` it succeeds."""
    async with asyncio.timeout(T):
        assert "CERTIFICATE_VERIFY_FAILED" in await _legacy_client_fails(tls.url)
        report = await run_legacy_script(
            "legacy_client.py", "--url", tls.url, env={"SSL_CERT_FILE": str(tls.ca)}
        )
    assert report["text"] == ANSWER


async def test_the_bridge_trusts_the_same_ca(tls: TlsUpstream) -> None:
    """With the same `SSL_CERT_FILE` the bridge serves a modern client and relays a legacy
    client's session over TLS."""
    bridge = tls.bridge(SSL_CERT_FILE=str(tls.ca))
    async with asyncio.timeout(T):
        response = await _call(bridge)
        report = await run_legacy_script("legacy_client.py", "--url", bridge.url)
        ready = await readyz(bridge)
    assert response["result"]["resultType"] == RESULT_COMPLETE, response  # type: ignore[index]
    assert report["text"] == ANSWER
    assert ready["status"] == "ready", ready


@pytest.mark.parametrize(
    ("host", "with_ca", "reason"),
    [
        (
            "localhost",
            False,
            "unreachable: its TLS certificate is not signed by a CA the bridge trusts: add the CA "
            "with SSL_CERT_FILE",
        ),
        (
            "127.0.0.1",
            True,
            "unreachable: its TLS certificate is for another host name or address",
        ),
    ],
)
async def test_an_untrusted_certificate_is_named_in_readyz(
    tls: TlsUpstream, host: str, with_ca: bool, reason: str
) -> None:
    """Not "cannot connect": the server answered, and its certificate was refused. The reason
    names neither the upstream's address nor its certificate's names; calls get the usual
    unavailable error."""
    env = {"SSL_CERT_FILE": str(tls.ca)} if with_ca else {}
    bridge = tls.bridge(f"https://{host}:{tls.port}/mcp", **env)
    async with asyncio.timeout(T):
        ready = await readyz(bridge)
        response = await _call(bridge)
    assert ready["status"] == "unavailable"
    assert ready["checks"]["upstream"] == reason  # type: ignore[index]
    assert response["error"]["message"] == "The upstream server is unavailable"  # type: ignore[index]


@dataclass
class MutualTls:
    peers: Peers
    ca: Path
    client: Path
    url: str


@pytest.fixture
def mutual(tmp_path: Path) -> Iterator[MutualTls]:
    """The legacy server behind TLS that requires a client certificate signed by the CA."""
    peers = Peers(log_dir=tmp_path)
    try:
        ca, server, client = write_certificates(tmp_path)
        port = start_tls_front(peers, tmp_path, peers.legacy(), server, client_ca=ca)
        yield MutualTls(peers, ca, client, f"https://localhost:{port}/mcp")
    finally:
        peers.close()


async def test_mutual_tls_as_the_sdk_presents_its_certificate(mutual: MutualTls) -> None:
    """The ground truth: the SDK with its client certificate (its `httpx_client_factory`) is
    served; without one the server ends the handshake. The bridge with `upstream.tls_ca_file`
    and `upstream.tls_client_cert` serves a modern client and relays a legacy session; without
    the certificate `/readyz` says the handshake failed."""
    tls = {"MRTR_BRIDGE_UPSTREAM_TLS_CA_FILE": str(mutual.ca)}
    bridge = mutual.peers.bridge(
        mutual.url, env={**tls, "MRTR_BRIDGE_UPSTREAM_TLS_CLIENT_CERT": str(mutual.client)}
    )
    without = mutual.peers.bridge(mutual.url, env=tls)
    async with asyncio.timeout(T):
        direct = await run_legacy_script(
            "legacy_client.py",
            "--url",
            mutual.url,
            "--ca",
            str(mutual.ca),
            "--client-cert",
            str(mutual.client),
        )
        refused = await _legacy_client_fails(mutual.url, "--ca", str(mutual.ca))
        response = await _call(bridge)
        relayed = await run_legacy_script("legacy_client.py", "--url", bridge.url)
        ready, not_ready = await readyz(bridge), await readyz(without)
    assert direct["text"] == ANSWER and relayed["text"] == ANSWER
    assert "httpx.ReadError" in refused, refused  # the server's alert ends the first read
    assert response["result"]["resultType"] == RESULT_COMPLETE, response  # type: ignore[index]
    assert ready["status"] == "ready", ready
    # A TLS 1.3 server asks for the certificate after the handshake: its alert either reaches the
    # bridge first (named) or closes the connection under the request's first write.
    assert not_ready["checks"]["upstream"] in (
        "unreachable: it asks for a TLS client certificate: set upstream.tls_client_cert",
        "unreachable: it closed the connection without answering",
    ), not_ready
