"""`SessionCookies`: what one upstream session's responses set comes back on its later requests,
with the server's expiry and path honoured (RFC 6265 § 5.1.4, § 5.3). The load balancer end to end:
tests/integration/lb/test_sticky_cookies.py."""

from __future__ import annotations

from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import cast

import aiohttp
import pytest
from aiohttp._cookie_helpers import parse_set_cookie_headers
from yarl import URL

from proxy.upstream.http import cookies as cookies_module
from proxy.upstream.http.cookies import MAX_COOKIE_BYTES, MAX_COOKIES, SessionCookies


@dataclass
class Reply:
    """What `SessionCookies.update` reads of an aiohttp response."""

    url: URL
    cookies: SimpleCookie


def reply(url: str, *set_cookie: str) -> aiohttp.ClientResponse:
    """A response from `url` with these `Set-Cookie` headers, parsed as aiohttp parses them."""
    cookies: SimpleCookie = SimpleCookie()
    cookies.update(parse_set_cookie_headers(set_cookie))
    return cast(aiohttp.ClientResponse, Reply(URL(url), cookies))


def cookie_for(cookies: SessionCookies, path: str) -> str | None:
    sent: dict[str, str] = {}
    cookies.add_to(sent, path)
    return sent.get("Cookie")


def test_cookies_come_back_until_the_server_expires_them() -> None:
    """Set cookies are sent in the order set; a new value replaces the old; Max-Age 0 or an Expires
    in the past forgets one; nothing is sent before anything was set."""
    cookies = SessionCookies()
    assert cookie_for(cookies, "/mcp") is None
    cookies.update(reply("http://h/mcp", "SRV=a; Path=/", "lb=1; Max-Age=3600"))
    assert cookie_for(cookies, "/mcp") == "SRV=a; lb=1"
    cookies.update(reply("http://h/mcp", "SRV=b"))
    assert cookie_for(cookies, "/mcp") == "SRV=b; lb=1"
    cookies.update(reply("http://h/mcp", "lb=gone; Max-Age=0"))
    assert cookie_for(cookies, "/mcp") == "SRV=b"
    cookies.update(reply("http://h/mcp", "SRV=old; Expires=Thu, 01 Jan 1970 00:00:00 GMT"))
    assert cookie_for(cookies, "/mcp") is None


def test_a_cookie_goes_only_where_its_path_reaches() -> None:
    """HTTP+SSE posts to another path than its stream: a cookie scoped to `/sse` stays there; one
    without a path is for the directory it came from (`/` for `/sse`)."""
    cookies = SessionCookies()
    cookies.update(reply("http://h/sse", "stream=1; Path=/sse", "site=2"))
    assert cookie_for(cookies, "/sse") == "stream=1; site=2"
    assert cookie_for(cookies, "/sse/more") == "stream=1; site=2"
    assert cookie_for(cookies, "/messages/") == "site=2"
    assert cookie_for(cookies, "/ssex") == "site=2"
    nested = SessionCookies()
    nested.update(reply("http://h/api/mcp", "n=1"))
    assert (cookie_for(nested, "/api/mcp"), cookie_for(nested, "/other")) == ("n=1", None)


def test_a_hostile_server_cannot_grow_a_session_without_bound() -> None:
    """At most `MAX_COOKIES` names, each at most `MAX_COOKIE_BYTES`: past the cap a new name is
    not kept (the first ones, a load balancer's pin among them, stay); a kept name still changes."""
    cookies = SessionCookies()
    cookies.update(reply("http://h/mcp", "SRV=a"))
    flood = [f"c{index}=v" for index in range(MAX_COOKIES * 3)]
    cookies.update(reply("http://h/mcp", *flood))
    sent = cookie_for(cookies, "/mcp")
    assert sent is not None
    names = [pair.split("=")[0] for pair in sent.split("; ")]
    assert names == ["SRV", *[f"c{index}" for index in range(MAX_COOKIES - 1)]]
    cookies.update(reply("http://h/mcp", "SRV=b", f"big={'x' * MAX_COOKIE_BYTES}"))
    sent = cookie_for(cookies, "/mcp")
    assert sent is not None and sent.startswith("SRV=b; c0=v") and "big=" not in sent


def test_malformed_or_unsendable_cookies_are_not_kept() -> None:
    """What a hostile or broken server sets never breaks the session's requests: unparsable headers
    and attributes are ignored, and a name or value a `Cookie` header cannot carry (RFC 6265
    § 4.1.1: non-ASCII, spaces, quotes, separators) is not kept."""
    cookies = SessionCookies()
    cookies.update(
        reply(
            "http://h/mcp",
            "=",
            ";;;",
            "age=1; Max-Age=abc",
            "exp=1; Expires=garbage",
            "far=1; Expires=Thu, 01 Jan 99999 00:00:00 GMT",
            "euro=\u20ac",
            "sp=a b",
            "ok=v1",
        )
    )
    assert cookie_for(cookies, "/mcp") == "age=1; exp=1; far=1; ok=v1"


def test_a_cookie_runs_out_when_its_lifetime_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Max-Age` counts from when it was set and wins over `Expires` (RFC 6265 § 5.3); past its
    lifetime a cookie is no longer sent, without the server having to expire it."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(cookies_module.time, "time", lambda: now[0])
    cookies = SessionCookies()
    later = "Thu, 01 Jan 2037 00:00:00 GMT"
    cookies.update(
        reply("http://h/mcp", "short=1; Max-Age=60", f"long=2; Max-Age=600; Expires={later}")
    )
    cookies.update(
        reply("http://h/mcp", "keep=3", "dated=4; Expires=Mon, 15 Feb 2027 08:00:00 GMT")
    )
    assert cookie_for(cookies, "/mcp") == "short=1; long=2; keep=3; dated=4"
    now[0] += 61
    assert cookie_for(cookies, "/mcp") == "long=2; keep=3; dated=4"
    now[0] += 600
    assert cookie_for(cookies, "/mcp") == "keep=3; dated=4"
    now[0] += 31 * 86400
    assert cookie_for(cookies, "/mcp") == "keep=3"


def test_an_adopted_session_starts_with_the_cookies_its_task_id_carried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sealable` gives what is kept now (expired cookies left out), with paths and expiries;
    `restored` gives them back under the same checks, so a tampered-with list cannot smuggle a
    header break or an unbounded number of cookies."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(cookies_module.time, "time", lambda: now[0])
    cookies = SessionCookies()
    cookies.update(
        reply("http://h/mcp", "SRV=a; Path=/", "lb=1; Max-Age=3600", "gone=1; Max-Age=5")
    )
    now[0] += 10
    sealed = cookies.sealable()
    assert sealed == [("SRV", "a", "/", None), ("lb", "1", "/", 1_800_003_600_000)]
    again = SessionCookies.restored(sealed)
    assert cookie_for(again, "/mcp") == "SRV=a; lb=1"
    now[0] += 3600
    assert cookie_for(again, "/mcp") == "SRV=a" and again.sealable() == [("SRV", "a", "/", None)]
    hostile = [("bad", "a\r\nX: y", "/", None), ("sp ace", "v", "/", None)]
    hostile += [(f"c{index}", "v", "/", None) for index in range(MAX_COOKIES * 2)]
    restored = SessionCookies.restored(hostile)
    assert len(restored.sealable()) == MAX_COOKIES
    assert cookie_for(restored, "/mcp") == "; ".join(f"c{index}=v" for index in range(MAX_COOKIES))


async def test_a_secure_cookie_is_kept_only_from_an_https_upstream() -> None:
    """A client used directly never sends a `Secure` cookie over plain http (aiohttp's jar, which
    the check below runs, and httpx's alike), so a session with an http upstream does not keep
    one; over https it is sent like any other."""
    for url, sent in (("http://h.test/mcp", "lb=1"), ("https://h.test/mcp", "SRV=a; lb=1")):
        cookies = SessionCookies()
        cookies.update(reply(url, "SRV=a; Secure", "lb=1"))
        assert cookie_for(cookies, "/mcp") == sent
        jar = aiohttp.CookieJar()
        jar.update_cookies(reply(url, "SRV=a; Secure", "lb=1").cookies, URL(url))
        direct = jar.filter_cookies(URL(url))
        assert "; ".join(f"{name}={m.value}" for name, m in direct.items()) == sent
