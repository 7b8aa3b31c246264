"""Server-Sent Events: an incremental decoder and an encoder, with no streams (h11 style).

The decoder follows the WHATWG "event stream interpretation" rules: lines end with CRLF, LF or
CR (a chunk may split a CRLF), a leading UTF-8 BOM is dropped, `:` starts a comment, `data`
lines accumulate, an empty line dispatches, a block without data is not dispatched but still
moves `last_event_id` and `retry_ms`. It never holds more than `max_event_size` bytes of one
event; past that it raises `UpstreamMessageTooLarge` (the bridge only decodes upstream streams).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from translators.wire.errors import BridgeBug, UpstreamMessageTooLarge

_BOM: Final = b"\xef\xbb\xbf"
_LINE_ENDS: Final = (b"\n", b"\r")  # a line ends with CRLF, LF or CR
_TEXT_LINE_END: Final = re.compile(r"\r\n|\r|\n")
DEFAULT_EVENT_TYPE: Final = "message"


class SSEEvent(NamedTuple):
    """One dispatched event. `event_id`/`retry` are this block's own fields (None when absent)."""

    data: str
    event: str = DEFAULT_EVENT_TYPE
    event_id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed bytes in any chunking; get the complete events out, in order."""

    def __init__(self, *, max_event_size: int) -> None:
        self._max_event_size = max_event_size
        self._buffer = bytearray()
        self._skip_lf = False
        self._bom_checked = False
        self._data: list[str] = []
        self._data_size = 0
        self._event_type = ""
        self._block_id: str | None = None
        self._block_retry: int | None = None
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Consume `data` and return every event it completes (possibly none)."""
        if self._skip_lf and data:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]  # the LF of a CRLF split across chunks
        buffer = self._buffer
        buffer += data
        if not self._bom_checked and not self._strip_bom():
            return []
        if b"\n" not in data and b"\r" not in data:
            self._check_size(len(buffer))  # no line ended: the buffer is one partial line
            return []
        events: list[SSEEvent] = []
        # only the partial line kept from earlier chunks is scanned again, and only once: every
        # byte before this chunk's last line end leaves the buffer now
        lines = bytes(buffer).splitlines(keepends=True)
        last = lines[-1]
        if last[-1:] not in _LINE_ENDS:
            lines.pop()  # a partial line: it stays in the buffer
            buffer[:] = last
        else:
            buffer.clear()
            self._skip_lf = last[-1:] == b"\r"  # a LF may still come in the next chunk
        for ended in lines:
            line = ended.rstrip(b"\r\n")
            if line[:5] == b"data:":  # most lines (`_process_line` inlined for them)
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(value.decode("utf-8", "replace"))
                self._data_size += len(value) + 1
                self._check_size(0)
                continue
            event = self._dispatch() if not line else self._process_line(line)
            if event is not None:
                events.append(event)
        self._check_size(len(buffer))
        return events

    def _strip_bom(self) -> bool:
        if len(self._buffer) < len(_BOM) and _BOM.startswith(bytes(self._buffer)):
            return False  # too few bytes yet to tell
        if self._buffer.startswith(_BOM):
            del self._buffer[: len(_BOM)]
        self._bom_checked = True
        return True

    def _process_line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._apply_field(name, value)
        return None

    def _apply_field(self, name: str, value: str) -> None:
        if name == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
            self._check_size(0)
        elif name == "event":
            self._event_type = value
        elif name == "id" and "\0" not in value:
            self._block_id = value
            self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._block_retry = int(value)
            self.retry_ms = self._block_retry

    def _dispatch(self) -> SSEEvent | None:
        event = None
        if self._data:
            event = SSEEvent(
                data="\n".join(self._data),
                event=self._event_type or DEFAULT_EVENT_TYPE,
                event_id=self._block_id,
                retry=self._block_retry,
            )
        self._data, self._data_size, self._event_type = [], 0, ""
        self._block_id = self._block_retry = None
        return event

    def _check_size(self, pending: int) -> None:
        if self._data_size + pending > self._max_event_size:
            raise UpstreamMessageTooLarge(self._max_event_size, "an SSE event")


def _single_line(value: str, what: str) -> str:
    if _TEXT_LINE_END.search(value) or "\0" in value:
        raise BridgeBug(f"SSE {what} must be one line without NUL")
    return value


def encode_event(
    data: str, *, event: str | None = None, event_id: str | None = None, retry: int | None = None
) -> bytes:
    """One SSE event; multi-line `data` becomes several `data:` lines."""
    lines: list[str] = []
    if event_id is not None:
        lines.append(f"id: {_single_line(event_id, 'id')}")
    if event is not None:
        lines.append(f"event: {_single_line(event, 'event')}")
    if retry is not None:
        lines.append(f"retry: {int(retry)}")
    lines.extend(f"data: {chunk}" for chunk in _TEXT_LINE_END.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_comment(text: str) -> bytes:
    """An SSE comment (ignored by clients; useful as a keep-alive)."""
    return "".join(f": {chunk}\n" for chunk in _TEXT_LINE_END.split(text)).encode("utf-8")


__all__ = ["DEFAULT_EVENT_TYPE", "SSEDecoder", "SSEEvent", "encode_comment", "encode_event"]
