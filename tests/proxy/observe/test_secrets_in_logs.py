"""No secret ever reaches a log line (issue 6, docs/decisions.md § 5): not the bearer token, a
`requestState`, a requestState key, an `Mcp-Session-Id` value, an elicited answer or a sampled text.

The same full flow runs twice against a real legacy server (`tests/peers/journal_server.py`,
mcp 1.x): through `mrtr-bridge serve --log-level debug` (a subprocess, every line it wrote is
read back), and in-process under `structlog.testing.capture_logs()`, which captures what the code
logs *before* the redaction processor runs, so it proves nothing secret is handed to a logger at
all. The flow covers an elicitation round, a sampling round, a tampered and a replayed state, a
capability refusal and an oversized credential header.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import structlog
from integration.harness import ModernPoster, Peers, bridge_env
from safety_harness import (
    Held,
    JournalPeer,
    accept,
    bridge_settings,
    call,
    error_of,
    inprocess_bridge,
    journal_peer,
    retry,
    sampled,
    start_held,
    text_of,
)

from proxy.auth.keys import new_key

TIMEOUT_S = 30.0


@dataclass
class Secrets:
    """Every secret of one run; `seen` collects the values only known once the flow ran."""

    token: str = field(default_factory=lambda: "tok-" + secrets.token_hex(16))
    elicited: str = field(default_factory=lambda: "elicited-" + secrets.token_hex(8))
    sampled: str = field(default_factory=lambda: "sampled-" + secrets.token_hex(8))
    key: tuple[str, str] = field(default_factory=new_key)
    seen: list[str] = field(default_factory=list)

    @property
    def authorization(self) -> str:
        return f"Bearer {self.token}"

    def all(self) -> list[str]:
        return [self.token, self.elicited, self.sampled, self.key[1], *self.seen]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server for the module."""
    with journal_peer(tmp_path_factory.mktemp("secrets")) as peer:
        yield peer


async def run_flow(http: aiohttp.ClientSession, url: str, found: Secrets) -> None:
    """A full MRTR flow with every kind of secret in it; the states and session ids go to
    `found.seen`."""
    poster = ModernPoster(
        http,
        url,
        capabilities={"elicitation": {"form": {}}, "sampling": {}},
        headers={"Authorization": found.authorization},
    )
    asked = await start_held(poster, "ask", tag="secret-ask")
    found.seen.append(asked.request_state)
    assert (
        text_of(await retry(poster, asked, accept(asked, found.elicited)))
        == f"secret-ask: {found.elicited}"
    )
    # replayed
    assert error_of(await retry(poster, asked, accept(asked, found.elicited)))["code"] == -32602
    sampling = await start_held(poster, "sample", tag="secret-sample")
    found.seen.append(sampling.request_state)
    tampered = Held(
        sampling.tool, sampling.arguments, sampling.request_state[:-3] + "xyz", sampling.keys
    )
    assert (
        error_of(await retry(poster, tampered, sampled(sampling, found.sampled)))["code"] == -32602
    )
    done = await retry(poster, sampling, sampled(sampling, found.sampled))
    assert text_of(done) == f"secret-sample: {found.sampled}"
    for _ in range(2):
        found.seen.append(json.loads(text_of(await call(poster, "whoami")))["session"])
    limited = ModernPoster(http, url, headers={"Authorization": found.authorization})
    # no sampling capability
    assert "refused" in text_of(await call(limited, "sample", tag="secret-refused"))
    oversized = {"Authorization": f"Bearer {found.token}{'x' * 9000}"}
    async with http.post(url, json=poster.body("tools/list"), headers=oversized) as response:
        assert response.status == 400


def assert_clean(text: str, found: Secrets) -> None:
    leaked = [value for value in found.all() if value and value in text]
    assert leaked == [], f"secrets in the logs: {leaked}"


async def test_a_debug_log_of_the_real_bridge_holds_no_secret(
    upstream: JournalPeer, tmp_path: Path
) -> None:
    """`mrtr-bridge serve --log-level debug` logs the whole flow and none of its secrets."""
    found = Secrets()
    kid, key = found.key
    peers = Peers(log_dir=tmp_path)
    env = bridge_env({"held": {"keys": {kid: key}}, "log": {"format": "json"}})
    try:
        bridge = peers.bridge(upstream.url, env=env, args=["--log-level", "debug"])
        async with asyncio.timeout(TIMEOUT_S), aiohttp.ClientSession() as http:
            await run_flow(http, bridge.url, found)
    finally:
        peers.close()
    text = bridge.log_path.read_text(encoding="utf-8")
    events = [json.loads(line)["event"] for line in text.splitlines() if line.startswith("{")]
    assert {
        "held_call_moved",
        "request_state_rejected",
        "front_request_finished",
        "push_refused",
    } <= set(events)
    assert len(found.seen) == 4
    # aiohttp's report of the oversized header keeps only the error class, never the header's text
    assert "aiohttp_bad_request error=" in text and "Bearer" not in text
    assert_clean(text, found)


async def test_nothing_secret_is_handed_to_a_logger(upstream: JournalPeer) -> None:
    """In-process, every event dict the code logs (before redaction) is free of the flow's
    secrets."""
    found = Secrets()
    kid, key = found.key
    settings = bridge_settings(upstream.url, held={"keys": {kid: key}})
    with structlog.testing.capture_logs() as captured:
        async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
            await run_flow(bridge.http, bridge.url, found)
    events = {entry["event"] for entry in captured}
    assert {"held_call_moved", "request_state_rejected", "front_request_finished"} <= events
    assert_clean(repr(captured), found)
    assert_clean(json.dumps(captured, default=repr), found)
