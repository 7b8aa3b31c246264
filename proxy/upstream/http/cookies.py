"""The cookies of one upstream session (docs/decisions.md § 33).

A legacy client used directly keeps one cookie jar per connection to its server (the `mcp` SDKs
open one HTTP client per session), so a cookie the server, or a load balancer in front of it, sets
while serving a session comes back on that session's later requests and on no other. The bridge
does the same: the shared aiohttp client keeps no cookies (one jar for everyone would send one
principal's cookie on another's requests, and a sticky load balancer's cookie from the newest
session on every older one), and each session keeps its own here.

A session talks to one origin, so a cookie's domain always matches; its path is honoured, and a
cookie is forgotten when the server expires it (`Max-Age` of 0 or less, an `Expires` in the past)
or once the lifetime it was given (`Max-Age` first, else `Expires`: RFC 6265 § 5.3) runs out.
A hostile server cannot grow a session without bound: it keeps at most `MAX_COOKIES`, each at most
`MAX_COOKIE_BYTES` of name and value (RFC 6265 § 6.1's minimums for a user agent); a new name past
the cap is not kept, so the first cookies (a load balancer's pin) stay; nor is a name or value a
`Cookie` header cannot carry, nor a `Secure` cookie set over plain http (as aiohttp's and httpx's
jars, which the `mcp` SDKs use, never send one there).

A legacy task's id carries its session's cookies, sealed (`sealable`, `restored`), so that a
process adopting the task reaches the replica that holds the session (docs/tasks.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from email.utils import parsedate_to_datetime
from http.cookies import Morsel
from typing import Final, NamedTuple

import aiohttp

from translators.tasks_ext.task_ids import SealedCookie

MAX_COOKIES: Final = 50
MAX_COOKIE_BYTES: Final = 4096


class _Cookie(NamedTuple):
    value: str
    path: str
    expires: float | None  # seconds since the epoch; None: for the session's life


class SessionCookies:
    """What one session's responses set, sent back with its later requests."""

    __slots__ = ("_headers", "_next_expiry", "kept")

    def __init__(self) -> None:
        # by name; read outside (a request skips `add_to` while it is empty), written only here
        self.kept: dict[str, _Cookie] = {}
        self._headers: dict[str, str] = {}  # request path: its `Cookie` value
        self._next_expiry: float | None = None  # the soonest a kept cookie runs out

    def update(self, resp: aiohttp.ClientResponse) -> None:
        """Keep what `resp` set (call only when it has a `Set-Cookie` header)."""
        now = time.time()
        for name, morsel in resp.cookies.items():
            expires = _expiry(morsel, now)
            if expires is not None and expires <= now:
                self.kept.pop(name, None)
            elif not _sendable(name, morsel.value):
                continue  # a header could not carry it (RFC 6265 § 4.1.1), or a crafted one
            elif morsel["secure"] and resp.url.scheme != "https":
                continue  # `Secure` from a plain http origin is ignored (RFC 6265bis § 5.7)
            else:  # no path: the directory of the path it came from (RFC 6265 § 5.1.4)
                path = morsel["path"] or resp.url.path.rsplit("/", 1)[0] or "/"
                self._keep(name, _Cookie(morsel.value, path, expires))
        self._changed()

    def _keep(self, name: str, cookie: _Cookie) -> None:
        if len(name) + len(cookie.value) <= MAX_COOKIE_BYTES and (
            name in self.kept or len(self.kept) < MAX_COOKIES
        ):
            self.kept[name] = cookie

    def _changed(self) -> None:
        self._headers.clear()
        expiries = [c.expires for c in self.kept.values() if c.expires is not None]
        self._next_expiry = min(expiries, default=None)

    def add_to(self, headers: dict[str, str], path: str) -> None:
        """Send the session's cookies for `path` with a request (no other `Cookie` is ever set:
        `upstream.headers` cannot, and the relay does not pass a client's)."""
        if not self.kept:
            return
        if self._next_expiry is not None and self._next_expiry <= time.time():
            self._drop_expired()
        header = self._headers.get(path)
        if header is None:
            header = self._headers[path] = "; ".join(
                f"{name}={cookie.value}"
                for name, cookie in self.kept.items()
                if _path_matches(path, cookie.path)
            )
        if header:
            headers["Cookie"] = header

    def _drop_expired(self) -> None:
        now = time.time()
        self.kept = {
            name: cookie
            for name, cookie in self.kept.items()
            if cookie.expires is None or cookie.expires > now
        }
        self._changed()

    def sealable(self) -> list[SealedCookie]:
        """The cookies kept now, as a legacy task's id carries them."""
        self._drop_expired()
        return [
            (name, c.value, c.path, None if c.expires is None else int(c.expires * 1000))
            for name, c in self.kept.items()
        ]

    @classmethod
    def restored(cls, sealed: Iterable[SealedCookie]) -> SessionCookies:
        """The cookies an adopted session starts with: what `sealable` gave the process that
        opened it, under the same limits."""
        cookies = cls()
        for name, value, path, expires_ms in sealed:
            if _sendable(name, value):
                expires = None if expires_ms is None else expires_ms / 1000
                cookies._keep(name, _Cookie(value, path, expires))
        cookies._drop_expired()
        return cookies


# RFC 6265 § 4.1.1: a name is an RFC 7230 token; a value is cookie-octets (visible ASCII without
# DQUOTE, comma, semicolon and backslash)
_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE: Final = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")


def _sendable(name: str, value: str) -> bool:
    return _NAME.fullmatch(name) is not None and _VALUE.fullmatch(value) is not None


def _expiry(morsel: Morsel[str], now: float) -> float | None:
    """When the cookie runs out (seconds since the epoch), None for the session's life: `Max-Age`
    wins over `Expires`, a malformed one is ignored (RFC 6265 § 5.2.1, § 5.2.2, § 5.3)."""
    max_age = morsel["max-age"]
    if max_age:
        try:
            return now + min(int(max_age), _MAX_AGE_S)
        except ValueError:
            pass
    expires = morsel["expires"]
    if not expires:
        return None
    try:
        return parsedate_to_datetime(expires).timestamp()
    except (TypeError, ValueError, OverflowError):
        return None


_MAX_AGE_S: Final = 400 * 86400  # longer is cut to 400 days (RFC 6265bis § 5.5)


def _path_matches(request_path: str, cookie_path: str) -> bool:
    """RFC 6265 § 5.1.4."""
    if request_path == cookie_path:
        return True
    prefix = cookie_path if cookie_path.endswith("/") else f"{cookie_path}/"
    return request_path.startswith(prefix)


__all__ = ["SessionCookies"]
