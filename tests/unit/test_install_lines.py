"""No page offers to install the bridge from PyPI by its name (issue 44, item 11): it is installed
from the checkout (`uv tool install .`, with an extra: `uv tool install '.[otel]'`); the README
offered `pip install 'mrtr-bridge[otel]'`, which fetches nothing of ours."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = re.compile(r"(pip|pipx|uv pip|uv tool) install\s+['\"]?mrtr-bridge\b")


def test_no_page_installs_the_bridge_by_its_name() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    offending = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if BY_NAME.search(line)
    ]
    assert offending == []
    assert "uv tool install '.[otel]'" in (ROOT / "docs" / "operations.md").read_text()
