"""Plain-word config errors: pydantic's validation errors put as what is allowed, with the value
that was given when it is not a secret (docs/operations.md § Configuration errors).

pydantic words an error for a developer ("Value error, ...", "Input should be a valid number,
unable to parse string as a number"); a person running the bridge needs the setting, where it came
from, what they gave and what would do. Secrets (`SecretStr` settings, `upstream.env`) are never
repeated, and user info in a URL is masked.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import SecretStr

# Settings whose value may be a secret: never echoed in an error.
SECRET_SETTINGS: Final = frozenset(
    {"held.keys", "upstream.authorization", "upstream.env", "upstream.headers"}
)
MAX_SHOWN: Final = 120
_USERINFO: Final = re.compile(r"(//)[^/@\s]*@")
_BOUNDS: Final = {
    "greater_than": ("gt", "a number above {}"),
    "greater_than_equal": ("ge", "a number of at least {}"),
    "less_than": ("lt", "a number below {}"),
    "less_than_equal": ("le", "a number of at most {}"),
    "string_too_short": ("min_length", "at least {} characters"),
    "string_too_long": ("max_length", "at most {} characters"),
}
_KINDS: Final = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "dict_type": "a table of name = value",
    "tuple_type": "a list",
}


def shared_key(dotted: str) -> str:
    """`upstream.url` for a named upstream's `upstreams.NAME.url`; any other key as it is."""
    parts = dotted.split(".", 2)
    return f"upstream.{parts[2]}" if parts[0] == "upstreams" and len(parts) == 3 else dotted


def shown(dotted: str, value: Any) -> str | None:
    """How a given value is quoted in an error, or None when it must not be (a named upstream's
    settings are secret as `[upstream]`'s; of the named tables, only their names are quoted)."""
    dotted = shared_key(dotted)
    secret = any(dotted == key or dotted.startswith(key + ".") for key in SECRET_SETTINGS)
    if secret or isinstance(value, SecretStr):
        return None
    if dotted == "upstreams" and isinstance(value, dict):
        value = ", ".join(str(name) for name in value)
    if isinstance(value, (list, tuple)):
        value = ",".join(str(item) for item in value)
    text = _USERINFO.sub(r"\1***@", str(value))
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "...")


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` was most likely meant as (a typo, a letter case), or None."""
    by_folded = {candidate.lower(): candidate for candidate in candidates}
    found = difflib.get_close_matches(name.lower(), list(by_folded), n=1, cutoff=0.75)
    return by_folded[found[0]] if found else None


def no_such_setting(suggestion: str | None) -> str:
    """An unknown setting: the nearest known one, else where the list of settings is."""
    if suggestion is not None:
        return f"no such setting; did you mean {suggestion}?"
    return "no such setting; `mrtr-bridge config example` prints every setting"


def allowed(error: Mapping[str, Any], suggestion: str | None = None) -> str:
    """What the setting accepts, in plain words, from one pydantic error (`suggestion`: the
    nearest known setting, for an unknown one)."""
    kind, context = error["type"], error.get("ctx") or {}
    if kind == "value_error":
        return str(context.get("error") or error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"allowed: {context.get('expected')}"
    if kind == "extra_forbidden":
        return no_such_setting(suggestion)
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        bound = context.get(name)
        return "allowed: " + words.format(f"{bound:g}" if isinstance(bound, float) else bound)
    if kind in _KINDS:
        return f"allowed: {_KINDS[kind]}"
    return str(error["msg"])


__all__ = ["SECRET_SETTINGS", "allowed", "nearest", "no_such_setting", "shared_key", "shown"]
