#!/usr/bin/env python3
"""A legacy (2025-11-25) peer for `test_foundation.py`, run by `.venv-legacy` (mcp 1.x FastMCP): it
has `instructions` and paginates `tools/list` and `prompts/list`, two items a page, with opaque
cursors (`page-<offset>`); an unknown cursor is JSON-RPC `-32602`. The conformance fixture does
neither.

    python foundation_paged_server.py --port N        # Streamable HTTP on 127.0.0.1:N/mcp
    python foundation_paged_server.py --transport stdio
"""

from __future__ import annotations

import argparse
import sys

import mcp.types as types
from mcp.server.fastmcp import FastMCP
from mcp.shared.exceptions import McpError

INSTRUCTIONS = "Paged fixture: list tools page by page, then call any tool_<n>."
PAGE_SIZE = 2
COUNT = 5

mcp = FastMCP(name="foundation-paged-fixture", instructions=INSTRUCTIONS, host="127.0.0.1")


def _tool(index: int) -> types.Tool:
    schema = {"type": "object", "properties": {}}
    return types.Tool(name=f"tool_{index}", description=f"Paged tool {index}", inputSchema=schema)


def _prompt(index: int) -> types.Prompt:
    return types.Prompt(name=f"prompt_{index}", description=f"Paged prompt {index}", arguments=[])


def _page(cursor: str | None) -> tuple[range, str | None]:
    """The indexes of one page and the cursor of the next (None on the last page)."""
    start = 0
    if cursor is not None:
        if not cursor.startswith("page-") or not cursor[5:].isdigit() or int(cursor[5:]) >= COUNT:
            raise McpError(
                types.ErrorData(code=types.INVALID_PARAMS, message=f"Invalid cursor: {cursor}")
            )
        start = int(cursor[5:])
    end = min(start + PAGE_SIZE, COUNT)
    return range(start, end), (f"page-{end}" if end < COUNT else None)


async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
    indexes, next_cursor = _page(request.params.cursor if request.params else None)
    return types.ListToolsResult(tools=[_tool(i) for i in indexes], nextCursor=next_cursor)


async def list_prompts(request: types.ListPromptsRequest) -> types.ListPromptsResult:
    indexes, next_cursor = _page(request.params.cursor if request.params else None)
    return types.ListPromptsResult(prompts=[_prompt(i) for i in indexes], nextCursor=next_cursor)


async def call_tool(name: str, arguments: dict[str, object]) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"called {name}")]


mcp._mcp_server.list_tools()(list_tools)
mcp._mcp_server.list_prompts()(list_prompts)
mcp._mcp_server.call_tool(validate_input=False)(call_tool)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8932, help="HTTP port (binds 127.0.0.1 only)")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.port = args.port
    mcp.settings.log_level = "WARNING"
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
