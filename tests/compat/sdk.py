"""Which SDK or framework (and release) an installed server runs on, read from its install: the
TypeScript SDK (1.x `@modelcontextprotocol/sdk`, 2.x `@modelcontextprotocol/server`), the
TypeScript `fastmcp` and `tmcp` frameworks, the Python `mcp` SDK and FastMCP."""

from __future__ import annotations

import json
import re

from compat.catalog import Server

NPM_PACKAGES = {  # package: how the row names it
    "@modelcontextprotocol/sdk": "TS SDK",
    "@modelcontextprotocol/server": "TS SDK (server)",
    "fastmcp": "fastmcp (TS)",
    "firecrawl-fastmcp": "firecrawl-fastmcp (TS)",
    "tmcp": "tmcp",
}
PYPI_PACKAGES = {"fastmcp": "FastMCP", "mcp": "mcp"}


def _npm(server: Server) -> list[str]:
    found = []
    for package, label in NPM_PACKAGES.items():
        manifest = server.install_dir / "node_modules" / package / "package.json"
        if manifest.exists():
            found.append(f"{label} {json.loads(manifest.read_text('utf-8'))['version']}")
    return found


def _pypi(server: Server) -> list[str]:
    found = []
    for site in server.install_dir.glob("lib/python3*/site-packages"):
        for package, label in PYPI_PACKAGES.items():
            for info in site.glob(f"{package}-*.dist-info"):
                match = re.fullmatch(rf"{package}-(.+)\.dist-info", info.name)
                if match:
                    found.append(f"{label} {match.group(1)}")
    return found


def detect_sdk(server: Server) -> str:
    """e.g. "TS SDK 1.0.1" or "FastMCP 2.11.3, mcp 1.12.4"; "" when none is found."""
    return ", ".join(_npm(server) if server.ecosystem == "npm" else _pypi(server))
