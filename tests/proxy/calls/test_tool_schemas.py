"""The engine's memory of tool input schemas (for x-mcp-header checks) stays bounded and fresh."""

from __future__ import annotations

from proxy.engine.routes.route_context import ToolSchemas
from proxy.upstream.pool import SessionKey

SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def _listing(*names: str) -> dict[str, object]:
    return {
        "tools": [{"name": name, "inputSchema": SCHEMA} for name in names] + [{"name": 7}, "junk"]
    }


def test_remember_keeps_named_tools_only() -> None:
    """Entries without a string name are skipped; each tool maps to its inputSchema."""
    schemas = ToolSchemas()
    key = SessionKey("p", "f")
    assert schemas.remember(key, _listing("a", "b")) == {"a": SCHEMA, "b": SCHEMA}
    assert schemas.get(key) == {"a": SCHEMA, "b": SCHEMA}


def test_least_recently_used_key_goes_first() -> None:
    """Past the bound, the key used longest ago is forgotten; a read counts as a use."""
    schemas = ToolSchemas(max_keys=2)
    first, second, third = SessionKey("p1", "f"), SessionKey("p2", "f"), SessionKey("p3", "f")
    schemas.remember(first, _listing("a"))
    schemas.remember(second, _listing("b"))
    assert schemas.get(first) is not None
    schemas.remember(third, _listing("c"))
    assert (schemas.get(first) is not None, schemas.get(second), len(schemas)) == (True, None, 2)


def test_list_changed_forgets_only_that_principal() -> None:
    """tools/list_changed for one principal drops its entries and keeps everyone else's."""
    schemas = ToolSchemas()
    mine, mine_other_caps, theirs = (
        SessionKey("me", "f1"),
        SessionKey("me", "f2"),
        SessionKey("you", "f1"),
    )
    for key in (mine, mine_other_caps, theirs):
        schemas.remember(key, _listing("a"))
    schemas.forget_principal("me")
    assert (schemas.get(mine), schemas.get(mine_other_caps), schemas.get(theirs)) == (
        None,
        None,
        {"a": SCHEMA},
    )
