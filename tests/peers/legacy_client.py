#!/usr/bin/env python3
"""A legacy (mcp 1.x) client for the migration tests: run it from `.venv-legacy`.

Connects to URL over Streamable HTTP (or launches COMMAND over stdio), calls `test_elicitation`
with an elicitation callback that accepts with {"response": <answer>}, then lists the tools, and
prints one JSON line: the negotiated version, the tool result text, the elicitation messages it
was asked, the number of tools and whether a session id was issued.

Over https, `--ca` names the CAs to trust and `--client-cert` a PEM file with a client certificate
and its key (through the SDK's `httpx_client_factory`, as a user of the SDK sets them).

Usage:
    python tests/peers/legacy_client.py --url http://127.0.0.1:8080/mcp --answer yes python
    tests/peers/legacy_client.py --command "mrtr-bridge stdio --upstream-command ..." --answer yes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import ssl
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def _exercise(session: ClientSession, asked: list[str], answer: str) -> dict[str, Any]:
    init = await session.initialize()
    result = await session.call_tool("test_elicitation", {"message": f"legacy says {answer}"})
    tools = await session.list_tools()
    text = (
        result.content[0].text
        if result.content and isinstance(result.content[0], types.TextContent)
        else ""
    )
    return {
        "protocolVersion": init.protocolVersion,
        "server": init.serverInfo.name,
        "text": text,
        "asked": asked,
        "tools": len(tools.tools),
    }


def _tls_client_factory(ca: str | None, client_cert: str | None) -> Any:
    """The SDK's own client factory, or one whose clients trust `ca` and present `client_cert`."""
    if ca is None and client_cert is None:
        return create_mcp_http_client
    context = ssl.create_default_context(cafile=ca)
    if client_cert is not None:
        context.load_cert_chain(client_cert)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        # the SDK's own client's settings (mcp/shared/_httpx_utils.py), with the TLS context
        return httpx.AsyncClient(
            headers=headers,
            timeout=timeout or httpx.Timeout(30.0, read=300.0),
            auth=auth,
            follow_redirects=True,
            verify=context,
        )

    return factory


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--command")
    parser.add_argument("--answer", default="yes")
    parser.add_argument("--ca")
    parser.add_argument("--client-cert")
    args = parser.parse_args()
    asked: list[str] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"response": args.answer})

    if args.url:
        factory = _tls_client_factory(args.ca, args.client_cert)
        async with streamablehttp_client(args.url, httpx_client_factory=factory) as (
            read,
            write,
            get_session_id,
        ):
            async with ClientSession(read, write, elicitation_callback=elicit) as session:
                report = await _exercise(session, asked, args.answer)
                report["sessionId"] = get_session_id() is not None
    else:
        argv = shlex.split(args.command)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicit) as session:
                report = await _exercise(session, asked, args.answer)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
