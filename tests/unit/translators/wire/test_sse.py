"""The incremental SSE decoder and the encoder (translators/wire/sse.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from translators.wire.errors import BridgeBug, UpstreamProtocolError
from translators.wire.sse import (
    DEFAULT_EVENT_TYPE,
    SSEDecoder,
    SSEEvent,
    encode_comment,
    encode_event,
)

LIMIT = 1 << 20
STREAM = (
    b": keep-alive comment\n"
    b"id: 7\nretry: 250\ndata: \n\n"
    b'event: message\nid: 8\ndata: {"jsonrpc":"2.0",\ndata: "id":1}\n\n'
    b"event: custom\ndata: x\n\n"
)
EXPECTED = [
    SSEEvent(data="", event_id="7", retry=250),
    SSEEvent(data='{"jsonrpc":"2.0",\n"id":1}', event_id="8"),
    SSEEvent(data="x", event="custom"),
]


def decode(*chunks: bytes, limit: int = LIMIT) -> list[SSEEvent]:
    decoder = SSEDecoder(max_event_size=limit)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def test_decodes_priming_multiline_and_custom_events() -> None:
    """A priming event, a two-line data event and a named event come out in order."""
    assert decode(STREAM) == EXPECTED


def test_every_two_way_split_gives_the_same_events() -> None:
    """Splitting the stream at any byte gives exactly the same events."""
    for cut in range(len(STREAM) + 1):
        assert decode(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_byte_at_a_time_gives_the_same_events() -> None:
    """Feeding one byte at a time gives exactly the same events."""
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


@pytest.mark.parametrize("newline", [b"\r\n", b"\r", b"\n"])
def test_all_line_endings_are_equivalent(newline: bytes) -> None:
    """CRLF, CR and LF end lines alike, split anywhere."""
    stream = STREAM.replace(b"\n", newline)
    assert decode(stream) == EXPECTED
    for cut in range(len(stream) + 1):
        assert decode(stream[:cut], stream[cut:]) == EXPECTED, cut


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    """A CR ending one chunk and the LF starting the next make one line end, not an empty line."""
    events = decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert events == [SSEEvent(data="a\nb")]


def test_cr_then_lone_lf_chunk_does_not_swallow_a_later_lf() -> None:
    """After a skipped LF, a later LF is a real (dispatching) empty line."""
    assert decode(b"data: a\r", b"\n", b"\n") == [SSEEvent(data="a")]


def test_bom_is_stripped_only_at_the_start() -> None:
    """A leading BOM is dropped even when split; a later one makes an unknown field."""
    bom = b"\xef\xbb\xbf"
    assert decode(bom[:1], bom[1:2], bom[2:] + b"data: a\n\n") == [SSEEvent(data="a")]
    assert decode(b"data: a\n\n" + bom + b"data: b\n\n") == [SSEEvent(data="a")]


def test_comments_and_unknown_fields_are_ignored() -> None:
    """Comment lines and unknown fields change nothing."""
    assert decode(b":c\nfoo: bar\ndata: a\n: another\n\n") == [SSEEvent(data="a")]


def test_field_without_colon_and_without_space() -> None:
    """`data` alone is an empty data line; `data:x` keeps its value; only one space is removed."""
    assert decode(b"data\ndata:x\ndata:  y\n\n") == [SSEEvent(data="\nx\n y")]


def test_block_without_data_moves_cursor_but_is_not_dispatched() -> None:
    """An id/retry-only block dispatches nothing but updates last_event_id and retry_ms."""
    decoder = SSEDecoder(max_event_size=LIMIT)
    assert decoder.feed(b"id: 41\nretry: 1500\n\n") == []
    assert (decoder.last_event_id, decoder.retry_ms) == ("41", 1500)
    assert decoder.feed(b"data: z\n\n") == [SSEEvent(data="z")]
    assert decoder.last_event_id == "41"


def test_invalid_retry_and_nul_id_are_ignored() -> None:
    """A non-numeric retry and an id containing NUL leave the cursor as it was."""
    decoder = SSEDecoder(max_event_size=LIMIT)
    events = decoder.feed(b"retry: 10x\nid: a\x00b\ndata: q\n\n")
    assert events == [SSEEvent(data="q")]
    assert (decoder.last_event_id, decoder.retry_ms) == (None, None)


def test_incomplete_event_is_held_back() -> None:
    """An event is dispatched only on its terminating empty line."""
    decoder = SSEDecoder(max_event_size=LIMIT)
    assert decoder.feed(b"data: partial\n") == []
    assert decoder.feed(b"\n") == [SSEEvent(data="partial")]


def test_invalid_utf8_is_replaced() -> None:
    """Bytes that are not UTF-8 decode to U+FFFD rather than failing."""
    assert decode(b"data: \xff\n\n") == [SSEEvent(data="\ufffd")]


def test_oversized_line_in_one_chunk_raises() -> None:
    """A data line larger than the limit raises UpstreamProtocolError."""
    with pytest.raises(UpstreamProtocolError, match="larger than 64 bytes"):
        decode(b"data: " + b"x" * 100 + b"\n\n", limit=64)


def test_oversized_partial_line_across_chunks_raises() -> None:
    """An unterminated line that keeps growing raises before it exceeds the limit by much."""
    decoder = SSEDecoder(max_event_size=64)
    decoder.feed(b"data: " + b"x" * 40)
    with pytest.raises(UpstreamProtocolError):
        decoder.feed(b"x" * 40)


def test_oversized_accumulated_data_raises() -> None:
    """Many small data lines of one event add up to the limit."""
    with pytest.raises(UpstreamProtocolError):
        decode(b"data: 0123456789\n" * 10, limit=64)


def test_encode_event_round_trips() -> None:
    """encode_event output decodes back to the same event, multi-line data included."""
    wire = encode_event("a\nb\r\nc", event="message", event_id="s1:3", retry=100)
    assert wire == b"id: s1:3\nevent: message\nretry: 100\ndata: a\ndata: b\ndata: c\n\n"
    assert decode(wire) == [SSEEvent(data="a\nb\nc", event_id="s1:3", retry=100)]


def test_encode_rejects_multiline_id_and_event() -> None:
    """An id or event name with a line break cannot be encoded."""
    with pytest.raises(BridgeBug):
        encode_event("x", event_id="a\nb")
    with pytest.raises(BridgeBug):
        encode_event("x", event="a\rb")


def test_encode_comment_is_invisible_to_the_decoder() -> None:
    """A comment (even multi-line) produces no event."""
    wire = encode_comment("ping\nagain")
    assert wire == b": ping\n: again\n"
    assert decode(wire + encode_event("x")) == [SSEEvent(data="x", event=DEFAULT_EVENT_TYPE)]


_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x00"),
    max_size=20,
)


@given(
    events=st.lists(
        st.tuples(st.lists(_text, min_size=1, max_size=3), st.none() | _text), max_size=5
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_encoded_streams_decode_identically_under_any_chunking(
    events: list[tuple[list[str], str | None]], cuts: list[int]
) -> None:
    """Any encoded sequence of events decodes to itself whatever the chunk boundaries."""
    wire = b"".join(encode_event("\n".join(lines), event_id=event_id) for lines, event_id in events)
    points = sorted({min(cut, len(wire)) for cut in cuts} | {0, len(wire)})
    chunks = [wire[a:b] for a, b in itertools.pairwise(points)]
    expected = [SSEEvent(data="\n".join(lines), event_id=event_id) for lines, event_id in events]
    assert decode(*chunks) == expected
