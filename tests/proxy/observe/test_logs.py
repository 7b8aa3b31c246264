"""Logging: one configuration, always stderr, and secrets masked at any depth."""

from __future__ import annotations

import datetime
import io
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import structlog
import structlog.testing
from aiohttp.test_utils import TestClient
from hypothesis import example, given
from hypothesis import strategies as st

from config.settings import LogSettings, Settings
from proxy.app.http_app import make_front_app
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.log_context import bound_log_context, log_context, merge_log_context
from proxy.observe import logs, redaction
from proxy.observe.logs import REDACTED, configure_logging, redact
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TOOLS_CALL,
)

TOKEN = "tok-9f8e7d6c5b4a"
STATE = "v1.QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers, root.level = handlers, level


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_redact_masks_secret_keys_at_any_depth() -> None:
    """Known secret keys are masked wherever they are; everything else is kept."""
    event = {
        "event": "upstream_request_sent",
        "method": TOOLS_CALL,
        "request_id": 7,
        "Authorization": f"Bearer {TOKEN}",
        "headers": {"mcp-session-id": "sess-1", "Accept": "text/event-stream"},
        "params": {
            "requestState": STATE,
            "inputResponses": {"k": {"action": "accept"}},
            "name": "t",
        },
        "results": [{"content": [{"type": "text", "text": "the answer"}]}],
        "key": "c2VjcmV0",
        "request_state": STATE,
        "answer": "blue",
        "session_id": "s",
    }
    assert redact(None, "info", event) == {
        "event": "upstream_request_sent",
        "method": TOOLS_CALL,
        "request_id": 7,
        "Authorization": REDACTED,
        "headers": {"mcp-session-id": REDACTED, "Accept": "text/event-stream"},
        "params": {"requestState": REDACTED, "inputResponses": REDACTED, "name": "t"},
        "results": [{"content": REDACTED}],
        "key": REDACTED,
        "request_state": REDACTED,
        "answer": REDACTED,
        "session_id": REDACTED,
    }


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (f"upstream said: Bearer {TOKEN}", f"upstream said: Bearer {REDACTED}"),
        (f"authorization: basic {TOKEN}==", f"authorization: basic {REDACTED}"),
        (f"state {STATE} rejected", f"state v1.{REDACTED} rejected"),
        ("version v1.2.3 is fine", "version v1.2.3 is fine"),
    ],
)
def test_redact_masks_credentials_inside_text(text: str, masked: str) -> None:
    """Bearer/basic credentials and sealed states are masked inside any string value."""
    assert redact(None, "info", {"event": text, "detail": [text]}) == {
        "event": masked,
        "detail": [masked],
    }


def test_texts_are_remembered_clean_only_when_short_and_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memo of clean texts never holds a text that had something to mask, nor a long one, nor
    more than its bound; a full memo starts over (texts seen once cannot crowd the others out for
    good); a remembered text passes through unchanged."""
    monkeypatch.setattr(redaction, "_CLEAN_TEXTS", set())
    monkeypatch.setattr(redaction, "MAX_CLEAN_TEXTS", 3)
    long_text = "x" * (redaction._MAX_CLEAN_TEXT_LENGTH + 1)
    for text in ("tools/call", f"Bearer {TOKEN}", STATE, long_text, "ok", "json"):
        redact(None, "info", {"event": text})
    assert redaction._CLEAN_TEXTS == {"tools/call", "ok", "json"}
    redact(None, "info", {"event": "legacy"})
    assert redaction._CLEAN_TEXTS == {"legacy"}
    assert redact(None, "info", {"event": "ok", "m": f"Bearer {TOKEN}"}) == {
        "event": "ok",
        "m": f"Bearer {REDACTED}",
    }


def test_a_text_the_bridge_generated_is_written_as_it_is_and_never_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request's random id, new on every line, neither fills nor flushes the memos of clean
    texts (the redaction's and the line writer's); it is written as the chain writes it."""
    monkeypatch.setattr(redaction, "_CLEAN_TEXTS", set())
    monkeypatch.setattr(logs, "_CLEAN_JSON", {})
    ids = [redaction.GeneratedText(f"{index:016x}") for index in range(50)]
    lines = [logs.finish_json_line(None, "info", {"event": "e", "id": i}) for i in ids]
    assert [json.loads(line)["id"] for line in lines] == [str(i) for i in ids]
    assert redaction._CLEAN_TEXTS == {"e"} and logs._CLEAN_JSON == {"e": '"e"'}  # the event only
    assert redact(None, "info", {"event": "e", "id": ids[0]})["id"] is ids[0]


def test_top_level_values_of_every_kind_are_scrubbed() -> None:
    """The top level (unrolled for speed) treats each kind of value as the nested levels do."""
    event: dict[str, Any] = {
        "event": "e",
        "n": 1,
        "f": 2.5,
        "b": True,
        "none": None,
        "text": f"Bearer {TOKEN}",
        "nested": {"token": TOKEN, "list": [f"basic {TOKEN}", 3]},
        "tuple": (STATE,),
        "other": b"bytes",
        "Session-Id": 42,
    }
    assert redact(None, "info", event) == {
        "event": "e",
        "n": 1,
        "f": 2.5,
        "b": True,
        "none": None,
        "text": f"Bearer {REDACTED}",
        "nested": {"token": REDACTED, "list": [f"basic {REDACTED}", 3]},
        "tuple": [f"v1.{REDACTED}"],
        "other": b"bytes",
        "Session-Id": REDACTED,
    }


class _Shown:
    def __structlog__(self) -> str:
        return "shown"


@pytest.mark.parametrize(
    "event",
    [
        {"event": "e", "n": 1, "f": 2.5, "b": False, "none": None, "big": 2**80},
        {"event": "é ☃ \u2028 \x00", "nested": {"list": [1, "two", {"three": [3.0]}]}},
        {"event": "e", "odd": object(), "set": {1}, "shown": _Shown(), "nan": float("nan")},
    ],
)
def test_lines_are_what_structlogs_json_renderer_writes(event: dict[str, Any]) -> None:
    """The faster renderer writes each line byte for byte as structlog's `JSONRenderer` did."""
    expected = structlog.processors.JSONRenderer()(None, "info", dict(event))
    assert logs.render_json(None, "info", dict(event)) == expected


class _Text(str):
    pass


class _Number(int):
    pass


# Keys the bridge's lines carry, secret ones among them, and any others; values of every kind a
# line may hold, credentials and sealed states inside texts, nested and not.
_KEYS = st.sampled_from(
    ["event", "request_id", "method", "name", "token", "Session-Id", "answer", "level_of", "n"]
) | st.text(max_size=12)
_TEXTS = (
    st.text(max_size=80)
    | st.sampled_from(["tools/call", "modern", f"Bearer {TOKEN}", STATE, "é ☃ \u2028 \x00"])
    | st.builds(lambda a, b: f"{a} basic {b} {a}", st.text(max_size=8), st.text(max_size=8))
    # beyond the bound, with credentials and states at any place, the cut's among them
    | st.builds(
        lambda unit, count: unit * count,
        st.sampled_from(["é☃\n", f"Bearer {TOKEN} ", f"{STATE} ", "x"]),
        st.integers(min_value=30, max_value=1100),
    )
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | _TEXTS
    | st.builds(_Text, _TEXTS)
    | st.builds(redaction.GeneratedText, st.text(alphabet="0123456789abcdef", max_size=16))
    | st.builds(_Number, st.integers())
    | st.just(b"bytes")
    | st.just(_Shown())
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(_KEYS, inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(_KEYS, _VALUES, max_size=8), st.sampled_from(["info", "warn", "exception"]))
@example({"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "f": 1e16}, "info")
@example({"b": True, "n": _Number(3), "t": _Text("Bearer x"), "e": "", "none": None}, "info")
@example({"exc_info": None, "stack_info": False, "level": "x", "timestamp": 1}, "info")
def test_a_line_is_written_as_the_redact_then_render_chain_wrote_it(
    event: dict[str, Any], method: str
) -> None:
    """`finish_json_line` writes each line in one pass now: byte for byte what the shared chain
    after the log context (the level, the timestamp, a stack or an exception asked for, the
    redaction), then rendering wrote (the same timestamp for both)."""
    stamp = "2026-12-05T08:00:00.123456Z"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logs, "_timestamp", lambda: stamp)
        expected = dict(event)
        chain = logs._shared_processors()
        assert chain[0] is merge_log_context  # the one step `finish_json_line` does not do
        for processor in chain[1:]:
            expected = processor(None, method, expected)
        line = logs.finish_json_line(None, method, dict(event))
        again = logs.finish_json_line(None, method, dict(event))  # with the memos filled
    assert line == again == logs.render_json(None, method, expected)
    assert TOKEN not in line and STATE not in line


def test_timestamps_are_utc_iso_with_microseconds() -> None:
    """`timestamp` reads as structlog's ISO UTC stamp did, and is the current time."""
    before = time.time()
    stamp = logs.add_timestamp(None, "info", {})["timestamp"]
    after = time.time()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
    parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    assert before - 1e-6 <= parsed <= after + 1e-6


def test_json_lines_carry_level_timestamp_and_context_without_secrets() -> None:
    """Configured logs are JSON with bound context, and secrets never reach the stream."""
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream)
    with log_context(request_id="r1"):
        structlog.get_logger().info(
            "held_call_registered", authorization=f"Bearer {TOKEN}", round=1
        )
    [line] = lines(stream)
    assert line["event"] == "held_call_registered"
    assert (line["level"], line["request_id"], line["round"], line["authorization"]) == (
        "info",
        "r1",
        1,
        REDACTED,
    )
    assert line["timestamp"].endswith("Z")
    assert TOKEN not in stream.getvalue()


def test_logs_go_to_stderr_never_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    """By default every line goes to stderr: stdout belongs to the protocol in stdio mode."""
    configure_logging(LogSettings(format="json"))
    structlog.get_logger().warning("upstream_session_lost")
    logging.getLogger("aiohttp.server").error("stdlib line")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert [json.loads(line)["event"] for line in captured.err.splitlines()] == [
        "upstream_session_lost",
        "stdlib line",
    ]


def test_the_level_filters_lines() -> None:
    """Lines below the configured level are dropped, for structlog and the standard library."""
    stream = io.StringIO()
    configure_logging(LogSettings(level="warning", format="json"), stream)
    structlog.get_logger().info("quiet")
    logging.getLogger("aiohttp.access").info("quiet too")
    structlog.get_logger().error("loud")
    assert [line["event"] for line in lines(stream)] == ["loud"]


def test_standard_library_lines_are_redacted_json() -> None:
    """aiohttp and asyncio lines get the same shape and the same masking."""
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream)
    logging.getLogger("aiohttp.client").warning("retrying with %s", f"Bearer {TOKEN}")
    [line] = lines(stream)
    assert (line["event"], line["level"], line["logger"]) == (
        f"retrying with Bearer {REDACTED}",
        "warning",
        "aiohttp.client",
    )


def test_tracebacks_are_masked_too() -> None:
    """An exception whose text carries a credential is logged with it masked."""
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream)
    try:
        raise RuntimeError(f"upstream rejected Bearer {TOKEN}")
    except RuntimeError:
        structlog.get_logger().exception("upstream_call_failed")
    [line] = lines(stream)
    assert f"RuntimeError: upstream rejected Bearer {REDACTED}" in line["exception"]
    assert TOKEN not in stream.getvalue()


def test_every_text_of_a_line_is_cut_to_its_bound() -> None:
    """Issue 40.9: whoever supplied it, a line holds at most `MAX_LOGGED_TEXT` characters of a
    text (a traceback `MAX_LOGGED_TRACEBACK`) and `MAX_LOGGED_ITEMS` items of a list or mapping,
    and says how long it was; through `emit` (the access line), a logger, a nested value and the
    standard library. A cut never splits a character or an escape, and a credential or sealed
    state across the cut is masked, not shown in part."""
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream)
    limit, huge = redaction.MAX_LOGGED_TEXT, "i" * 900_000
    mark = "...[cut, 900000 characters]"
    escaped = '\n"é😀' * 1000
    state_at_cut = "x" * (limit - 6) + " " + STATE  # its first 5 characters kept: masked first
    logs.emit("info", "front_request_finished", {"request_id": huge, "escaped": escaped})
    structlog.get_logger().info("state", text=state_at_cut)
    structlog.get_logger().info("nested", params={"k" * 2000: huge, "list": list(range(500))})
    logging.getLogger("aiohttp.client").warning("%s", huge)
    try:
        raise ValueError(huge)
    except ValueError:
        structlog.get_logger().exception("failed")
    access, state, nested, stdlib, failed = lines(stream)
    assert access["request_id"] == "i" * limit + mark
    assert access["escaped"] == escaped[:limit] + "...[cut, 4000 characters]"
    assert state["text"] == "x" * (limit - 6) + f" v1.{REDACTED}"[:6] + "...[cut, 1033 characters]"
    assert nested["params"] == {
        "k" * limit + "...[cut, 2000 characters]": "i" * limit + mark,
        "list": [*range(redaction.MAX_LOGGED_ITEMS), "...[cut, 500 items]"],
    }
    assert stdlib["event"] == "i" * limit + mark
    trace, kept = failed["exception"], redaction.MAX_LOGGED_TRACEBACK
    assert trace.startswith("Traceback") and "ValueError: iii" in trace
    cut = re.fullmatch(r"\.\.\.\[cut, (\d+) characters\]", trace[kept:])
    assert cut is not None and int(cut[1]) > 900_000, trace[kept:]
    # the bound counts characters: JSON writes one in up to 12 (a surrogate pair's two escapes)
    access_line, *written, traceback_line = stream.getvalue().splitlines()
    assert len(access_line) < (1 + 12) * limit + 1000
    assert max(map(len, written)) < 4 * limit and len(traceback_line) < kept + limit
    assert STATE[3:8] not in stream.getvalue()


def test_a_console_line_is_cut_too() -> None:
    console = io.StringIO()
    configure_logging(LogSettings(format="console"), console)
    structlog.get_logger().info("front_request_finished", request_id="i" * 900_000)
    assert "i" * redaction.MAX_LOGGED_TEXT + "...[cut, 900000 characters]" in console.getvalue()
    assert len(console.getvalue()) < 2 * redaction.MAX_LOGGED_TEXT


def test_console_format_is_not_json_and_auto_is_json_off_a_terminal() -> None:
    """format=console renders for people; auto renders JSON when the stream is not a terminal."""
    console, auto = io.StringIO(), io.StringIO()
    configure_logging(LogSettings(format="console"), console)
    structlog.get_logger().info("bridge_started", listen="http://127.0.0.1:8080/mcp")
    configure_logging(LogSettings(format="auto"), auto)
    structlog.get_logger().info("bridge_started", listen="http://127.0.0.1:8080/mcp")
    assert "bridge_started" in console.getvalue() and not console.getvalue().startswith("{")
    assert lines(auto)[0]["listen"] == "http://127.0.0.1:8080/mcp"


async def test_a_front_request_logs_one_summary_without_secrets(
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    """A call carrying a token and a requestState logs its summary line and neither secret."""

    class Engine:
        async def handle(self, request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
            structlog.get_logger().debug(
                "engine_saw", params=request.params, authorization=request.authorization
            )
            result = {"content": [], "resultType": "complete"}
            return {"jsonrpc": "2.0", "id": request.front_request_id, "result": result}

        def is_ready(self) -> bool:
            return True

    stream = io.StringIO()
    configure_logging(LogSettings(level="debug", format="json"), stream)
    client = await aiohttp_client(make_front_app(Settings(), Engine()))
    meta = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": TOOLS_CALL,
        "params": {
            "name": "t",
            "requestState": STATE,
            "inputResponses": {"k": "blue"},
            "_meta": meta,
        },
    }
    headers = {
        "MCP-Protocol-Version": MODERN_VERSION,
        "Mcp-Method": TOOLS_CALL,
        "Mcp-Name": "t",
        "Authorization": f"Bearer {TOKEN}",
    }
    response = await client.post("/mcp", json=body, headers=headers)
    assert response.status == 200
    events = {line["event"]: line for line in lines(stream)}
    summary = events["front_request_finished"]
    assert (summary["request_id"], summary["method"], summary["status"]) == (3, TOOLS_CALL, 200)
    assert (summary["mode"], summary["code"], summary["cancelled"]) == ("json", None, False)
    # the engine's lines name the caller as the summary does: 12 hex digits of its digest
    assert (events["engine_saw"]["request_id"], events["engine_saw"]["principal"]) == (
        3,
        summary["principal"],
    )
    assert len(summary["principal"]) == 12
    assert (
        TOKEN not in stream.getvalue()
        and STATE not in stream.getvalue()
        and "blue" not in stream.getvalue()
    )


def test_log_context_binds_for_its_block_and_restores_what_was_bound() -> None:
    """`log_context` (two per request) leaves the log context exactly as it found it, an
    exception included, and an inner block's value wins inside it only."""
    with log_context(request_id=7, principal="0123456789abcdef"):
        with pytest.raises(RuntimeError), log_context(principal="0123456789ab", round=2):
            assert bound_log_context() == {
                "request_id": 7,
                "principal": "0123456789ab",
                "round": 2,
            }
            raise RuntimeError("inner")
        assert bound_log_context() == {
            "request_id": 7,
            "principal": "0123456789abcdef",
        }
    assert bound_log_context() == {}


def test_emit_writes_what_the_logger_writes_byte_for_byte() -> None:
    """`emit` (the access line's path) writes exactly the line `log.info` writes, bound context
    included, masks what `redact` masks, and drops lines below the level."""
    fields = {"request_id": "r-9", "name": f"Bearer {TOKEN}", "round": None, "ms": 1.5}
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream)
    with log_context(transport="http"):
        structlog.get_logger().info("front_request_finished", **fields)
        logs.emit("info", "front_request_finished", fields)
        logs.emit("debug", "quiet", fields)
    via_logger, via_emit = stream.getvalue().splitlines()
    strip = re.compile(r', "timestamp": "[^"]+"')
    assert strip.sub("", via_emit) == strip.sub("", via_logger)
    assert json.loads(via_emit) | {"timestamp": None} == {
        "request_id": "r-9",
        "name": f"Bearer {REDACTED}",
        "round": None,
        "ms": 1.5,
        "event": "front_request_finished",
        "transport": "http",
        "level": "info",
        "timestamp": None,
    }
    assert fields == {"request_id": "r-9", "name": f"Bearer {TOKEN}", "round": None, "ms": 1.5}


def test_emit_goes_through_structlog_where_the_json_chain_is_not_configured() -> None:
    """A test's `capture_logs` and the console renderer see emitted lines as logged ones."""
    configure_logging(LogSettings(format="json"), io.StringIO())
    with structlog.testing.capture_logs() as captured:
        logs.emit("info", "front_request_finished", {"status": 200})
    assert captured == [{"event": "front_request_finished", "status": 200, "log_level": "info"}]
    console = io.StringIO()
    configure_logging(LogSettings(format="console"), console)
    logs.emit("info", "front_request_finished", {"status": 200})
    assert "front_request_finished" in console.getvalue() and "status=200" in console.getvalue()
