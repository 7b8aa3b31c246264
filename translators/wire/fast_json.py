"""JSON on the hot path: orjson where it gives exactly what the standard library gives, else `json`.

Every forwarded call decodes the client's body and the upstream's reply and encodes the upstream
request and the client's reply; orjson (C) does each several times faster than `json`. It is
stricter, and it parses an integer beyond 64 bits as a float, so:

- `loads` tries orjson only when the text has no run of 19 digits (an integer that may not fit
  64 bits: the standard library keeps it exact) and falls back to `fallback` (the caller's own
  `json.loads`, with its own strictness) whenever orjson refuses the text: `NaN`, lone surrogate
  escapes, nesting beyond 1,024 levels, non-UTF-8 bytes. So a text is decoded as before or
  refused with the same error as before.
- `dumps` is compact UTF-8 (`separators=(",", ":")`, `ensure_ascii=False`); a value orjson cannot
  encode (a lone surrogate, a non-string key, an integer beyond 64 bits) goes through `json`,
  with `\\u` escapes when the text would not be valid UTF-8. One difference remains: orjson
  writes a float NaN or infinity as `null` where `json` wrote `NaN`, which is not JSON at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import orjson

_ZERO_DIGITS: Final = bytes.maketrans(b"123456789", b"000000000")
_LONG_INTEGER: Final = b"0" * 19  # 19 digits in a row, once every digit reads as 0


def loads(raw: bytes | str, fallback: Callable[[Any], Any] = json.loads) -> Any:
    """`raw` decoded by orjson when that is exact, else by `fallback(raw)` (which may raise)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    if _LONG_INTEGER not in data.translate(_ZERO_DIGITS):  # a C pass, cheaper than a regex
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return fallback(raw)


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes (non-ASCII kept; `\\u` escapes only for lone surrogates)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        try:
            return text.encode()
        except UnicodeEncodeError:
            return json.dumps(value, separators=(",", ":")).encode()


def sorted_dumps(value: Any) -> bytes | None:
    """orjson's bytes of `value` with sorted keys (a memo key: equal only for equal values), or None
    where orjson cannot write it. Not canonical JSON (`translators.wire.canonical` is)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, a huge integer, a non-str key
        return None


__all__ = ["dumps", "loads", "sorted_dumps"]
