#!/usr/bin/env python3
"""A legacy (mcp 1.x) client that logs in with OAuth: run it from `.venv-legacy`.

Connects to URL over Streamable HTTP with mcp 1.x's own `OAuthClientProvider` (authorization code +
PKCE, a pre-registered public client `--client-id`), follows the authorization URL the way a browser
would (the test authorization server redirects at once), calls `whoami` and `book_table` (answering
its elicitation with the name Ada), and prints one JSON line: the negotiated version, both tool
texts, and every HTTP exchange it made as [method, URL without query, status], in order.

Usage: python tests/peers/legacy_oauth_client.py --url URL --client-id ID
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from mcp import ClientSession, types
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:1/callback"  # never contacted: the code is read off the redirect


class Storage(TokenStorage):
    def __init__(self, client_id: str) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = OAuthClientInformationFull(
            client_id=client_id, redirect_uris=[REDIRECT_URI], token_endpoint_auth_method="none"
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """Opens the authorization URL and keeps the code and state the redirect carried."""

    def __init__(self) -> None:
        self.redirect: dict[str, list[str]] = {}

    async def open(self, authorization_url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False) as http:
            response = await http.get(authorization_url)
        self.redirect = parse_qs(urlsplit(response.headers["location"]).query)

    async def callback(self) -> tuple[str, str | None]:
        return self.redirect["code"][0], self.redirect.get("state", [None])[0]


def _text(result: types.CallToolResult) -> str:
    content = result.content[0] if result.content else None
    return content.text if isinstance(content, types.TextContent) else ""


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--client-id", required=True)
    args = parser.parse_args()
    wire: list[list[Any]] = []

    async def record(response: httpx.Response) -> None:
        request = response.request
        wire.append([request.method, str(request.url).split("?", 1)[0], response.status_code])

    def client_factory(
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        client = create_mcp_http_client(headers, timeout, auth)
        client.event_hooks["response"].append(record)
        return client

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    browser = Browser()
    metadata = OAuthClientMetadata(
        client_name=args.client_id,
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="none",
    )
    auth = OAuthClientProvider(
        args.url,
        metadata,
        Storage(args.client_id),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    async with streamablehttp_client(args.url, auth=auth, httpx_client_factory=client_factory) as (
        read,
        write,
        _,
    ):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            init = await session.initialize()
            who = await session.call_tool("whoami", {})
            booked = await session.call_tool("book_table", {"restaurant": "Chez Nous"})
    report = {
        "protocolVersion": init.protocolVersion,
        "whoami": _text(who),
        "booked": _text(booked),
        "wire": wire,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
