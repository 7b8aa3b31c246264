"""What the bridge shows of a text it did not write (docs/security.md § What the bridge shows).

`shown_uri`: a URI or URL without the userinfo of its authority (`user:password@`), its query and
its fragment, whatever its scheme: a client's resource URI on the access line, the status page
and a span; the upstream's URL or the forward proxy's in a log line, an error message or `check`'s
report. `bounded`: a text cut to a length bound, saying that it was cut and how long it was: every
text of every log line (proxy/observe/redaction.py), the names on the access line and the status
page, the fields of a span, the reason of an upstream failure a client is told
(proxy/common/faults.py). `masked`: a text with bearer and basic credentials and sealed
`requestState` blobs masked, by the patterns the log's redaction uses too (its safety net).
`shown_principal`: a caller's principal digest by its first 12 hex digits, on every log line, the
access line, a span and the status page alike; `shown_id`: a held call's or a task's id on a log
line, by the first 12 hex digits of its bytes.
"""

from __future__ import annotations

import re
from typing import Final

REDACTED: Final = "[redacted]"
SHOWN_HEX_DIGITS: Final = 12
CREDENTIAL: Final = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9\-._~+/]+=*")
CREDENTIAL_HINT: Final = re.compile(r"(?i)bearer|basic")  # what every CREDENTIAL match contains
SEALED_STATE: Final = re.compile(r"\bv1\.[A-Za-z0-9_\-]{16,}={0,2}")
# RFC 3986 appendix B: scheme, authority, path; the query and the fragment are left out. Every
# text matches (each part may be empty), so a URI that is not valid is still made safe.
_URI_PARTS: Final = re.compile(r"([^:/?#]+:)?(//[^/?#]*)?([^?#]*)", re.DOTALL)


def shown_uri(uri: str) -> str:
    """`uri` without its userinfo (RFC 3986 § 3.2.1: it may carry a password), query and fragment
    (they may carry a token): `secret://alice:pw@vault/x?key=1` -> `secret://vault/x`. Only an
    authority (after `//`) has a userinfo: `mailto:alice@example.com` is kept whole."""
    match = _URI_PARTS.match(uri)
    assert match is not None  # every part is optional
    scheme, authority, path = match.groups("")
    if "@" in authority:
        authority = "//" + authority.rpartition("@")[2]  # the host is after the last "@"
    return f"{scheme}{authority}{path}"


def cut_mark(length: int, unit: str = "characters") -> str:
    """What follows the head kept of a value that was cut: how long it was."""
    return f"...[cut, {length} {unit}]"


def bounded(text: str, limit: int, length: int | None = None) -> str:
    """`text`, or, when it is longer than `limit` characters, its first `limit` characters and
    `...[cut, <its length> characters]`. The cut is between characters, before any escaping (JSON,
    HTML), so it never splits a UTF-8 sequence or an escape. `length`: the whole text's, when
    `text` is already a head of it (the log writer masks a head before cutting it)."""
    length = len(text) if length is None else length
    if length <= limit:
        return text
    return text[:limit] + cut_mark(length)


def shown_principal(principal: str) -> str:
    """A principal digest as shown: its first 12 hex digits, enough to tell callers apart, and the
    same on every line that names it (`local` and `stdio` are shown whole)."""
    return principal[:SHOWN_HEX_DIGITS]


def shown_id(value: bytes) -> str:
    """A held call's or a task's id on a log line: the first 12 hex digits of its bytes (enough to
    follow one call through the log; never enough to forge it: an id is 16 bytes or more)."""
    return value[: SHOWN_HEX_DIGITS // 2].hex()


def masked(text: str) -> str:
    """`text` with bearer and basic credentials and sealed `requestState` blobs masked."""
    if "v1." not in text and not CREDENTIAL_HINT.search(text):
        return text
    text = CREDENTIAL.sub(lambda match: f"{match.group(1)}{match.group(2)}{REDACTED}", text)
    return SEALED_STATE.sub(f"v1.{REDACTED}", text)


__all__ = [
    "CREDENTIAL",
    "CREDENTIAL_HINT",
    "REDACTED",
    "SEALED_STATE",
    "bounded",
    "cut_mark",
    "masked",
    "shown_id",
    "shown_principal",
    "shown_uri",
]
