"""The aiohttp runner of `mrtr-bridge serve`: aiohttp's own error pages never echo the request.

When aiohttp's HTTP parser rejects a request head (a header line over
`front.max_header_field_bytes`, too many headers, a malformed request line) it answers 400 itself,
before any handler or middleware runs, with the parser's message as the body, and that message
quotes the offending bytes: an oversized `Authorization` header came back in the body.
`BridgeRunner` serves the app with a connection handler whose error responses carry only the status
line's reason phrase. The details stay in the server log, which the log scrubber
(`proxy.observe.logs`) cleans of credentials.
"""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest


def public_error_text(status: int) -> str:
    """The whole body of an error page aiohttp writes by itself, e.g. `400 Bad Request`."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"{status} {phrase}"


class _QuietRequestHandler(RequestHandler):
    """aiohttp's connection handler, with error pages that say only the status."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        return super().handle_error(request, status, exc, public_error_text(status))


class _QuietServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _QuietRequestHandler(self, loop=self._loop, **self._kwargs)


class BridgeRunner(web.AppRunner):
    """`web.AppRunner` whose connections never echo request bytes in aiohttp's own error pages."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _QuietServer
        return server


__all__ = ["BridgeRunner", "public_error_text"]
