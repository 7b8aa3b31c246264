"""A legacy stdio server's stderr, relayed to the bridge's log: bounded lines, rate-limited.

Per the spec stderr is free-form logging and not an error signal, so lines are logged at INFO, each
cut to `LINE_CHARS` characters, at most `LINES_PER_S` per second; the rest are counted and reported
as one `upstream_stderr_suppressed` entry when the next one-second window opens or the stream ends.
The last `TAIL_LINES` lines (suppressed ones too) are kept in `tail`, so that `mrtr-bridge check`
can show why a server that died said it died, and a client whose server exited before it answered
is told the last `SHOWN_LINES` of them (`died_saying`; masked and cut by proxy/common/faults.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Final

from proxy.common.clock import Clock
from translators.wire.stdio_framing import FramingError, LineSplitter

READ_CHUNK: Final = 65536
MAX_LINE_BYTES: Final = 65536  # longer stderr lines are not buffered, only counted
LINE_CHARS: Final = 1000
LINES_PER_S: Final = 50
WINDOW_S: Final = 1.0
TAIL_LINES: Final = 20
SHOWN_LINES: Final = 5  # of the tail, in the error of a client whose server exited unanswering


class StderrRelay:
    """Feeds stderr bytes to `logger` (a structlog logger bound to the process) under a rate
    limit."""

    def __init__(
        self,
        logger: Any,
        *,
        lines_per_s: int = LINES_PER_S,
        clock: Clock = time.monotonic,
    ) -> None:
        self._log = logger
        self._lines_per_s = lines_per_s
        self._clock = clock
        self._splitter = LineSplitter(MAX_LINE_BYTES)
        self._window_start: float | None = None
        self._in_window = 0
        self.logged = 0
        self.suppressed = 0
        self._unreported = 0
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)

    async def run(self, stream: asyncio.StreamReader | None) -> None:
        """Relay until EOF (or cancellation); the last unterminated line and the suppressed
        count are reported on the way out."""
        try:
            while stream is not None:
                chunk = await stream.read(READ_CHUNK)
                if not chunk:
                    break
                self.feed(chunk)
        finally:
            self.finish()

    def feed(self, data: bytes) -> None:
        for item in self._splitter.feed(data):
            self._line(item)

    def finish(self) -> None:
        rest = self._splitter.remainder()
        if rest.strip():
            self._line(rest)
        self._report_suppressed()

    def _line(self, item: bytes | FramingError) -> None:
        if isinstance(item, FramingError):
            self.tail.append(f"[a line of {item.size} bytes, omitted]")
        else:
            self.tail.append(item.decode("utf-8", errors="replace").rstrip()[:LINE_CHARS])
        now = self._clock()
        if self._window_start is None or now - self._window_start >= WINDOW_S:
            self._report_suppressed()
            self._window_start, self._in_window = now, 0
        if self._in_window >= self._lines_per_s:
            self.suppressed += 1
            self._unreported += 1
            return
        self._in_window += 1
        self.logged += 1
        if isinstance(item, FramingError):
            self._log.info("upstream_stderr", line=None, omitted_bytes=item.size)
            return
        text = item.decode("utf-8", errors="replace").rstrip()
        if len(text) > LINE_CHARS:
            self._log.info(
                "upstream_stderr", line=text[:LINE_CHARS], truncated_chars=len(text) - LINE_CHARS
            )
        else:
            self._log.info("upstream_stderr", line=text)

    def _report_suppressed(self) -> None:
        if self._unreported:
            self._log.warning(
                "upstream_stderr_suppressed", lines=self._unreported, limit_per_s=self._lines_per_s
            )
            self._unreported = 0


def died_saying(exited: str, stderr: StderrRelay) -> str:
    """Why a process ended before it answered: `exited` (its exit, in the bridge's words) and the
    last lines it wrote to stderr, if any."""
    said = " | ".join(list(stderr.tail)[-SHOWN_LINES:])
    return f"{exited}; its stderr ended with: {said}" if said else exited


__all__ = ["LINES_PER_S", "LINE_CHARS", "SHOWN_LINES", "TAIL_LINES", "StderrRelay", "died_saying"]
