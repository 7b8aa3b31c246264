"""SIGTERM drains within `front.shutdown_grace_s` in total (issue 16, defect 1).

The probe held three calls, started a 60 s tool call and sent SIGTERM: the bridge took twice the
grace, abandoned the held calls only at the very end, and dropped the long call's connection. Here
`mrtr-bridge serve` runs as a real process in front of `tests/peers/journal_server.py` (mcp 1.x),
and the test checks: new connections are refused at once; the held calls' pushes are refused and
their calls cancelled upstream before the grace ends; the long call is answered with the
shutting-down JSON-RPC error and cancelled upstream; the process exits 0 within the grace + 1 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from integration.harness import ModernPoster, Peers, bridge_env
from safety_harness import (
    CAPABILITIES,
    JournalPeer,
    accept,
    bridge_settings,
    call,
    error_of,
    inprocess_bridge,
    journal_peer,
    retry,
    start_held,
)
from test_shutdown import entries_of, refuses_connections

from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR, ShuttingDown

GRACE_S = 3.0
SHUTTING_DOWN = {
    "code": INTERNAL_ERROR,
    "message": ShuttingDown.MESSAGE,
    "data": {"source": BRIDGE_MARKER, "reason": "shutting_down"},
}
TIMEOUT_S = 40.0
HELD_TAGS = ("grace-held-1", "grace-held-2", "grace-held-3")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("shutdown-grace")) as peer:
        yield peer


def held_abandoned(journal: JournalPeer) -> bool:
    """Every held call's push was refused and its call cancelled, as the legacy server saw it."""
    return all(
        entries_of(journal, tag)
        == [
            {"event": "call_started", "tool": "ask"},
            {"event": "elicit_answered", "action": "cancel"},
            {"event": "cancelled"},
        ]
        for tag in HELD_TAGS
    )


async def seconds_until_abandoned(journal: JournalPeer, since: float) -> float:
    """Poll the journal until every held call is abandoned; seconds from `since` (monotonic)."""
    await journal.wait_for(lambda _entries: held_abandoned(journal), timeout=TIMEOUT_S)
    return time.monotonic() - since


async def connections_refused(url: str) -> None:
    """Wait until new connections are refused (one racing the signal may still be answered or
    dropped)."""
    while True:
        try:
            if await refuses_connections(url):
                return
        except aiohttp.ServerDisconnectedError:
            pass
        await asyncio.sleep(0.05)


async def test_sigterm_finishes_within_the_grace(upstream: JournalPeer, tmp_path: Path) -> None:
    """Three held calls and a 60 s call: exit 0 within grace + 1 s, the long call answered with an
    error."""
    peers = Peers(log_dir=tmp_path)
    try:
        bridge = peers.bridge(
            upstream.url, env=bridge_env({"front": {"shutdown_grace_s": GRACE_S}})
        )
        async with asyncio.timeout(TIMEOUT_S), aiohttp.ClientSession() as http:
            poster = ModernPoster(http, bridge.url, capabilities=CAPABILITIES)
            for tag in HELD_TAGS:
                await start_held(poster, "ask", tag=tag, linger=30)
            long_call = asyncio.create_task(
                call(poster, "slow_echo", text="grace-long", seconds=60)
            )
            await upstream.wait_for(
                lambda entries: (
                    {"event": "call_started", "tag": "grace-long", "tool": "slow_echo"} in entries
                )
            )
            sent = time.monotonic()
            os.kill(bridge.popen.pid, signal.SIGTERM)
            abandoned = asyncio.create_task(seconds_until_abandoned(upstream, sent))
            await connections_refused(bridge.url)
            refused_after = time.monotonic() - sent
            status = await asyncio.to_thread(bridge.popen.wait, TIMEOUT_S)
            total = time.monotonic() - sent
            reply = await long_call
            abandoned_after = await abandoned
            await upstream.wait_for(
                lambda entries: {"event": "cancelled", "tag": "grace-long"} in entries
            )
    finally:
        peers.close()
    assert status == 0
    assert total <= GRACE_S + 1.0, f"shutdown took {total:.2f} s with a grace of {GRACE_S} s"
    # "at once" as a bound that a loaded machine cannot break: well before the grace ends
    assert refused_after < GRACE_S, (
        f"new connections were still accepted {refused_after:.2f} s after SIGTERM"
    )
    assert abandoned_after <= GRACE_S, (
        f"held calls were abandoned {abandoned_after:.2f} s after SIGTERM"
    )
    assert reply.status == 200
    assert error_of(reply) == SHUTTING_DOWN
    assert entries_of(upstream, "grace-long") == [
        {"event": "call_started", "tool": "slow_echo"},
        {"event": "cancelled"},
    ]
    log = bridge.log_text(200_000)
    assert "shutdown_cut_off" in log and "client disconnected" not in log


async def test_new_work_and_retries_are_refused_once_shutdown_begins(upstream: JournalPeer) -> None:
    """After shutdown begins, a new call and a held call's retry get the shutting-down error at
    once, and the held call has been abandoned upstream (its push refused, its call cancelled)."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        alice = bridge.poster("Bearer alice")
        held = await start_held(alice, "ask", tag="refused-held", linger=30)
        bridge.engine.begin_shutdown()
        late = await call(alice, "echo", text="late")
        retried = await retry(alice, held, accept(held, "too late"))
        await upstream.wait_for(
            lambda entries: {"event": "cancelled", "tag": "refused-held"} in entries
        )
    assert (late.status, error_of(late)) == (200, SHUTTING_DOWN)
    assert (retried.status, error_of(retried)) == (200, SHUTTING_DOWN)
    assert entries_of(upstream, "refused-held") == [
        {"event": "call_started", "tool": "ask"},
        {"event": "elicit_answered", "action": "cancel"},
        {"event": "cancelled"},
    ]
