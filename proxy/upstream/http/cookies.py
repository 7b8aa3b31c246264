"""The cookies of one upstream session (docs/decisions.md § 33).

A legacy client used directly keeps one cookie jar per connection to its server (the `mcp` SDKs
open one HTTP client per session), so a cookie the server, or a load balancer in front of it, sets
while serving a session comes back on that session's later requests and on no other. The bridge
does the same: the shared aiohttp client keeps no cookies (one jar for everyone would send one
principal's cookie on another's requests, and a sticky load balancer's cookie from the newest
session on every older one), and each session keeps its own here.

A session talks to one origin, so a cookie's domain always matches; its path is honoured, and a
cookie is forgotten when the server expires it (`Max-Age` of 0 or less, an `Expires` in the past).
A hostile server cannot grow a session without bound: it keeps at most `MAX_COOKIES`, each at most
`MAX_COOKIE_BYTES` of name and value (RFC 6265 § 6.1's minimums for a user agent); a new name past
the cap is not kept, so the first cookies (a load balancer's pin) stay; nor is a name or value a
`Cookie` header cannot carry.
"""

from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime
from http.cookies import Morsel
from typing import Final

import aiohttp

MAX_COOKIES: Final = 50
MAX_COOKIE_BYTES: Final = 4096


class SessionCookies:
    """What one session's responses set, sent back with its later requests."""

    __slots__ = ("_headers", "_values")

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, str]] = {}  # name: (value, path)
        self._headers: dict[str, str] = {}  # request path: its `Cookie` value

    def update(self, resp: aiohttp.ClientResponse) -> None:
        """Keep what `resp` set (call only when it has a `Set-Cookie` header)."""
        for name, morsel in resp.cookies.items():
            if _expired(morsel):
                self._values.pop(name, None)
            elif not _sendable(name, morsel.value):
                continue  # a header could not carry it (RFC 6265 § 4.1.1), or a crafted one
            elif len(name) + len(morsel.value) > MAX_COOKIE_BYTES or (
                name not in self._values and len(self._values) >= MAX_COOKIES
            ):
                continue
            else:  # no path: the directory of the path it came from (RFC 6265 § 5.1.4)
                path = morsel["path"] or resp.url.path.rsplit("/", 1)[0] or "/"
                self._values[name] = (morsel.value, path)
        self._headers.clear()

    def add_to(self, headers: dict[str, str], path: str) -> None:
        """Send the session's cookies for `path` with a request (after a configured `Cookie`)."""
        if not self._values:
            return
        header = self._headers.get(path)
        if header is None:
            header = self._headers[path] = "; ".join(
                f"{name}={value}"
                for name, (value, cookie_path) in self._values.items()
                if _path_matches(path, cookie_path)
            )
        if header:
            configured = headers.get("Cookie")
            headers["Cookie"] = f"{configured}; {header}" if configured else header


# RFC 6265 § 4.1.1: a name is an RFC 7230 token; a value is cookie-octets (visible ASCII without
# DQUOTE, comma, semicolon and backslash)
_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE: Final = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")


def _sendable(name: str, value: str) -> bool:
    return _NAME.fullmatch(name) is not None and _VALUE.fullmatch(value) is not None


def _expired(morsel: Morsel[str]) -> bool:
    max_age = morsel["max-age"]
    if max_age:
        try:
            return int(max_age) <= 0
        except ValueError:
            return False
    expires = morsel["expires"]
    if not expires:
        return False
    try:
        return parsedate_to_datetime(expires).timestamp() <= time.time()
    except (TypeError, ValueError, OverflowError):
        return False


def _path_matches(request_path: str, cookie_path: str) -> bool:
    """RFC 6265 § 5.1.4."""
    if request_path == cookie_path:
        return True
    prefix = cookie_path if cookie_path.endswith("/") else f"{cookie_path}/"
    return request_path.startswith(prefix)


__all__ = ["SessionCookies"]
