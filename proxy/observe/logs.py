"""structlog configuration: one chain, one shape for every line (docs/decisions.md § 5).

Configured once at startup by `configure_logging`: the log context first
(proxy/common/log_context.py), then timestamp and level, then `redact`, then JSON (in one step,
`finish_json_line`) or the console renderer on a terminal. Always stderr: in stdio
mode stdout carries protocol bytes only. Standard-library loggers (aiohttp, asyncio) are routed
through the same chain so every line has one shape.

`redact`, the safety net that masks secrets and cuts every text to its bound, is
proxy/observe/redaction.py's.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Final, NamedTuple, TextIO

import structlog
from structlog.processors import add_log_level
from structlog.typing import EventDict, Processor, WrappedLogger

from config.settings import LogSettings
from proxy.common.log_context import merge_log_context
from proxy.observe.redaction import (
    MAX_CLEAN_TEXTS,
    MAX_KEY_VERDICTS,
    REDACTED,
    SECRET_KEYS,
    GeneratedText,
    is_clean_text,
    is_secret_key,
    mask_text,
    redact,
    scrub,
)


def _json_fallback(value: Any) -> Any:
    """What a value JSON cannot hold is written as (structlog's rule: `__structlog__()`, else
    `repr`, masked and cut as any text)."""
    structlog_form = getattr(value, "__structlog__", None)
    return structlog_form() if callable(structlog_form) else mask_text(repr(value))


# The standard library's C encoder with `json.dumps`'s defaults (so every line is byte for byte
# what `structlog.processors.JSONRenderer` wrote), built once instead of on every line. No
# circular-reference bookkeeping: `redact` runs first and cuts every value at `_MAX_DEPTH`.
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Final = (
    _make_encoder(
        None,
        _json_fallback,
        json.encoder.encode_basestring_ascii,
        None,
        ": ",
        ", ",
        False,
        False,
        True,
    )
    if _make_encoder is not None
    else None
)


def _json(value: Any) -> str:
    if _ENCODE is None:  # an interpreter without the C accelerator
        return json.dumps(value, default=_json_fallback)
    return "".join(_ENCODE(value, 0))


def render_json(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """structlog processor: the line as JSON (`JSONRenderer`'s output, about twice as fast)."""
    return _json(event_dict)


_WHOLE_SECOND: list[Any] = [None, ""]  # (a second since the epoch, its ISO text), the last used


def _timestamp() -> str:
    """Now, ISO 8601 in UTC with microseconds (`TimeStamper(fmt="iso", utc=True)`'s text), the date
    and time of day formatted once per second."""
    second, nanos = divmod(time.time_ns(), 1_000_000_000)
    if second != _WHOLE_SECOND[0]:
        _WHOLE_SECOND[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_WHOLE_SECOND[1]}.{nanos // 1000:06d}Z"


def add_timestamp(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: `timestamp` (`_timestamp`)."""
    event_dict["timestamp"] = _timestamp()
    return event_dict


def _renderer(settings: LogSettings, stream: TextIO) -> Processor:
    console = settings.format == "console" or (settings.format == "auto" and stream.isatty())
    if console:
        return structlog.dev.ConsoleRenderer(
            colors=stream.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    return render_json


_STACK_INFO: Final = structlog.processors.StackInfoRenderer()
_LEVEL_OF: Final = {"warn": "warning", "exception": "error"}  # other method names are the level


def _shared_processors() -> list[Processor]:
    return [
        merge_log_context,
        structlog.processors.add_log_level,
        add_timestamp,
        _STACK_INFO,
        structlog.processors.format_exc_info,
        redact,
    ]


def finish_json_line(logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
    """structlog processor: what the shared chain after `merge_log_context` and `render_json` do,
    one after the other, in one step (every line of the bridge passes here; the stack and the
    exception are formatted only for the lines that ask for them)."""
    if "stack_info" in event_dict or "exc_info" in event_dict:
        event_dict = add_timestamp(logger, method, add_log_level(logger, method, event_dict))
        event_dict = structlog.processors.format_exc_info(
            logger, method, _STACK_INFO(logger, method, event_dict)
        )
        return render_json(logger, method, redact(logger, method, event_dict))
    # The level and the timestamp are the bridge's own text: set after the redaction (which keeps
    # the keys' order), so the same keys come in the same order, and a timestamp, new on every
    # line, is neither searched for credentials nor remembered as a clean text.
    level = _LEVEL_OF.get(method, method)  # `add_log_level`'s names
    if "level" not in event_dict and "timestamp" not in event_dict:
        line = _json_line(event_dict, level)
        if line is not None:
            return line
    redacted = redact(logger, method, event_dict)
    redacted["level"] = level
    return render_json(logger, method, add_timestamp(logger, method, redacted))


# `_json_line`'s memos, each bounded as the memos above: a key's text up to its value (`, "key": `)
# or, for a secret key, its whole masked entry; the JSON text of a value known clean.
_KEY_HEADS: dict[str, str] = {}
_SECRET_ENTRIES: dict[str, str] = {}
_CLEAN_JSON: dict[str, str] = {}
_NON_FINITE: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # `json`'s words
_ESCAPED: Final = json.encoder.encode_basestring_ascii
_INT_TEXT: Final = int.__repr__  # what `json` writes for an int (a bool is not one here)
_FLOAT_TEXT: Final = float.__repr__


def _json_line(event_dict: EventDict, level: str) -> str | None:
    """`redact`, then `level` and the timestamp added, then `render_json`, in one pass: the same
    line, byte for byte, for 58% of the instructions (the C encoder escaped every key and text
    again on every line: bench/README.md, "The twelfth batch"). Numbers, booleans, None and texts
    are written here (a text's JSON remembered once it is known clean); any other value goes
    through `scrub` and the C encoder, as before. None for a line this does not write (a key that
    is not a text)."""
    heads, clean = _KEY_HEADS, _CLEAN_JSON
    parts: list[str] = []
    append = parts.append
    for key, value in event_dict.items():
        head = heads.get(key)
        if head is None:
            secret = _SECRET_ENTRIES.get(key)
            if secret is not None:
                append(secret)
                continue
            if type(key) is not str:
                return None
            head = f", {_ESCAPED(key)}: "
            if len(heads) + len(_SECRET_ENTRIES) >= MAX_KEY_VERDICTS:
                heads.clear()
                _SECRET_ENTRIES.clear()
            if is_secret_key(key):
                _SECRET_ENTRIES[key] = secret = f'{head}"{REDACTED}"'
                append(secret)
                continue
            heads[key] = head
        append(head)
        kind = type(value)
        if kind is str:
            text = clean.get(value)
            if text is None:
                text = _ESCAPED(mask_text(value))
                if is_clean_text(value):  # `mask_text` found it clean (and short)
                    if len(clean) >= MAX_CLEAN_TEXTS:
                        clean.clear()
                    clean[value] = text
            append(text)
        elif value is None:
            append("null")
        elif kind is GeneratedText:  # the bridge's own: nothing to mask, nothing to remember
            append(_ESCAPED(value))
        elif kind is int:
            append(_INT_TEXT(value))
        elif kind is bool:
            append("true" if value else "false")
        elif kind is float:
            text = _FLOAT_TEXT(value)
            append(_NON_FINITE.get(text, text))
        else:
            append(_json(scrub(value, 1)))
    append(f', "level": {_ESCAPED(level)}, "timestamp": "{_timestamp()}"')
    return "{" + "".join(parts)[2:] + "}"


def _scrub_aiohttp_server(record: logging.LogRecord) -> bool:
    """aiohttp's server logs a bad request with the start of the offending line (an oversized header
    may be a credential): keep the event and the error class, drop the text."""
    if (
        record.name.startswith("aiohttp.server")
        and record.exc_info
        and record.exc_info[1] is not None
    ):
        record.msg, record.args = (
            "aiohttp_bad_request error=%s",
            (type(record.exc_info[1]).__name__,),
        )
        record.exc_info, record.exc_text = None, None
    return True


def scrub_aiohttp_server_logs() -> None:
    """Filter aiohttp's server logger itself, so every handler (ours, or a test's) gets scrubbed
    records."""
    logger = logging.getLogger("aiohttp.server")
    if _scrub_aiohttp_server not in logger.filters:
        logger.addFilter(_scrub_aiohttp_server)


def _route_stdlib(level: int, renderer: Processor, stream: TextIO) -> None:
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *_shared_processors()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    scrub_aiohttp_server_logs()
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)


class KeyedLog:
    """`structlog.get_logger().bind(**{key: value})` for an object that lives long and logs
    little (a held call): one key bound, without a bound logger and its context per object
    (about 0.7 KB each)."""

    __slots__ = ("_key", "_value")

    def __init__(self, key: str, value: object) -> None:
        self._key, self._value = key, value

    def debug(self, event: str, **fields: Any) -> None:
        _LOG.debug(event, **{self._key: self._value}, **fields)

    def info(self, event: str, **fields: Any) -> None:
        _LOG.info(event, **{self._key: self._value}, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        _LOG.warning(event, **{self._key: self._value}, **fields)

    def error(self, event: str, **fields: Any) -> None:
        _LOG.error(event, **{self._key: self._value}, **fields)


class _Direct(NamedTuple):
    """What `emit` needs to write a line itself: the chain it must find configured, the least
    level written, and the writer."""

    chain: list[Processor]
    wrapper: type[Any]
    level: int
    writer: structlog.WriteLogger


_LOG: Final = structlog.get_logger()
_DIRECT: list[_Direct] = []  # set by `configure_logging` when the chain is the JSON one
_LEVELS: Final = logging.getLevelNamesMapping()


def emit(level: str, event: str, fields: dict[str, Any]) -> None:
    """`structlog.get_logger().<level>(event, **fields)`, for the lines every request writes (the
    access line): the same line, byte for byte, through the same chain, without structlog's bound
    logger, its proxy and its processor loop (about a third of the line's cost). Anything but the
    JSON chain `configure_logging` set (the console renderer, a test's `capture_logs`) goes through
    structlog itself."""
    direct = _DIRECT[0] if _DIRECT else None
    config = structlog.get_config()
    if (
        direct is None
        or config["processors"] is not direct.chain
        or config["wrapper_class"] is not direct.wrapper
        or len(direct.chain) != 2
        or direct.chain[-1] is not finish_json_line
    ):
        getattr(structlog.get_logger(), level)(event, **fields)
        return
    if _LEVELS[level.upper()] < direct.level:
        return
    event_dict = merge_log_context(None, level, {**fields, "event": event})
    direct.writer.msg(finish_json_line(None, level, event_dict))


def configure_logging(
    settings: LogSettings, stream: TextIO | None = None, *, cache: bool = False
) -> None:
    """Configure structlog and the standard library once, writing to `stream` (stderr by
    default). `cache`: each logger is built on its first use and kept (the bridge process, which
    configures once: a log call, even a filtered one, then costs no logger construction); tests
    that configure again and again leave it off."""
    out = stream if stream is not None else sys.stderr
    level = logging.getLevelNamesMapping()[settings.level.upper()]
    renderer = _renderer(settings, out)
    chain: list[Processor] = (
        [merge_log_context, finish_json_line]
        if renderer is render_json
        else [*_shared_processors(), renderer]
    )
    wrapper = structlog.make_filtering_bound_logger(level)
    structlog.configure(
        processors=chain,
        wrapper_class=wrapper,
        logger_factory=structlog.WriteLoggerFactory(file=out),  # one write per line
        cache_logger_on_first_use=cache,
    )
    _DIRECT[:] = (
        [_Direct(structlog.get_config()["processors"], wrapper, level, structlog.WriteLogger(out))]
        if renderer is render_json
        else []
    )
    _route_stdlib(level, renderer, out)


__all__ = [
    "REDACTED",
    "SECRET_KEYS",
    "KeyedLog",
    "configure_logging",
    "emit",
    "is_secret_key",
    "mask_text",
    "redact",
    "scrub_aiohttp_server_logs",
]
