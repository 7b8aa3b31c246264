"""The documentation a newcomer reads: a README that fits on a screen or two, a docs index that
links every page, relative links that lead somewhere (file and heading), and no lab notes (issue or
batch numbers) on the user's path. Measurements live in bench/README.md, decisions in
docs/decisions.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MAX_README_LINES = 200
# The pages a user reads on the way in: no issue numbers or batches there.
USER_PATH = (
    README,
    DOCS / "README.md",
    DOCS / "your-server.md",
    DOCS / "desktop-clients.md",
    DOCS / "several-servers.md",
    DOCS / "troubleshooting.md",
    DOCS / "migration.md",
    DOCS / "configuration.md",
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"(?ms)^```.*?^```")
# "issue 30", "(#30)", "the twelfth batch": how lab notes cite their origin
LAB_NOTES = re.compile(r"\bissues? #?\d+|(?<=\s)#\d+\b|\(#\d+\)|\bthe \w+th batch\b", re.IGNORECASE)


def prose(path: Path) -> str:
    """The page without code blocks and inline code (links there are examples)."""
    return re.sub(r"`[^`\n]*`", "", CODE_BLOCK.sub("", path.read_text(encoding="utf-8")))


def anchors(path: Path) -> set[str]:
    """The ids a link may name in `path`: GitHub's heading slugs, and explicit `<a id>`s."""
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r'<a id="([^"]+)"', text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"(?m)^#{1,6} (.+)$", CODE_BLOCK.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), ROOT / "bench" / "README.md"]


def test_the_readme_fits_on_a_screen_or_two() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_the_docs_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {(DOCS / target.partition("#")[0]).resolve() for target in LINK.findall(prose(index))}
    missing = [page.name for page in DOCS.glob("*.md") if page != index and page not in linked]
    assert not missing, f"docs/README.md does not link {missing}"


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    broken = []
    for page in pages():
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    """The slugs follow GitHub's: a heading with code and punctuation, a repeated heading."""
    page = tmp_path / "page.md"
    page.write_text("# `make run` from a fresh clone\n## Logs\n## Logs\n", encoding="utf-8")
    assert anchors(page) == {"make-run-from-a-fresh-clone", "logs", "logs-1"}


def test_the_user_path_holds_no_lab_notes() -> None:
    found = [
        f"{page.relative_to(ROOT)}: {hit.group(0)!r}"
        for page in USER_PATH
        for hit in LAB_NOTES.finditer(page.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)
