"""The README's Python example, run as written against the demo server behind the bridge, as a
newcomer runs it after `make run`: the block is saved as a file and run by the interpreter that
has the `mcp` 2.x client, its URL pointed at this test's bridge (the one change made to it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .harness import DEMO_SERVER, REPO_ROOT, Peers

README = REPO_ROOT / "README.md"
MAKE_RUN_URL = "http://127.0.0.1:8080/mcp"
TIMEOUT_S = 60


def test_the_readme_example_books_a_table_through_the_bridge(peers: Peers, tmp_path: Path) -> None:
    (example,) = re.findall(r"(?ms)^```python\n(.*?)^```$", README.read_text(encoding="utf-8"))
    assert example.count(MAKE_RUN_URL) == 1  # the address `make run` prints
    bridged = peers.bridged(DEMO_SERVER)
    script = tmp_path / "example.py"
    script.write_text(example.replace(MAKE_RUN_URL, bridged.url), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "Booked Chez Nous for 2 under Ada.\n"), done.stderr
