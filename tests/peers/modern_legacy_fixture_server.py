#!/usr/bin/env python3
"""The legacy conformance fixture's tool contract on a modern-only `mcp` 2.x server (run it from
`.venv`): what the 2025-11-25 server scenarios call, asked the 2026-07-28 way.

It is `modern_fixture_server.py` (every shared fixture) plus the tools only the 2025-11-25
scenarios use, answering as `legacy_fixture_server.py` does: `test_sampling`, `test_elicitation`,
`test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums` (an `InputRequiredResult`,
then the same text from `inputResponses`) and `test_tool_with_logging`. A legacy `initialize` gets
-32022 inside an HTTP 200 (modern-only), so a legacy client reaches it only through the bridge's
reverse direction; `tests/conformance/run_legacy_clients.sh` (REVERSE=1) scores that.

    python tests/peers/modern_legacy_fixture_server.py --port N
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from modern_fixture_server import mcp
from modern_interactive_server import refuse_initialize

RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {"response": {"type": "string", "description": "User's response"}},
    "required": ["response"],
}
DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Simple enum without titles",
            "enum": ["active", "inactive", "pending"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Enum with titled options (oneOf)",
            "oneOf": [
                {"const": "low", "title": "Low Priority"},
                {"const": "medium", "title": "Medium Priority"},
                {"const": "high", "title": "High Priority"},
            ],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Multi-select without titles",
            "items": {"type": "string", "enum": ["read", "write", "execute"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Multi-select with titled options",
            "items": {
                "anyOf": [
                    {"const": "feature", "title": "New Feature"},
                    {"const": "bug", "title": "Bug Fix"},
                    {"const": "docs", "title": "Documentation"},
                ]
            },
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy enum with enumNames",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    },
    "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
}


def _asked(ctx: Context, key: str, message: str, schema: dict[str, Any]) -> Any:
    """The accepted or refused answer to `key`, or the InputRequiredResult asking for it."""
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, ElicitResult):
        return answer
    params = ElicitRequestFormParams(message=message, requested_schema=schema)
    return InputRequiredResult(input_requests={key: ElicitRequest(params=params)})


def _content(answer: ElicitResult) -> str:
    return json.dumps(answer.content or {}) if answer.action == "accept" else "{}"


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(line)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> Any:
    """Tests server-initiated sampling (LLM completion request)"""
    answer = (ctx.input_responses or {}).get("sampling")
    if isinstance(answer, CreateMessageResult):
        text = answer.content.text if isinstance(answer.content, TextContent) else "No response"
        return f"LLM response: {text}"
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    params = CreateMessageRequestParams(messages=[message], max_tokens=100)
    return InputRequiredResult(input_requests={"sampling": CreateMessageRequest(params=params)})


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> Any:
    """Tests server-initiated elicitation (user input request)"""
    answer = _asked(ctx, "elicitation", message, RESPONSE_SCHEMA)
    if isinstance(answer, ElicitResult):
        return f"User response: action={answer.action}, content={_content(answer)}"
    return answer


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> Any:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    answer = _asked(ctx, "defaults", "Please provide user information", DEFAULTS_SCHEMA)
    if isinstance(answer, ElicitResult):
        return f"Elicitation result: action={answer.action}, content={_content(answer)}"
    return answer


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> Any:
    """Tests elicitation with enum schema variations per SEP-1330"""
    message = "Please select values using different enum schema types"
    answer = _asked(ctx, "enums", message, ENUMS_SCHEMA)
    if isinstance(answer, ElicitResult):
        return f"Elicitation completed: action={answer.action}, content={_content(answer)}"
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = refuse_initialize(mcp.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
