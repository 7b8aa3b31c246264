"""Issue 5 over the HTTP front: progress, logging, cancellation and `subscriptions/listen` with real
peers.

`tests/peers/streams_server.py` (mcp 1.x, its journal in a file) behind `mrtr-bridge serve`; raw
modern POSTs read as they stream (`SseStream`), so every notification, comment and final message is
asserted exactly and in order. Each test uses its own `Authorization` value, hence its own
principal: its own upstream sessions and listeners on the shared bridge. Helpers:
`streams_helpers.py`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import aiohttp
import pytest
from schema_check import assert_valid

from config.settings import Settings, UpstreamSettings
from translators.protocol.eras import (
    LOG_LEVELS,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
)

from .harness import Bridged, Peers
from .streams_helpers import (
    ABSENCE_S,
    FORM_CAPABILITIES,
    SERVER,
    WAIT_S,
    Comment,
    Journal,
    SseStream,
    acknowledgement,
    assert_closing_cancels,
    call,
    cancel_notices,
    in_process_bridge,
    listen_params,
    logs_from,
    poster_for,
    progress,
    tagged,
    text_of,
    trigger,
    wait_logged,
)

# ---- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    return Journal(tmp_path_factory.mktemp("streams") / "journal.jsonl")


@pytest.fixture(scope="module")
def streams(module_peers: Peers, journal: Journal) -> Bridged:
    """The streams server (HTTP) behind `mrtr-bridge serve`, shared by this module's tests."""
    legacy = module_peers.legacy(SERVER, "--journal", str(journal.path))
    return Bridged(legacy, module_peers.bridge(legacy.url))


# ---- progress ------------------------------------------------------------------------------------


async def test_progress_goes_to_its_own_request_with_its_own_token(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """Two concurrent calls each get exactly their own progress, under their own token (string or
    integer)."""
    poster = poster_for(http, streams.url, "progress-one-round")
    first, second = await asyncio.gather(
        poster.post(TOOLS_CALL, call("progress", {"steps": 3}, **{META_PROGRESS_TOKEN: "alpha"})),
        poster.post(TOOLS_CALL, call("progress", {"steps": 2}, **{META_PROGRESS_TOKEN: 7})),
    )
    assert first.notifications == [progress("alpha", n, 3, f"step {n}") for n in (1, 2, 3)]
    assert second.notifications == [progress(7, n, 2, f"step {n}") for n in (1, 2)]
    assert (text_of(first), text_of(second)) == ("done 3", "done 2")
    for notification in first.notifications + second.notifications:
        assert_valid(notification, "ProgressNotification", "modern")


async def test_progress_across_rounds_carries_each_legs_token(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """Progress before a push goes to round 1 under its token, progress after it to the retry under
    the retry's."""
    poster = poster_for(http, streams.url, "progress-rounds", capabilities=FORM_CAPABILITIES)
    first = await poster.post(TOOLS_CALL, call("progress_elicit", **{META_PROGRESS_TOKEN: "leg-1"}))
    assert first.notifications == [progress("leg-1", 1, 2, "before")]
    result = first.response["result"]
    assert result["resultType"] == RESULT_INPUT_REQUIRED
    (key,) = result["inputRequests"]
    retry = {
        **call("progress_elicit", **{META_PROGRESS_TOKEN: "leg-2"}),
        "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "Ann"}}},
    }
    second, other = await asyncio.gather(
        poster.post(TOOLS_CALL, retry),
        poster.post(TOOLS_CALL, call("progress", {"steps": 2}, **{META_PROGRESS_TOKEN: "other"})),
    )
    assert second.notifications == [progress("leg-2", 2, 2, "after")]
    assert other.notifications == [progress("other", n, 2, f"step {n}") for n in (1, 2)]
    assert text_of(second) == "Hello, Ann!"


async def test_progress_is_dropped_for_a_retry_without_a_token(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """A retry that carries no progressToken gets no progress, though the upstream call still
    reports it."""
    poster = poster_for(http, streams.url, "progress-no-token", capabilities=FORM_CAPABILITIES)
    first = await poster.post(
        TOOLS_CALL, call("progress_elicit", **{META_PROGRESS_TOKEN: "only-round-1"})
    )
    result = first.response["result"]
    (key,) = result["inputRequests"]
    second = await poster.post(
        TOOLS_CALL,
        {
            **call("progress_elicit"),
            "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"name": "Bo"}}},
        },
    )
    assert first.notifications == [progress("only-round-1", 1, 2, "before")]
    assert second.notifications == []
    assert second.headers["content-type"].startswith("application/json")
    assert text_of(second) == "Hello, Bo!"


# ---- logging -------------------------------------------------------------------------------------


async def test_logs_reach_only_requests_that_asked_at_their_level(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Concurrent calls asking debug, error and nothing get debug+, error+ and no log; upstream sees
    setLevel."""
    poster = poster_for(http, streams.url, "logs-concurrent")
    verbose, quiet, silent = await asyncio.gather(
        poster.post(
            TOOLS_CALL, call("log_levels", {"tag": "lc-debug"}, **{META_LOG_LEVEL: "debug"})
        ),
        poster.post(
            TOOLS_CALL, call("log_levels", {"tag": "lc-error"}, **{META_LOG_LEVEL: "error"})
        ),
        poster.post(TOOLS_CALL, call("log_levels", {"tag": "lc-none"})),
    )
    assert verbose.notifications == logs_from("debug", "lc-debug")
    assert quiet.notifications == logs_from("error", "lc-error")
    assert silent.notifications == []
    assert silent.headers["content-type"].startswith("application/json")
    for notification in verbose.notifications:
        assert_valid(notification, "LoggingMessageNotification", "modern")
    sent = {e["tag"]: e for e in journal.entries("log_sent") if e["tag"].startswith("lc-")}
    # Calls without push capabilities may share one legacy session: its level is raised to the most
    # verbose level asked for (never lowered), and each request is filtered to its own level.
    levels_set: dict[str, list[str]] = {}
    for entry in journal.entries("set_level"):
        levels_set.setdefault(entry["session"], []).append(entry["level"])
    assert "debug" in levels_set[sent["lc-debug"]["session"]]
    error_session_levels = levels_set[sent["lc-error"]["session"]]
    assert any(
        LOG_LEVELS.index(level) <= LOG_LEVELS.index("error") for level in error_session_levels
    )
    # only levels asked
    assert {level for levels in levels_set.values() for level in levels} <= {
        "debug",
        "error",
    }
    # the server logged anyway (the shared session's level): the bridge dropped them
    assert sent["lc-none"]["levels"]


async def test_a_retry_asking_a_lower_log_level_gets_it(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Round 1 asks error, its retry asks debug: the legacy session is set to debug for the retry's
    logs."""
    poster = poster_for(http, streams.url, "logs-retry", capabilities=FORM_CAPABILITIES)
    first = await poster.post(
        TOOLS_CALL, call("log_elicit", {"tag": "lr"}, **{META_LOG_LEVEL: "error"})
    )
    assert first.notifications == logs_from("error", "lr before")
    result = first.response["result"]
    (key,) = result["inputRequests"]
    retry = {
        **call("log_elicit", {"tag": "lr"}, **{META_LOG_LEVEL: "debug"}),
        "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "x"}}},
    }
    second = await poster.post(TOOLS_CALL, retry)
    session = journal.entries("log_sent", tag="lr before")[0]["session"]
    assert [e["level"] for e in journal.entries("set_level", session=session)] == ["error", "debug"]
    assert second.notifications == logs_from("debug", "lr after")


# ---- cancellation --------------------------------------------------------------------------------


async def test_closing_the_stream_cancels_the_legacy_call(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """A client closing its response stream makes the bridge send notifications/cancelled for the
    legacy call."""
    await assert_closing_cancels(http, streams.url, journal, "cancel-http")
    await wait_logged(
        streams.bridge, "front_request_finished", request_id="cancel-http", cancelled=True
    )


async def test_closing_a_retry_stream_cancels_the_legacy_call(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """An MRTR retry whose stream the client closes while the legacy call runs on cancels
    that call."""
    poster = poster_for(http, streams.url, "cancel-retry", capabilities=FORM_CAPABILITIES)
    arguments = {"steps": 100, "interval": 0.1, "tag": "cancel-retry"}
    # the upstream call's progress token is fixed by round 1: it must ask for progress too
    first = await poster.post(
        TOOLS_CALL, call("elicit_then_slow", arguments, **{META_PROGRESS_TOKEN: "round-1"})
    )
    result = first.response["result"]
    (key,) = result["inputRequests"]
    retry = {
        **call("elicit_then_slow", arguments, **{META_PROGRESS_TOKEN: "retry-slow"}),
        "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "x"}}},
    }
    stream = await SseStream.open(poster, TOOLS_CALL, retry, request_id="cancel-retry")
    assert await stream.message() == progress("retry-slow", 1, 100, "cancel-retry 1")
    await stream.close()
    (cancelled,) = await journal.wait_for("slow_cancelled", tag="cancel-retry")
    assert cancel_notices(journal, cancelled) == [str(cancelled["request_id"])]
    assert journal.entries("slow_finished", tag="cancel-retry") == []


# ---- subscriptions/listen ------------------------------------------------------------------------


async def test_two_listeners_get_exactly_what_they_asked_for(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """Each listener is acknowledged first with its honoured filter, then gets only its own kinds,
    all tagged."""
    poster = poster_for(http, streams.url, "two-listeners")
    first_filter = {
        "toolsListChanged": True,
        "resourceSubscriptions": ["streams://doc/tl-a", "streams://doc/tl-s"],
    }
    second_filter = {
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["streams://doc/tl-a", "streams://doc/tl-b", "streams://doc/tl-s"],
    }
    first = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(**first_filter), request_id="tl-1"
    )
    second = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(**second_filter), request_id=22
    )
    try:
        assert await first.message() == acknowledgement("tl-1", first_filter)
        assert await second.message() == acknowledgement(22, second_filter)
        for tool, arguments in [
            ("tools_changed", {}),
            ("prompts_changed", {}),
            ("resources_changed", {}),
            ("touch", {"uri": "streams://doc/tl-a"}),
            ("touch", {"uri": "streams://doc/tl-b"}),
            ("touch", {"uri": "streams://doc/tl-other"}),
            ("touch", {"uri": "streams://doc/tl-s"}),
        ]:
            await trigger(poster, tool, arguments)
        sentinel = "streams://doc/tl-s"
        got_first = await first.messages_until(
            lambda got: bool(got) and got[-1]["params"].get("uri") == sentinel
        )
        got_second = await second.messages_until(
            lambda got: bool(got) and got[-1]["params"].get("uri") == sentinel
        )
    finally:
        await first.close()
        await second.close()
    updated = "notifications/resources/updated"
    assert got_first == [
        tagged("notifications/tools/list_changed", "tl-1"),
        tagged(updated, "tl-1", uri="streams://doc/tl-a"),
        tagged(updated, "tl-1", uri=sentinel),
    ]
    assert got_second == [
        tagged("notifications/prompts/list_changed", 22),
        tagged("notifications/resources/list_changed", 22),
        tagged(updated, 22, uri="streams://doc/tl-a"),
        tagged(updated, 22, uri="streams://doc/tl-b"),
        tagged(updated, 22, uri=sentinel),
    ]
    assert_valid(first.items[0], "SubscriptionsAcknowledgedNotification", "modern")
    assert_valid(got_first[0], "ToolListChangedNotification", "modern")
    assert_valid(got_second[0], "PromptListChangedNotification", "modern")
    assert_valid(got_second[1], "ResourceListChangedNotification", "modern")
    assert_valid(got_second[2], "ResourceUpdatedNotification", "modern")


async def test_resource_subscriptions_are_reference_counted_upstream(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """Two listeners on one URI: one resources/subscribe; the first leaving unsubscribes nothing,
    the last once."""
    poster = poster_for(http, streams.url, "refcount")
    uri = "streams://doc/refcount"
    wanted = {"resourceSubscriptions": [uri]}
    first = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(**wanted), request_id="rc-1"
    )
    second = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(**wanted), request_id="rc-2"
    )
    try:
        assert await first.message() == acknowledgement("rc-1", wanted)
        assert await second.message() == acknowledgement("rc-2", wanted)
        assert len(journal.entries("subscribe", uri=uri)) == 1
        await first.close()
        await wait_logged(
            streams.bridge, "front_request_finished", request_id="rc-1", cancelled=True
        )
        assert journal.entries("unsubscribe", uri=uri) == []
        assert await trigger(poster, "touch", {"uri": uri}) == "notified 1"
        assert await second.message() == tagged("notifications/resources/updated", "rc-2", uri=uri)
    finally:
        await first.close()
        await second.close()
    await wait_logged(streams.bridge, "front_request_finished", request_id="rc-2", cancelled=True)
    assert len(journal.entries("subscribe", uri=uri)) == 1
    assert len(journal.entries("unsubscribe", uri=uri)) == 1


async def test_a_refused_subscription_leaves_other_listeners_subscribed(
    streams: Bridged, journal: Journal, http: aiohttp.ClientSession
) -> None:
    """A URI the upstream refuses is left out of the acknowledgement; other listeners keep
    theirs."""
    poster = poster_for(http, streams.url, "refused")
    uri = "streams://zz/refused-neighbour"
    kept = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(resourceSubscriptions=[uri]), request_id="rf-1"
    )
    partial = await SseStream.open(
        poster,
        SUBSCRIPTIONS_LISTEN,
        listen_params(resourceSubscriptions=["streams://refused/x", uri]),
        request_id="rf-2",
    )
    try:
        assert await kept.message() == acknowledgement("rf-1", {"resourceSubscriptions": [uri]})
        assert await partial.message() == acknowledgement("rf-2", {"resourceSubscriptions": [uri]})
        await partial.close()
        assert journal.entries("unsubscribe", uri=uri) == [], (
            "the bridge unsubscribed the first listener's URI"
        )
        assert await trigger(poster, "touch", {"uri": uri}) == "notified 1"
        assert await kept.message(ABSENCE_S) == tagged(
            "notifications/resources/updated", "rf-1", uri=uri
        )
    finally:
        await kept.close()
        await partial.close()


async def test_an_update_for_a_uri_the_legacy_sdk_normalizes_reaches_the_listener(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """mcp 1.x reports `https://Example.com/Feed` as `https://example.com/Feed`: the same resource,
    still delivered."""
    poster = poster_for(http, streams.url, "normalized-uri")
    uri = "https://Example.com/Feed"
    listener = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(resourceSubscriptions=[uri]), request_id="nu-1"
    )
    try:
        assert await listener.message() == acknowledgement("nu-1", {"resourceSubscriptions": [uri]})
        assert await trigger(poster, "touch", {"uri": uri}) == "notified 1"
        update = await listener.message(ABSENCE_S)
    finally:
        await listener.close()
    assert update["method"] == "notifications/resources/updated"
    assert update["params"]["_meta"] == {META_SUBSCRIPTION_ID: "nu-1"}


async def test_a_quiet_listen_stream_gets_keep_alive_comments(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """After the acknowledgement, a listen stream with nothing to say carries SSE comments."""
    settings = Settings(upstream=UpstreamSettings(url=streams.legacy.url))
    async with in_process_bridge(settings, keepalive_s=0.2) as (url, _engine):
        poster = poster_for(http, url, "keep-alive")
        listener = await SseStream.open(
            poster, SUBSCRIPTIONS_LISTEN, listen_params(toolsListChanged=True), request_id="ka-1"
        )
        try:
            assert await listener.message() == acknowledgement("ka-1", {"toolsListChanged": True})
            assert [await listener.next(2.0) for _ in range(3)] == [Comment("keep-alive")] * 3
        finally:
            await listener.close()


async def test_shutdown_ends_listen_streams_with_a_closing_result(
    streams: Bridged, module_peers: Peers, http: aiohttp.ClientSession
) -> None:
    """SIGTERM to the bridge ends an open listen stream with {resultType: complete, _meta:
    {subscriptionId}}."""
    bridge = module_peers.bridge(streams.legacy.url)
    poster = poster_for(http, bridge.url, "shutdown")
    listener = await SseStream.open(
        poster, SUBSCRIPTIONS_LISTEN, listen_params(promptsListChanged=True), request_id="sd-1"
    )
    try:
        assert await listener.message() == acknowledgement("sd-1", {"promptsListChanged": True})
        os.killpg(bridge.popen.pid, signal.SIGTERM)
        rest = [item for item in await listener.rest() if not isinstance(item, Comment)]
    finally:
        await listener.close()
    assert rest == [
        {
            "jsonrpc": "2.0",
            "id": "sd-1",
            "result": {
                "resultType": RESULT_COMPLETE,
                "_meta": {
                    META_SUBSCRIPTION_ID: "sd-1",
                    META_SERVER_INFO: {"name": "mrtr-streams-peer", "version": "1.30.0"},
                },
            },
        }
    ]
    assert_valid(rest[0], "SubscriptionsListenResultResponse", "modern")
    assert await asyncio.to_thread(bridge.popen.wait, WAIT_S) == 0


async def test_a_restarted_legacy_server_gets_the_listen_subscriptions_again(
    peers: Peers, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The legacy server restarts on its port: the bridge re-subscribes, says so in its log, and
    updates flow."""
    journal = Journal(tmp_path / "journal.jsonl")
    legacy = peers.legacy(SERVER, "--journal", str(journal.path))
    bridge = peers.bridge(legacy.url)
    uri = "streams://doc/restart"
    listener = await SseStream.open(
        poster_for(http, bridge.url, "restart"),
        SUBSCRIPTIONS_LISTEN,
        listen_params(toolsListChanged=True, resourceSubscriptions=[uri]),
        request_id="rs-1",
    )
    try:
        await listener.message()
        (before,) = journal.entries("subscribe", uri=uri)
        legacy.stop()
        peers.start("streams_server-restarted", legacy.argv, legacy.port)
        again = (await journal.wait_for("subscribe", count=2, timeout=6.0, uri=uri))[1]
        assert again["pid"] != before["pid"]
        await wait_logged(bridge, "listen_upstream_reestablished")
        assert await listener.message() == tagged("notifications/tools/list_changed", "rs-1")
        assert (
            await trigger(poster_for(http, bridge.url, "restart"), "touch", {"uri": uri})
            == "notified 1"
        )
        assert await listener.message() == tagged(
            "notifications/resources/updated", "rs-1", uri=uri
        )
    finally:
        await listener.close()
