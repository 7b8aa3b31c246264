#!/usr/bin/env python3
"""The conformance fixture server as a 2025-06-18 server: `legacy_fixture_server.py`, unchanged,
loaded on `mcp` 1.12.4 (which negotiates 2025-06-18; run it from `.venv-2025-06-18`), with the port
below for what that SDK lacks and what the revision does not have. `make conformance` runs the
2026-07-28 suite through the bridge in front of it (docs/conformance-2025-06-18.md).

The port, item by item (everything else is the fixture as written):
- `UrlElicitationRequiredError` does not exist in `mcp` 1.12 (URL elicitation is 2025-11-25); the
  fixture only uses it as the base of its `ProtocolError`, so a plain `McpError` subclass stands in.
- A tool cannot answer with a JSON-RPC error in FastMCP 1.12 (every exception becomes `isError:
  true`); a `ProtocolError` raised by a tool is carried out of the tools/call handler and raised
  there, where the SDK answers an `McpError` as a JSON-RPC error (`test_missing_capability`'s
  -32021).
- FastMCP 1.12 finds a tool's context parameter only by a real `Context` annotation, and the
  fixture's annotations are strings (`from __future__ import annotations`): a parameter named `ctx`
  is the context.
- FastMCP 1.12 prompts get no context: a prompt whose only parameter is `ctx` gets the request's.
- `FastMCP.remove_tool` does not exist in 1.12: it removes the tool from the tool manager.
- Elicitation at 2025-06-18 has no `mode` field, no defaults and no multi-select or titled enums:
  the pushes leave `mode` out, and the two tools that only exercise 2025-11-25 schemas (SEP-1034
  defaults, SEP-1330 enums; no 2026-07-28 scenario calls them) are not offered.

Usage: `.venv-2025-06-18/bin/python tests/peers/legacy_fixture_2025_06_18.py --port N` (or
`--transport stdio`), the same flags as the fixture.
"""

import contextvars
import inspect
import sys
from typing import Any

import mcp.shared.exceptions as exceptions
import mcp.types as types
from mcp.server.fastmcp import Context
from mcp.server.fastmcp.prompts.base import Prompt
from mcp.server.fastmcp.tools.base import Tool
from mcp.server.lowlevel.server import request_ctx

if types.LATEST_PROTOCOL_VERSION != "2025-06-18":
    sys.exit(
        "run this from .venv-2025-06-18 (mcp 1.12.x); this mcp speaks "
        f"{types.LATEST_PROTOCOL_VERSION}"
    )


class _UrlElicitationRequiredError(exceptions.McpError):
    """Stand-in: the fixture's ProtocolError derives from it."""


exceptions.UrlElicitationRequiredError = _UrlElicitationRequiredError  # type: ignore[attr-defined]

_tool_from_function = Tool.from_function.__func__  # type: ignore[attr-defined]


def _tool_with_ctx(
    cls: type[Tool], fn: Any, *args: Any, context_kwarg: str | None = None, **kwargs: Any
) -> Tool:
    if context_kwarg is None and "ctx" in inspect.signature(fn).parameters:
        context_kwarg = "ctx"
    tool: Tool = _tool_from_function(cls, fn, *args, context_kwarg=context_kwarg, **kwargs)
    return tool


Tool.from_function = classmethod(_tool_with_ctx)  # type: ignore[assignment]
_prompt_from_function = Prompt.from_function.__func__  # type: ignore[attr-defined]


def _prompt_with_ctx(cls: type[Prompt], fn: Any, *args: Any, **kwargs: Any) -> Prompt:
    """A prompt whose only parameter is `ctx` gets the request's context, read when it runs."""
    if list(inspect.signature(fn).parameters) == ["ctx"]:
        original = fn

        async def fn() -> Any:
            return await original(Context(request_context=request_ctx.get()))

        fn.__name__, fn.__doc__ = original.__name__, original.__doc__
    prompt: Prompt = _prompt_from_function(cls, fn, *args, **kwargs)
    return prompt


Prompt.from_function = classmethod(_prompt_with_ctx)  # type: ignore[assignment]

import legacy_fixture_server as fixture  # noqa: E402  (after the stand-ins above)

RAISED: contextvars.ContextVar[list[exceptions.McpError] | None] = contextvars.ContextVar(
    "raised", default=None
)


def _protocol_error_init(
    self: exceptions.McpError, code: int, message: str, data: Any = None
) -> None:
    exceptions.McpError.__init__(self, types.ErrorData(code=code, message=message, data=data))
    raised = RAISED.get()
    if raised is not None:
        raised.append(self)


fixture.ProtocolError.__init__ = _protocol_error_init  # type: ignore[method-assign]
_call_tool = fixture.mcp._mcp_server.request_handlers[types.CallToolRequest]


async def _call_tool_raising(request: types.CallToolRequest) -> Any:
    raised: list[exceptions.McpError] = []
    token = RAISED.set(raised)
    try:
        result = await _call_tool(request)
    finally:
        RAISED.reset(token)
    if raised:
        raise raised[0]
    return result


fixture.mcp._mcp_server.request_handlers[types.CallToolRequest] = _call_tool_raising


async def _elicit_2025_06_18(
    ctx: Any, key: str, message: str, schema: dict[str, Any]
) -> types.ElicitResult:
    params = {"message": message, "requestedSchema": schema, **fixture._meta(key)}
    request = types.ElicitRequest.model_validate({"method": "elicitation/create", "params": params})
    result: types.ElicitResult = await fixture._send(ctx, request, types.ElicitResult)
    return result


fixture.elicit = _elicit_2025_06_18


fixture.mcp.remove_tool = lambda name: fixture.mcp._tool_manager._tools.pop(name, None)  # type: ignore[attr-defined]
for _name in ("test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"):
    fixture.mcp._tool_manager._tools.pop(_name)

if __name__ == "__main__":
    sys.exit(fixture.main())
