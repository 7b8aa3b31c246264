"""The one redirect rule of every HTTP client to the upstream (`proxy/upstream/http/outbound.py`,
docs/security.md, "Upstream redirects"), against real aiohttp servers: a redirect off the origin
of `upstream.url` is refused before anything reaches the target (`upstream.headers` included),
one within it is followed when it keeps the request as it is, a loop stops; and the OAuth
metadata fetch, which follows none, reads a document to its end within its 64 KiB."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from chunked import chunked_json

from config.settings import UpstreamSettings
from proxy.upstream.errors import map_upstream_errors
from proxy.upstream.http.metadata import MetadataFetcher
from proxy.upstream.http.outbound import origin_of, upstream_client
from translators.wire.errors import UpstreamProtocolError, UpstreamRedirected

ServerFactory = Callable[..., Awaitable[TestServer]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SECRET = {"X-API-Key": "k-0a9b8c-secret"}


class Recorder:
    """An aiohttp server that records every request (path, method, headers) and answers 200."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path, dict(request.headers)))
        return web.json_response({"at": request.path, "body": (await request.text())})

    async def serve(
        self, aiohttp_server: ServerFactory, *routes: tuple[str, Handler]
    ) -> TestServer:
        app = web.Application()
        for path, handler in routes:
            app.router.add_route("*", path, handler)
        app.router.add_route("*", "/{path:.*}", self.handle)
        return await aiohttp_server(app)


def redirect(location: str, status: int = 307) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handler


async def send(server: TestServer, method: str, path: str = "/mcp") -> Any:
    """One request through an upstream client for `server`'s `/mcp` (with `upstream.headers`)."""
    url = str(server.make_url("/mcp"))
    async with upstream_client(UpstreamSettings(url=url, headers=SECRET)) as client:
        with map_upstream_errors(url, method):
            body = None if method == "GET" else b"{}"
            async with client.request(method, server.make_url(path), data=body) as response:
                return await response.json()


async def test_a_redirect_to_another_origin_sends_nothing_there(
    aiohttp_server: ServerFactory,
) -> None:
    other = Recorder()
    elsewhere = await other.serve(aiohttp_server)
    upstream = await Recorder().serve(
        aiohttp_server, ("/mcp", redirect(str(elsewhere.make_url("/mcp"))))
    )
    with pytest.raises(UpstreamRedirected) as refused:
        await send(upstream, "POST")
    assert other.seen == []
    assert refused.value.off_origin
    assert refused.value.target == str(elsewhere.make_url("/mcp"))
    assert refused.value.public_error("c")["message"] == (
        "The upstream server redirected the request to another origin, which the bridge does not"
        " follow"
    )
    assert str(elsewhere.port) not in str(refused.value.public_error("c"))


@pytest.mark.parametrize("status", [307, 308])
async def test_a_redirect_within_the_origin_keeps_the_request(
    aiohttp_server: ServerFactory, status: int
) -> None:
    upstream = Recorder()
    server = await upstream.serve(aiohttp_server, ("/mcp", redirect("/mcp/", status)))
    assert await send(server, "POST") == {"at": "/mcp/", "body": "{}"}
    assert [(method, path) for method, path, _ in upstream.seen] == [("POST", "/mcp/")]
    assert upstream.seen[0][2]["X-API-Key"] == SECRET["X-API-Key"]


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_redirect_that_would_turn_a_post_into_a_get_is_refused(
    aiohttp_server: ServerFactory, status: int
) -> None:
    upstream = Recorder()
    server = await upstream.serve(aiohttp_server, ("/mcp", redirect("/mcp/", status)))
    with pytest.raises(UpstreamRedirected) as refused:
        await send(server, "POST")
    assert upstream.seen == []
    assert not refused.value.off_origin
    assert f"HTTP {status}" in refused.value.public_error("c")["message"]
    assert await send(server, "GET") == {"at": "/mcp/", "body": ""}  # a GET stays a GET


async def test_a_redirect_loop_within_the_origin_stops(aiohttp_server: ServerFactory) -> None:
    server = await Recorder().serve(
        aiohttp_server, ("/mcp", redirect("/loop")), ("/loop", redirect("/mcp"))
    )
    with pytest.raises(UpstreamRedirected, match="redirected POST 10 times") as refused:
        await send(server, "POST")
    assert refused.value.public == "The upstream server redirected the request too many times"


async def test_a_request_off_the_origin_is_never_sent(aiohttp_server: ServerFactory) -> None:
    other = Recorder()
    elsewhere = await other.serve(aiohttp_server)
    upstream = await Recorder().serve(aiohttp_server)
    url = str(upstream.make_url("/mcp"))
    async with upstream_client(UpstreamSettings(url=url, headers=SECRET)) as client:
        with pytest.raises(UpstreamRedirected):
            await client.get(elsewhere.make_url("/.well-known/oauth-protected-resource"))
    assert other.seen == []


def test_the_origin_is_scheme_host_and_port() -> None:
    assert origin_of("http://Example.com:80/mcp") == origin_of("http://example.com/other")
    assert origin_of("https://example.com/mcp") == origin_of("https://example.com:443/")
    assert origin_of("http://example.com/mcp") != origin_of("https://example.com/mcp")
    assert origin_of("http://example.com/mcp") != origin_of("http://example.com:8080/mcp")
    assert origin_of("http://example.com/mcp") != origin_of("http://api.example.com/mcp")


async def metadata(aiohttp_server: ServerFactory, handler: Handler) -> tuple[Any, TestServer]:
    """What the metadata fetcher makes of `handler`'s answer (the bytes, or the error)."""
    app = web.Application()
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", handler)
    server = await aiohttp_server(app)
    fetcher = MetadataFetcher(UpstreamSettings(url=str(server.make_url("/mcp"))))
    try:
        return await fetcher.fetch(
            str(server.make_url("/.well-known/oauth-protected-resource/mcp"))
        ), server
    except (UpstreamProtocolError, UpstreamRedirected) as exc:
        return exc, server
    finally:
        await fetcher.aclose()


async def test_a_metadata_document_is_read_to_its_end(aiohttp_server: ServerFactory) -> None:
    document = b'{"resource": "x", "padding": "' + b"p" * 60_000 + b'"}'

    async def handler(request: web.Request) -> web.StreamResponse:
        return await chunked_json(request, document)

    fetched, _ = await metadata(aiohttp_server, handler)
    assert fetched == document


async def test_a_metadata_document_past_64_kib_is_refused(aiohttp_server: ServerFactory) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await chunked_json(request, b'{"padding": "' + b"p" * 70_000 + b'"}')

    fetched, _ = await metadata(aiohttp_server, handler)
    assert isinstance(fetched, UpstreamProtocolError)
    assert "larger than 65536 bytes" in fetched.message


async def test_metadata_redirects_are_not_followed(aiohttp_server: ServerFactory) -> None:
    other = Recorder()
    elsewhere = await other.serve(aiohttp_server)
    fetched, _ = await metadata(aiohttp_server, redirect(str(elsewhere.make_url("/prm"))))
    assert isinstance(fetched, UpstreamRedirected)
    assert other.seen == []


async def test_the_clients_own_session_headers_never_reach_another_origin(
    aiohttp_server: ServerFactory,
) -> None:
    """aiohttp strips only `Authorization` and `Cookie` when it follows a redirect to another
    origin: the rule must stop it before, or `upstream.headers` would go along."""
    other = Recorder()
    elsewhere = await other.serve(aiohttp_server)
    upstream = await Recorder().serve(
        aiohttp_server, ("/mcp", redirect(str(elsewhere.make_url("/mcp")), 308))
    )
    with pytest.raises(UpstreamRedirected):
        await send(upstream, "GET")
    async with aiohttp.ClientSession(headers=SECRET) as plain:  # what the rule prevents
        async with plain.get(upstream.make_url("/mcp")) as response:
            assert response.status == 200
    assert other.seen[0][2]["X-API-Key"] == SECRET["X-API-Key"]
