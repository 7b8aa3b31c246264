"""Issue 5 over stdio: the modern stdio front (`mrtr-bridge stdio`) and legacy stdio upstreams.

Front: the bridge is a child speaking JSON lines; several requests are in flight at once on one
stdin, and `notifications/cancelled` is the cancellation. Upstream: `mrtr-bridge serve` launches
`tests/peers/streams_server.py --transport stdio` per upstream session; every process appends to
one journal file. Helpers (streams, journal, bridge log, expected messages): `streams_helpers.py`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from schema_check import assert_valid
from structlog.testing import capture_logs

from config.settings import Settings, UpstreamSettings
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_SUBSCRIPTION_ID,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
)
from translators.wire.jsonrpc import JsonObject

from .harness import PeerProcess, Peers, bridge_env, legacy_stdio_command
from .streams_helpers import (
    FORM_CAPABILITIES,
    SERVER,
    WAIT_S,
    Journal,
    SseStream,
    StdioBridge,
    acknowledgement,
    assert_closing_cancels,
    call,
    cancel_notices,
    cancelled,
    in_process_bridge,
    listen_params,
    logs_from,
    poster_for,
    progress,
    request,
    tagged,
    text_of,
    trigger,
    wait_logged,
)

UPDATED = "notifications/resources/updated"


# ---- the stdio front -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    return Journal(tmp_path_factory.mktemp("streams-stdio") / "journal.jsonl")


@pytest.fixture(scope="module")
def streams_legacy(module_peers: Peers, journal: Journal) -> PeerProcess:
    """The streams server over HTTP, behind the stdio front."""
    return module_peers.legacy(SERVER, "--journal", str(journal.path))


@pytest.fixture
async def stdio_bridge(streams_legacy: PeerProcess, tmp_path: Path) -> AsyncIterator[StdioBridge]:
    async with StdioBridge.running(streams_legacy.url, tmp_path / "bridge-stdio.log") as bridge:
        yield bridge


def _is_log(message: JsonObject, tag: str) -> bool:
    return (
        message.get("method") == "notifications/message"
        and message["params"]["data"].get("tag") == tag
    )


def _is_progress(message: JsonObject, token: Any) -> bool:
    return (
        message.get("method") == "notifications/progress"
        and message["params"]["progressToken"] == token
    )


async def test_stdio_front_concurrent_requests_get_their_own_progress_and_logs(
    stdio_bridge: StdioBridge, journal: Journal
) -> None:
    """Five requests in flight on one stdin: logs at each one's level (none without), progress per
    token."""
    stdio_bridge.send(
        request(
            1, TOOLS_CALL, call("log_levels", {"tag": "sf-debug"}), **{META_LOG_LEVEL: "debug"}
        ),
        request(
            2, TOOLS_CALL, call("log_levels", {"tag": "sf-error"}), **{META_LOG_LEVEL: "error"}
        ),
        request(3, TOOLS_CALL, call("log_levels", {"tag": "sf-none"})),
        request(4, TOOLS_CALL, call("progress", {"steps": 3}), **{META_PROGRESS_TOKEN: "p4"}),
        request("five", TOOLS_CALL, call("progress", {"steps": 2}), **{META_PROGRESS_TOKEN: 5}),
    )
    await stdio_bridge.until_responses(1, 2, 3, 4, "five")
    lines = stdio_bridge.lines
    assert [m for m in lines if _is_log(m, "sf-debug")] == logs_from("debug", "sf-debug")
    assert [m for m in lines if _is_log(m, "sf-error")] == logs_from("error", "sf-error")
    assert [m for m in lines if _is_log(m, "sf-none")] == []
    assert [m for m in lines if _is_progress(m, "p4")] == [
        progress("p4", n, 3, f"step {n}") for n in (1, 2, 3)
    ]
    assert [m for m in lines if _is_progress(m, 5)] == [
        progress(5, n, 2, f"step {n}") for n in (1, 2)
    ]
    assert len(lines) == 5 + 8 + 4 + 3 + 2  # five responses and nothing but the notifications above
    owned: list[tuple[Any, list[JsonObject]]] = [
        (1, [m for m in lines if _is_log(m, "sf-debug")]),
        (2, [m for m in lines if _is_log(m, "sf-error")]),
        (4, [m for m in lines if _is_progress(m, "p4")]),
        ("five", [m for m in lines if _is_progress(m, 5)]),
    ]
    for request_id, notifications in owned:  # each request's notifications come before its answer
        answered = lines.index(stdio_bridge.response(request_id))
        assert all(lines.index(m) < answered for m in notifications), (
            f"{request_id}: notified after its answer"
        )
    # Over an HTTP upstream these calls (no push capabilities) may share a legacy session: its level
    # is raised to the most verbose asked for, never lowered, and only levels that were asked are
    # set.
    sent = {
        tag: journal.entries("log_sent", tag=tag)[0]["session"]
        for tag in ("sf-debug", "sf-error", "sf-none")
    }
    assert "debug" in [e["level"] for e in journal.entries("set_level", session=sent["sf-debug"])]
    assert {e["level"] for e in journal.entries("set_level", session=sent["sf-error"])} & {
        "debug",
        "error",
    }
    assert {e["level"] for e in journal.entries("set_level")} <= {"debug", "error"}


async def test_stdio_front_cancel_stops_the_legacy_call_and_its_messages(
    stdio_bridge: StdioBridge, journal: Journal
) -> None:
    """notifications/cancelled reaches the legacy call; nothing more is written for the cancelled
    request."""
    arguments = {"steps": 100, "interval": 0.05, "tag": "sf-cancel"}
    stdio_bridge.send(
        request(
            "slow-1",
            TOOLS_CALL,
            call("slow", arguments),
            **{META_PROGRESS_TOKEN: "slow-tok", META_LOG_LEVEL: "info"},
        )
    )
    while not _is_progress(await stdio_bridge.line(), "slow-tok"):
        pass
    stdio_bridge.send(cancelled("slow-1"), request(2, TOOLS_CALL, call("progress", {"steps": 1})))
    await stdio_bridge.until_responses(2)
    after_cancel = len(stdio_bridge.lines)
    (stopped,) = await journal.wait_for("slow_cancelled", tag="sf-cancel")
    assert cancel_notices(journal, stopped) == [str(stopped["request_id"])]
    stdio_bridge.send(request(3, TOOLS_CALL, call("progress", {"steps": 1})))
    await stdio_bridge.until_responses(3)
    slow_lines = [
        m
        for m in stdio_bridge.lines
        if m.get("id") == "slow-1" or _is_progress(m, "slow-tok") or _is_log(m, "sf-cancel")
    ]
    assert [
        m for m in slow_lines if m.get("id") == "slow-1"
    ] == []  # no answer at all for a cancelled request
    assert [m for m in stdio_bridge.lines[after_cancel:] if m in slow_lines] == []
    assert journal.entries("slow_finished", tag="sf-cancel") == []


async def test_stdio_front_cancelling_a_retry_cancels_the_legacy_call(
    stdio_bridge: StdioBridge, journal: Journal
) -> None:
    """A cancelled MRTR retry cancels the legacy call it resumed, and gets no answer."""
    arguments = {"steps": 100, "interval": 0.05, "tag": "sf-retry"}
    stdio_bridge.send(
        request(
            "r1",
            TOOLS_CALL,
            call("elicit_then_slow", arguments),  # round 1 fixes the token
            **{META_CLIENT_CAPABILITIES: FORM_CAPABILITIES, META_PROGRESS_TOKEN: "round-1"},
        )
    )
    await stdio_bridge.until_responses("r1")
    result = stdio_bridge.response("r1")["result"]
    (key,) = result["inputRequests"]
    retry = {
        **call("elicit_then_slow", arguments),
        "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "x"}}},
    }
    stdio_bridge.send(
        request(
            "r2",
            TOOLS_CALL,
            retry,
            **{META_CLIENT_CAPABILITIES: FORM_CAPABILITIES, META_PROGRESS_TOKEN: "retry-tok"},
        )
    )
    while not _is_progress(await stdio_bridge.line(), "retry-tok"):
        pass
    stdio_bridge.send(cancelled("r2"))
    (stopped,) = await journal.wait_for("slow_cancelled", tag="sf-retry")
    assert cancel_notices(journal, stopped) == [str(stopped["request_id"])]
    stdio_bridge.send(request(3, TOOLS_CALL, call("progress", {"steps": 1})))
    await stdio_bridge.until_responses(3)
    assert [m for m in stdio_bridge.lines if m.get("id") == "r2"] == []


async def test_stdio_front_listen_is_acknowledged_tagged_and_cancelled(
    stdio_bridge: StdioBridge, journal: Journal
) -> None:
    """A stdio listen: acknowledgement first, tagged notifications; its cancellation unsubscribes
    upstream."""
    uri = "streams://doc/stdio-front"
    wanted = {"toolsListChanged": True, "resourceSubscriptions": [uri]}
    stdio_bridge.send(request("L1", SUBSCRIPTIONS_LISTEN, listen_params(**wanted)))
    assert await stdio_bridge.line() == acknowledgement("L1", wanted)
    stdio_bridge.send(
        request(2, TOOLS_CALL, call("tools_changed")),
        request(3, TOOLS_CALL, call("touch", {"uri": uri})),
        request(4, TOOLS_CALL, call("touch", {"uri": "streams://doc/stdio-front-other"})),
    )
    await stdio_bridge.until_responses(2, 3, 4)
    while len([m for m in stdio_bridge.lines if "method" in m]) < 3:
        await stdio_bridge.line()
    notifications = [m for m in stdio_bridge.lines if "method" in m]
    # calls 2 and 3 run at once (the stdio front does not serialize them): either may notify first
    assert sorted(notifications[1:], key=lambda m: m["method"]) == [
        tagged(UPDATED, "L1", uri=uri),
        tagged("notifications/tools/list_changed", "L1"),
    ]
    assert len(journal.entries("subscribe", uri=uri)) == 1
    stdio_bridge.send(cancelled("L1"))
    await journal.wait_for("unsubscribe", uri=uri)
    stdio_bridge.send(request(5, TOOLS_CALL, call("tools_changed")))
    await stdio_bridge.until_responses(5)
    assert [
        m for m in stdio_bridge.lines if m.get("id") == "L1"
    ] == []  # a cancelled listen is not answered
    # nothing after the cancellation
    assert len([m for m in stdio_bridge.lines if "method" in m]) == 3


# ---- legacy stdio upstreams ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream_journal(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    return Journal(tmp_path_factory.mktemp("streams-upstream") / "journal.jsonl")


@pytest.fixture(scope="module")
def stdio_upstream(module_peers: Peers, upstream_journal: Journal) -> PeerProcess:
    """`mrtr-bridge serve` whose upstream is the streams server over stdio (a process per
    session)."""
    return module_peers.bridge_stdio(SERVER, "--journal", str(upstream_journal.path))


async def test_stdio_upstream_progress_across_rounds(
    stdio_upstream: PeerProcess, http: aiohttp.ClientSession
) -> None:
    """Over a stdio upstream, each round's progress goes to that round under its own token, none
    elsewhere."""
    poster = poster_for(http, stdio_upstream.url, "su-progress", capabilities=FORM_CAPABILITIES)
    first = await poster.post(TOOLS_CALL, call("progress_elicit", **{META_PROGRESS_TOKEN: "su-1"}))
    assert first.notifications == [progress("su-1", 1, 2, "before")]
    result = first.response["result"]
    assert result["resultType"] == RESULT_INPUT_REQUIRED
    (key,) = result["inputRequests"]
    retry = {
        **call("progress_elicit", **{META_PROGRESS_TOKEN: "su-2"}),
        "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "Cy"}}},
    }
    second, other = await asyncio.gather(
        poster.post(TOOLS_CALL, retry),
        poster.post(
            TOOLS_CALL, call("progress", {"steps": 2}, **{META_PROGRESS_TOKEN: "su-other"})
        ),
    )
    assert second.notifications == [progress("su-2", 2, 2, "after")]
    assert other.notifications == [progress("su-other", n, 2, f"step {n}") for n in (1, 2)]
    assert text_of(second) == "Hello, Cy!"


async def test_stdio_upstream_logs_at_each_requests_level(
    stdio_upstream: PeerProcess, upstream_journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Concurrent calls over stdio upstreams asking debug and error, and one not asking, get exactly
    that."""
    poster = poster_for(http, stdio_upstream.url, "su-logs")
    verbose, quiet, silent = await asyncio.gather(
        poster.post(
            TOOLS_CALL, call("log_levels", {"tag": "su-debug"}, **{META_LOG_LEVEL: "debug"})
        ),
        poster.post(
            TOOLS_CALL, call("log_levels", {"tag": "su-error"}, **{META_LOG_LEVEL: "error"})
        ),
        poster.post(TOOLS_CALL, call("log_levels", {"tag": "su-none"})),
    )
    assert verbose.notifications == logs_from("debug", "su-debug")
    assert quiet.notifications == logs_from("error", "su-error")
    assert silent.notifications == []
    pids = {
        tag: upstream_journal.entries("log_sent", tag=tag)[0]["pid"]
        for tag in ("su-debug", "su-error", "su-none")
    }
    assert [e["level"] for e in upstream_journal.entries("set_level", pid=pids["su-debug"])] == [
        "debug"
    ]
    assert [e["level"] for e in upstream_journal.entries("set_level", pid=pids["su-error"])] == [
        "error"
    ]
    assert upstream_journal.entries("set_level", pid=pids["su-none"]) == []


async def test_stdio_upstream_sees_the_cancellation_of_a_closed_stream(
    stdio_upstream: PeerProcess, upstream_journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Closing the response stream sends notifications/cancelled down the legacy process's stdin."""
    await assert_closing_cancels(http, stdio_upstream.url, upstream_journal, "su-cancel")


async def test_stdio_upstream_listeners_filters_and_reference_counting(
    stdio_upstream: PeerProcess, upstream_journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Two listeners on one URI over a stdio upstream: their own kinds each, one subscribe, one
    unsubscribe."""
    poster = poster_for(http, stdio_upstream.url, "su-listen")
    uri = "streams://doc/su-listen"
    first = await SseStream.open(
        poster,
        SUBSCRIPTIONS_LISTEN,
        listen_params(toolsListChanged=True, resourceSubscriptions=[uri]),
        request_id="su-1",
    )
    second = await SseStream.open(
        poster,
        SUBSCRIPTIONS_LISTEN,
        listen_params(promptsListChanged=True, resourceSubscriptions=[uri]),
        request_id=2,
    )
    try:
        assert await first.message() == acknowledgement(
            "su-1", {"toolsListChanged": True, "resourceSubscriptions": [uri]}
        )
        assert await second.message() == acknowledgement(
            2, {"promptsListChanged": True, "resourceSubscriptions": [uri]}
        )
        assert len(upstream_journal.entries("subscribe", uri=uri)) == 1
        for tool, arguments in [
            ("tools_changed", {}),
            ("prompts_changed", {}),
            ("touch", {"uri": uri}),
        ]:
            await trigger(poster, tool, arguments)
        assert [await first.message(), await first.message()] == [
            tagged("notifications/tools/list_changed", "su-1"),
            tagged(UPDATED, "su-1", uri=uri),
        ]
        assert [await second.message(), await second.message()] == [
            tagged("notifications/prompts/list_changed", 2),
            tagged(UPDATED, 2, uri=uri),
        ]
        await first.close()
        await wait_logged(
            stdio_upstream, "front_request_finished", request_id="su-1", cancelled=True
        )
        assert upstream_journal.entries("unsubscribe", uri=uri) == []
    finally:
        await first.close()
        await second.close()
    await wait_logged(
        stdio_upstream, "front_request_finished", request_id=2, method=SUBSCRIPTIONS_LISTEN
    )
    assert len(upstream_journal.entries("unsubscribe", uri=uri)) == 1


async def test_a_dead_stdio_upstream_is_replaced_and_subscribed_again(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The listener's process dies: a new one is subscribed (and logged), updates flow, its leaving
    unsubscribes."""
    journal = Journal(tmp_path / "journal.jsonl")
    uri = "streams://doc/su-loss"
    settings = Settings(
        upstream=UpstreamSettings(
            command=legacy_stdio_command(SERVER, "--journal", str(journal.path))
        )
    )
    with capture_logs() as logs:
        async with in_process_bridge(settings, keepalive_s=15.0) as (url, engine):
            poster = poster_for(http, url, "su-loss")
            listener = await SseStream.open(
                poster,
                SUBSCRIPTIONS_LISTEN,
                listen_params(toolsListChanged=True, resourceSubscriptions=[uri]),
                request_id="loss-1",
            )
            try:
                await listener.message()
                (before,) = journal.entries("subscribe", uri=uri)
                os.kill(before["pid"], signal.SIGKILL)
                after = (await journal.wait_for("subscribe", count=2, uri=uri))[1]
                assert after["pid"] != before["pid"]
                assert await listener.message() == tagged(
                    "notifications/tools/list_changed", "loss-1"
                )
                assert await trigger(poster, "touch", {"uri": uri}) == "notified 1"
                assert await listener.message() == tagged(UPDATED, "loss-1", uri=uri)
            finally:
                await listener.close()
            await _wait_for_log(logs, "front_request_finished", request_id="loss-1")
            unsubscribed = journal.entries("unsubscribe", uri=uri, pid=after["pid"])
            stale = dict(engine.listens._uri_refs)
    assert [
        entry["resources"] for entry in logs if entry["event"] == "listen_upstream_reestablished"
    ] == [1]
    assert len(unsubscribed) == 1, (
        "the replacement process was never unsubscribed when the listener left"
    )
    assert stale == {}, f"reference counts left behind: {stale}"


async def _wait_for_log(logs: list[MutableMapping[str, Any]], event: str, **match: Any) -> None:
    async with asyncio.timeout(WAIT_S):
        while not any(
            e["event"] == event and all(e.get(k) == v for k, v in match.items()) for e in logs
        ):
            await asyncio.sleep(0.05)


async def test_a_listener_whose_upstream_cannot_be_replaced_is_closed_gracefully(
    peers: Peers, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The listener's process dies and no replacement starts: the stream ends with the closing
    result."""
    journal = Journal(tmp_path / "journal.jsonl")
    # only one process may ever start here
    no_spares = bridge_env({"upstream": {"spare_processes": 0}})
    bridge = peers.bridge_stdio(
        SERVER,
        "--journal",
        str(journal.path),
        "--single-life",
        str(tmp_path / "started"),
        env=no_spares,
    )
    listener = await SseStream.open(
        poster_for(http, bridge.url, "su-gone"),
        SUBSCRIPTIONS_LISTEN,
        listen_params(toolsListChanged=True),
        request_id="gone-1",
    )
    try:
        assert await listener.message() == acknowledgement("gone-1", {"toolsListChanged": True})
        (process,) = journal.entries("process_started")
        os.kill(process["pid"], signal.SIGKILL)
        rest = [item for item in await listener.rest() if isinstance(item, dict)]
    finally:
        await listener.close()
    # docs/decisions.md § 14: upstream gone -> closing result
    assert len(rest) == 1 and "error" not in rest[0], rest
    assert rest[0]["id"] == "gone-1"
    assert rest[0]["result"]["resultType"] == RESULT_COMPLETE
    assert rest[0]["result"]["_meta"][META_SUBSCRIPTION_ID] == "gone-1"
    assert_valid(rest[0], "SubscriptionsListenResultResponse", "modern")
