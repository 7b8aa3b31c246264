"""JSON: the hot path's codec (orjson where it gives exactly what the standard library gives, else
`json`), the canonical form and its digests (the one way the bridge hashes message content), and
`as_object`.

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

import hashlib
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
    where orjson cannot write it. Not canonical JSON (`translators.wire.fast_json` is)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, a huge integer, a non-str key
        return None


def canonical_json(value: Any) -> bytes:
    """Deterministic UTF-8 JSON: sorted keys, no whitespace. Lone surrogates (valid in parsed JSON,
    not in UTF-8) are kept as their code units, so any parsed value hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def digest(value: Any, size: int = 16) -> bytes:
    """The first `size` bytes of SHA-256 over the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value)).digest()[:size]


def as_object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (for optional `params` / `_meta`)."""
    return value if isinstance(value, dict) else {}


__all__ = ["as_object", "canonical_json", "digest", "dumps", "loads", "sorted_dumps"]
