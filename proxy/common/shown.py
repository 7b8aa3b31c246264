"""What the bridge shows of a text it did not write (docs/security.md § What the bridge shows).

`shown_uri`: a URI or URL without the userinfo of its authority (`user:password@`), its query and
its fragment, whatever its scheme: a client's resource URI on the access line, the status page
and a span; the upstream's URL or the forward proxy's in a log line, an error message or `check`'s
report. `bounded`: a text cut to a length bound, saying that it was cut and how long it was: every
text of every log line (proxy/observe/redaction.py), the names on the access line and the status
page, the fields of a span.
"""

from __future__ import annotations

import re
from typing import Final

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


__all__ = ["bounded", "cut_mark", "shown_uri"]
