"""Newline-delimited JSON framing for stdio, both eras (spec basic/transports/stdio).

Pure and incremental, in the manner of h11's `receive_data`: bytes go in as they arrive, whole
messages come out. Two layers:

* `LineSplitter` cuts the byte stream into lines with a bounded buffer. A line longer than
  `max_line_bytes` is never buffered: the splitter reports it once, as a `FramingError`, and
  discards bytes until the next newline. Blank lines are skipped; a trailing `\\r` is dropped.
* `LineDecoder` adds JSON decoding: each line becomes a message object or a `FramingError`.

A `FramingError` never carries message content, so callers may log it as is. When an oversized
line starts like a JSON-RPC message (`{"jsonrpc":"2.0","id":7,"result"...`), its id and the key
after the id are kept so the caller can fail the one call it belonged to instead of letting it hang.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from translators.wire import fast_json
from translators.wire.errors import InvalidRequest
from translators.wire.jsonrpc import JsonObject, to_error_response
from translators.wire.jsonrpc_batches import batch_elements

MessageId = int | str

NEWLINE: Final = b"\n"
HEAD_BYTES: Final = 256  # how much of an oversized line is kept to find its id
_HEAD = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(?P<id>-?[0-9]{1,18}|"(?:[^"\\]|\\.){0,128}")'
    rb'\s*,\s*"(?P<key>result|error|method)"'
)


@dataclass(frozen=True)
class FramingError:
    """A line that is not a usable message. `reason` and `size` are safe to log (no content)."""

    reason: str
    size: int
    head_id: MessageId | None = None  # the JSON-RPC id an oversized line starts with, if any
    head_key: str | None = None  # "result", "error" or "method": the key that follows that id

    @property
    def is_response_head(self) -> bool:
        """Whether the rejected line starts like a JSON-RPC response (so `head_id` names a
        request)."""
        return self.head_id is not None and self.head_key in ("result", "error")


def _read_head(head: bytes) -> tuple[MessageId | None, str | None]:
    match = _HEAD.match(head)
    if match is None:
        return None, None
    try:
        value = json.loads(match.group("id"))
    except ValueError:
        return None, None
    if not isinstance(value, int | str) or isinstance(value, bool):
        return None, None
    return value, match.group("key").decode("ascii")


class LineSplitter:
    """Cuts a byte stream into lines of at most `max_line_bytes` (without the newline)."""

    def __init__(self, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line (never more than `max_line_bytes`)."""
        return len(self._buffer)

    def remainder(self) -> bytes:
        """The unfinished last line (for free-form text such as stderr at EOF), and forget it."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        self._discarding = False
        return rest

    def feed(self, data: bytes) -> list[bytes | FramingError]:
        """Lines completed by `data`, in order; oversized lines appear as `FramingError`s."""
        items: list[bytes | FramingError] = []
        pos = 0
        while pos < len(data):
            end = data.find(NEWLINE, pos)
            if self._discarding:
                if end < 0:
                    break
                self._discarding = False
            elif end < 0:
                self._keep(data, pos, items)
                break
            else:
                self._finish(data, pos, end, items)
            pos = end + 1
        return items

    def _keep(self, data: bytes, start: int, items: list[bytes | FramingError]) -> None:
        """No newline in `data[start:]`: buffer it, or reject the line once it outgrows the
        limit."""
        size = len(self._buffer) + len(data) - start
        if size <= self.max_line_bytes:
            self._buffer += data[start:]
            return
        items.append(self._oversized(data, start, size))
        self._discarding = True

    def _finish(self, data: bytes, start: int, end: int, items: list[bytes | FramingError]) -> None:
        size = len(self._buffer) + end - start
        if size > self.max_line_bytes:
            items.append(self._oversized(data, start, size))
            return
        line = bytes(self._buffer) + data[start:end]
        self._buffer.clear()
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            items.append(line)

    def _oversized(self, data: bytes, start: int, size: int) -> FramingError:
        head = bytes(self._buffer[:HEAD_BYTES]) + data[start : start + HEAD_BYTES]
        self._buffer.clear()
        head_id, head_key = _read_head(head[:HEAD_BYTES])
        return FramingError(
            f"line longer than the limit of {self.max_line_bytes} bytes", size, head_id, head_key
        )


def oversized_reply(error: FramingError, max_line_bytes: int) -> JsonObject | None:
    """What the client is told of its line past the limit: -32600 with the request's id when the
    line starts like a request (null otherwise); None for a response (nothing is due)."""
    if error.is_response_head:
        return None
    request_id = error.head_id if error.head_key == "method" else None
    fault = InvalidRequest(
        f"Invalid request: message larger than the limit of {max_line_bytes} bytes"
    )
    return to_error_response(fault, request_id)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _strict_loads(line: bytes) -> Any:
    return json.loads(line, parse_constant=_reject_constant)


def _decode_value(line: bytes) -> Any:
    try:
        return fast_json.loads(line, _strict_loads)
    except RecursionError:
        return FramingError("line nests JSON too deeply", len(line))
    except ValueError:  # JSONDecodeError, bad UTF-8
        return FramingError("line is not valid JSON", len(line))


def decode_line(line: bytes) -> JsonObject | FramingError:
    """One line as a JSON object, or a `FramingError` saying why not (without the content)."""
    [message] = decode_messages(line, batches=False)
    return message


def decode_messages(line: bytes, *, batches: bool) -> list[JsonObject | FramingError]:
    """The messages of one line: one, or each element of a batch where the revision has batches."""
    value = _decode_value(line)
    if isinstance(value, FramingError):
        return [value]
    return [
        element
        if isinstance(element, dict)
        else FramingError("line is JSON but not an object", len(line))
        for element in batch_elements(value, batches=batches)
    ]


class LineDecoder:
    """Newline-delimited JSON: `feed(bytes)` returns the complete messages (or framing errors).

    `batches` is set once the session's revision is known (translators.wire.jsonrpc_batches)."""

    def __init__(self, max_line_bytes: int) -> None:
        self._splitter = LineSplitter(max_line_bytes)
        self.batches = False

    @property
    def buffered(self) -> int:
        return self._splitter.buffered

    def feed(self, data: bytes) -> list[JsonObject | FramingError]:
        messages: list[JsonObject | FramingError] = []
        for item in self._splitter.feed(data):
            messages += (
                [item]
                if isinstance(item, FramingError)
                else decode_messages(item, batches=self.batches)
            )
        return messages


def frame(message: JsonObject) -> bytes:
    """One message as a line: compact JSON (control characters escaped, so no embedded newline) +
    `\\n`."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + NEWLINE


__all__ = [
    "HEAD_BYTES",
    "FramingError",
    "LineDecoder",
    "LineSplitter",
    "decode_line",
    "decode_messages",
    "frame",
    "oversized_reply",
]
