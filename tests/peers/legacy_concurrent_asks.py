#!/usr/bin/env python3
"""A legacy (`mcp` 1.x) client on ONE session calling the interactive server's `ask` for every tag
at once, each question answered with its echo (`re: <question>`): the ground truth for held calls
that share a session through the bridge. Run it from `.venv-legacy`; prints one JSON object, each
tag's parsed tool result.

    python tests/peers/legacy_concurrent_asks.py --url URL tag-1 tag-2 tag-3
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def echo(_ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": f"re: {params.message}"})


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("tags", nargs="+")
    args = parser.parse_args()
    async with (
        streamablehttp_client(args.url) as (read, write, _),
        ClientSession(read, write, elicitation_callback=echo) as session,
    ):
        await session.initialize()
        results = await asyncio.gather(
            *(
                session.call_tool("ask", {"tag": tag, "question": f"Question for {tag}?"})
                for tag in args.tags
            )
        )
    report = {
        tag: json.loads(result.content[0].text)  # type: ignore[union-attr]
        for tag, result in zip(args.tags, results, strict=True)
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
