"""translators/wire/fast_json.py decodes and encodes exactly as the standard library where it
matters:
integers beyond 64 bits stay integers, lone surrogates survive, strictness is the caller's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from translators.protocol.request_validation import decode_json
from translators.wire import fast_json
from translators.wire.errors import ParseError

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_round_trips_like_the_standard_library(value: Any) -> None:
    text = json.dumps(value)
    assert fast_json.loads(text.encode()) == json.loads(text)
    assert fast_json.loads(text) == json.loads(text)
    assert json.loads(fast_json.dumps(value)) == value


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": 18446744073709551616}',
        b'{"id": -9223372036854775809}',
        b'{"id": "\\ud800"}',
        b"[" * 2000 + b"]" * 2000,
        b'\xef\xbb\xbf{"a": 1}',
    ],
)
def test_what_orjson_would_change_goes_through_json(raw: bytes) -> None:
    try:
        expected: Any = json.loads(raw)
    except RecursionError:
        expected = RecursionError
    try:
        got: Any = fast_json.loads(raw)
    except RecursionError:
        got = RecursionError
    assert got == expected and type(got) is type(expected)


def test_big_integers_stay_integers_in_requests() -> None:
    decoded = decode_json(b'{"jsonrpc":"2.0","id":123456789012345678901234,"method":"x"}', 64)
    assert decoded["id"] == 123456789012345678901234


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e400}', b"{"])
def test_the_callers_strictness_still_applies(raw: bytes) -> None:
    with pytest.raises(ParseError):
        decode_json(raw, 64)


def test_dumps_is_compact_utf8_with_escapes_only_for_lone_surrogates() -> None:
    assert fast_json.dumps({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}'.encode()
    assert fast_json.dumps({"id": "\ud800"}) == b'{"id":"\\ud800"}'
    assert fast_json.dumps({"id": 2**70}) == b'{"id":1180591620717411303424}'
