"""The redaction safety net and the length bound of every log line (docs/decisions.md § 5,
docs/operations.md § Log format).

`redact` masks the values of known secret keys at any depth (Authorization, tokens, requestState,
session ids, keys, elicited content, input responses) and bearer credentials or sealed states
inside any string. It is a safety net, not a licence to log secrets. It also cuts every text to
`MAX_LOGGED_TEXT` characters (a traceback to `MAX_LOGGED_TRACEBACK`) and every list or mapping to
`MAX_LOGGED_ITEMS` items, whoever supplied it (a client's request id or method, an upstream's
message), with proxy/common/shown.py's `bounded`: a line has a bounded length. The JSON line writer
(proxy/observe/logs.py, `_json_line`) applies the same rules in its one pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

from structlog.typing import EventDict, WrappedLogger

from proxy.common.shown import CREDENTIAL_HINT as _CREDENTIAL_HINT
from proxy.common.shown import REDACTED, bounded, cut_mark, masked

# Compared after lower-casing and turning "-" into "_".
SECRET_KEYS: Final[frozenset[str]] = frozenset(
    {
        "authorization",
        "proxy_authorization",
        "cookie",
        "set_cookie",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "bearer",
        "password",
        "secret",
        "api_key",
        "x_api_key",
        "requeststate",
        "request_state",
        "session_id",
        "mcp_session_id",
        "key",
        "keys",
        "content",
        "answer",
        "answers",
        "inputresponses",
        "input_responses",
    }
)
_MAX_DEPTH: Final = 8
MAX_LOGGED_TEXT: Final = 1000  # characters of any text in a log line (then `cut_mark`)
MAX_LOGGED_TRACEBACK: Final = 10_000  # characters of a traceback (`exception`, `stack`)
MAX_LOGGED_ITEMS: Final = 100  # items of a list or mapping in a log line
_TRACEBACK_KEYS: Final = frozenset({"exception", "stack"})
# A text is masked a little beyond its cut, so that a credential or sealed state that begins before
# the cut is masked, not shown in part (a state is recognised by its first 16 characters).
_MASK_MARGIN: Final = 32


_KEY_VERDICTS: dict[str, bool] = {}  # the keys seen so far (a few dozen in the code's events)
MAX_KEY_VERDICTS: Final = 4096


class GeneratedText(str):
    """A text the bridge made itself, new on every line (a request's random hex id): nothing a
    client or server sent, so nothing in it to mask. Written as it is, and never remembered among
    the clean texts, which a new id on every line would fill and flush (the memos below and the
    line writer's, proxy/observe/logs.py)."""

    __slots__ = ()


_PLAIN_VALUES: Final = frozenset({int, float, bool, type(None), GeneratedText})  # nothing to mask


def is_secret_key(key: object) -> bool:
    """Whether a log key (or a nested dict key) names a secret."""
    if not isinstance(key, str):
        return False
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        verdict = key.lower().replace("-", "_") in SECRET_KEYS
        if len(_KEY_VERDICTS) < MAX_KEY_VERDICTS:
            _KEY_VERDICTS[key] = verdict
    return verdict


# Short texts seen to hold nothing to mask (method names, outcomes, eras: most log values repeat),
# so the patterns run once per distinct text. Bounded: a full memo starts over, so texts seen once
# (a client's string request ids, say) cannot keep the ones that repeat out of it for good.
_CLEAN_TEXTS: set[str] = set()
MAX_CLEAN_TEXTS: Final = 4096
_MAX_CLEAN_TEXT_LENGTH: Final = 64


def is_clean_text(text: str) -> bool:
    """Whether `mask_text` found `text` clean and remembers it (short texts only)."""
    return text in _CLEAN_TEXTS


def mask_text(text: str, limit: int = MAX_LOGGED_TEXT) -> str:
    """Mask bearer/basic credentials and sealed `requestState` blobs inside free text, and cut it
    to `limit` characters (`bounded`)."""
    if len(text) > limit:  # masked a little beyond the cut, then cut
        head = mask_text(text[: limit + _MASK_MARGIN], limit + _MASK_MARGIN)
        return bounded(head, limit, len(text))
    if text in _CLEAN_TEXTS:
        return text
    if "v1." not in text and not _CREDENTIAL_HINT.search(text):
        # most log values: nothing either pattern could match
        if len(text) <= _MAX_CLEAN_TEXT_LENGTH:
            if len(_CLEAN_TEXTS) >= MAX_CLEAN_TEXTS:
                _CLEAN_TEXTS.clear()
            _CLEAN_TEXTS.add(text)
        return text
    return masked(text)  # the patterns' one home: proxy/common/shown.py


def scrub(value: Any, depth: int) -> Any:
    """`value` with secret keys masked at any depth and credentials masked in its texts, its texts
    (keys too) and its lists and mappings cut to their bounds."""
    if type(value) in _PLAIN_VALUES:
        return value
    if isinstance(value, str):
        return mask_text(value)
    if depth >= _MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        return "[truncated]"
    if isinstance(value, Mapping):
        return _scrub_mapping(value, depth)
    if isinstance(value, list | tuple):
        items = [scrub(item, depth + 1) for item in value[:MAX_LOGGED_ITEMS]]
        if len(value) > MAX_LOGGED_ITEMS:
            items.append(cut_mark(len(value), "items"))
        return items
    return value


def _scrub_mapping(value: Mapping[Any, Any], depth: int) -> dict[Any, Any]:
    scrubbed: dict[Any, Any] = {}
    for key, item in islice(value.items(), MAX_LOGGED_ITEMS):
        shown = mask_text(key) if type(key) is str else key
        scrubbed[shown] = REDACTED if is_secret_key(key) else scrub(item, depth + 1)
    if len(value) > MAX_LOGGED_ITEMS:
        scrubbed["..."] = cut_mark(len(value), "items")
    return scrubbed


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask secret keys at any depth and credentials inside strings.

    The top level is `scrub` unrolled, with the key verdicts read from their cache directly:
    every log line passes here (the access line has 20 fields), and most values are numbers,
    None or short strings."""
    verdicts, clean, limit = _KEY_VERDICTS, _CLEAN_TEXTS, MAX_LOGGED_TEXT
    redacted: EventDict = {}
    for key, value in event_dict.items():
        secret = verdicts.get(key)
        if secret is None:
            secret = is_secret_key(key)
        if secret:
            redacted[key] = REDACTED
        elif type(value) in _PLAIN_VALUES:
            redacted[key] = value
        elif type(value) is str:
            redacted[key] = (
                value
                if value in clean
                else mask_text(value, MAX_LOGGED_TRACEBACK if key in _TRACEBACK_KEYS else limit)
            )
        else:
            redacted[key] = scrub(value, 1)
    return redacted


__all__ = [
    "MAX_CLEAN_TEXTS",
    "MAX_KEY_VERDICTS",
    "MAX_LOGGED_ITEMS",
    "MAX_LOGGED_TEXT",
    "MAX_LOGGED_TRACEBACK",
    "REDACTED",
    "SECRET_KEYS",
    "GeneratedText",
    "is_clean_text",
    "is_secret_key",
    "mask_text",
    "redact",
    "scrub",
]
