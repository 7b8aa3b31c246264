"""Newline-delimited JSON framing for stdio (translators/wire/stdio_framing.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from translators.protocol.eras import LEGACY_VERSION
from translators.wire.stdio_framing import (
    HEAD_BYTES,
    FramingError,
    LineDecoder,
    LineSplitter,
    decode_line,
    frame,
)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def test_whole_lines_decode_in_order() -> None:
    """Two complete lines in one chunk come out as two messages, in order."""
    decoder = LineDecoder(1024)
    second = {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert decoder.feed(frame(PING) + frame(second)) == [PING, second]


def test_a_line_split_across_chunks_is_reassembled() -> None:
    """A message cut at every byte boundary still decodes once, when its newline arrives."""
    decoder = LineDecoder(1024)
    data = frame(PING)
    items = [item for byte in data for item in decoder.feed(bytes([byte]))]
    assert items == [PING]
    assert decoder.buffered == 0


def test_blank_lines_and_crlf_are_tolerated() -> None:
    """Blank lines are skipped and a CRLF line ending is accepted."""
    decoder = LineDecoder(1024)
    assert decoder.feed(b"\n  \n" + json.dumps(PING).encode() + b"\r\n\n") == [PING]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "line is not valid JSON"),
        (b"[1, 2]", "line is JSON but not an object"),
        (b'{"value": NaN}', "line is not valid JSON"),
        (b"\xff\xfe{}", "line is not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "line nests JSON too deeply"),
    ],
)
def test_malformed_lines_become_errors_and_later_lines_survive(line: bytes, reason: str) -> None:
    """A malformed line yields one error item with its size; the next line still decodes."""
    items = LineDecoder(1_000_000).feed(line + b"\n" + frame(PING))
    assert items == [FramingError(reason, len(line)), PING]


def test_framing_errors_carry_no_content() -> None:
    """An error item's fields are a fixed reason and a size, never the line's text."""
    [error] = LineDecoder(1024).feed(b'{"secret": "hunter2"\n')
    assert isinstance(error, FramingError)
    assert "hunter2" not in repr(error)


def test_oversized_line_is_rejected_once_with_a_bounded_buffer() -> None:
    """A line over the limit is reported as soon as it outgrows it, never buffered, then skipped to
    its end."""
    decoder = LineDecoder(1024)
    first = decoder.feed(b"a" * 1000)
    assert first == [] and decoder.buffered == 1000
    [error] = decoder.feed(b"a" * 100)
    assert isinstance(error, FramingError)
    assert error.reason == "line longer than the limit of 1024 bytes"
    assert error.size == 1100
    assert decoder.buffered == 0
    assert decoder.feed(b"a" * 5000) == []
    assert decoder.buffered == 0
    assert decoder.feed(b"aaa\n" + frame(PING)) == [PING]


def test_line_of_exactly_the_limit_is_accepted() -> None:
    """The limit counts bytes without the newline: a line of exactly that size passes, one more
    fails."""

    def padded(pad: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "result": {"pad": "p" * pad}}

    fitting = padded(200 - (len(frame(padded(0))) - 1))
    assert LineDecoder(200).feed(frame(fitting)) == [fitting]
    [error] = LineDecoder(200).feed(frame(padded(201 - (len(frame(padded(0))) - 1))))
    assert isinstance(error, FramingError) and error.size == 201


def test_oversized_response_keeps_its_id() -> None:
    """An oversized line that starts like a response reports its id, so its call can fail at
    once."""
    line = frame({"jsonrpc": "2.0", "id": 42, "result": {"text": "x" * 5000}})
    [error] = LineDecoder(1024).feed(line)
    assert isinstance(error, FramingError)
    assert (error.head_id, error.head_key, error.is_response_head) == (42, "result", True)


def test_oversized_push_keeps_its_string_id_and_is_not_a_response() -> None:
    """An oversized request keeps its string id and is marked as a request, not a response."""
    line = frame(
        {
            "jsonrpc": "2.0",
            "id": "push-7",
            "method": "elicitation/create",
            "params": {"m": "y" * 5000},
        }
    )
    [error] = LineSplitter(1024).feed(line)
    assert isinstance(error, FramingError)
    assert (error.head_id, error.head_key, error.is_response_head) == ("push-7", "method", False)


def test_oversized_line_without_a_leading_id_has_none() -> None:
    """When the id is not at the start of the line (or absent), no id is guessed."""
    line = b'{"result": {"id": 5}, "id": 3, "pad": "' + b"z" * 3000 + b'"}\n'
    [error] = LineSplitter(1024).feed(line)
    assert isinstance(error, FramingError)
    assert (error.head_id, error.head_key) == (None, None)


def test_head_is_bounded() -> None:
    """Only the first HEAD_BYTES bytes are searched for the id."""
    line = b'{"jsonrpc":"2.0",' + b" " * HEAD_BYTES + b'"id":1,"result":{}}'
    [error] = LineSplitter(64).feed(line + b"\n")
    assert isinstance(error, FramingError) and error.head_id is None


def test_remainder_returns_the_unterminated_tail() -> None:
    """`remainder()` hands back the unfinished line (for stderr at EOF) and clears the buffer."""
    splitter = LineSplitter(64)
    assert splitter.feed(b"one\ntwo") == [b"one"]
    assert splitter.remainder() == b"two"
    assert splitter.buffered == 0


def test_frame_is_one_compact_line() -> None:
    """`frame` writes compact JSON, escapes newlines inside strings and ends with exactly one
    newline."""
    message = {
        "jsonrpc": "2.0",
        "method": "x",
        "params": {"text": "a\nb\r\u2028é", "version": LEGACY_VERSION},
    }
    data = frame(message)
    assert data.endswith(b"\n") and data.count(b"\n") == 1 and b"\r" not in data
    assert b", " not in data and b": " not in data
    assert decode_line(data[:-1]) == message


def test_frame_refuses_non_json_numbers() -> None:
    """NaN is not JSON, so framing it is an error rather than a line the peer cannot parse."""
    with pytest.raises(ValueError):
        frame({"value": float("nan")})


def test_splitter_rejects_a_non_positive_limit() -> None:
    """A zero limit is a programming error."""
    with pytest.raises(ValueError):
        LineSplitter(0)
